//! Coordinated shards (`--shards N`): several client processes, possibly on
//! several hosts, that measure one server as one benchmark (`docs/shards.md`).
//!
//! Shard 0 is the leader: it runs the whole run as usual, and each sustained
//! cell through `shard/cell.rs`, which splits the cell's streams over the
//! shards, announces one window and assembles the cell from every shard's
//! requests. The others are followers (`shard/follower.rs`): they join the
//! leader (`shard/join.rs`; both sides prove the shared secret,
//! `shard/auth.rs`, and every later frame is sealed, `shard/seal.rs`, and
//! its numbers checked, `shard/check.rs`), run the streams they are given
//! and send them back. Messages and framing: `shard/wire.rs`; the threat
//! model: `docs/security.md`; the pure rules (split, clock estimate, bound):
//! `ldb_core::shard`.

pub mod auth;
pub(crate) mod batch;
pub(crate) mod cell;
mod check;
#[cfg(test)]
mod door_tests;
pub mod follower;
mod follower_join;
#[cfg(test)]
mod fuzz;
mod join;
pub mod leader;
pub mod offline;
pub(crate) mod planned;
pub mod rate;
pub mod record;
mod refusals;
mod seal;
pub mod session_wire;
pub mod wire;

use std::sync::Arc;

pub use auth::secret_weakness;
pub use follower::{FollowEnd, FollowerSettings, follow};
pub use leader::{LeaderSettings, ShardLeader};
pub use wire::{ShardCellData, WireOutcome};

/// Who measures the run's cells: this process alone, or this process as
/// the leader of shards. Chosen once by the session driver and passed to
/// [`crate::run::run_with`]; every phase that deals work out reads it from
/// the run context, never from a global.
#[derive(Default, Clone)]
pub enum CellExecutor {
    /// This process sends every request.
    #[default]
    Local,
    /// This process leads shards: each cell, rate, batch and replay is
    /// dealt out to the followers that joined it.
    ShardLeader(Arc<ShardLeader>),
}

impl CellExecutor {
    /// The leader, when this process leads shards.
    pub(crate) fn leader(&self) -> Option<Arc<ShardLeader>> {
        match self {
            CellExecutor::Local => None,
            CellExecutor::ShardLeader(l) => Some(l.clone()),
        }
    }
}
