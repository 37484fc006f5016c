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

use std::sync::{Arc, OnceLock};

pub use auth::secret_weakness;
pub use follower::{FollowEnd, FollowerSettings, follow};
pub use leader::{LeaderSettings, ShardLeader};
pub use wire::{ShardCellData, WireOutcome};

/// The leader of this process's run, once installed. A process is at most
/// one shard, so one slot serves; keeping it out of the run context spares
/// every caller of `run` a field it never uses.
static LEADER: OnceLock<Arc<ShardLeader>> = OnceLock::new();

/// Make this process's sustained cells sharded (call before `run`).
pub fn install(leader: Arc<ShardLeader>) {
    let _ = LEADER.set(leader);
}

/// The installed leader, if this process leads shards.
pub(crate) fn leader() -> Option<Arc<ShardLeader>> {
    LEADER.get().cloned()
}
