//! A sharded cell's window as the leader plans it: both edges announced to
//! every shard before it opens, and under `--duration auto` its end moved
//! earlier once the aggregate rate is known. The rule is the single
//! process's (`window_stop.rs`) over the sum of every shard's window
//! tokens (the followers report theirs with their status), and the new end
//! is announced [`CLOSE_LEAD_S`] ahead, so each follower moves its end
//! before it passes.

use std::cell::Cell;

use std::sync::atomic::Ordering;

use super::leader::ShardLeader;
use crate::ctx::RunCtx;
use crate::pool::StreamPool;
use crate::window_stop::WindowStop;

/// How far ahead of the new end an early close is announced (a LAN or
/// loopback message takes well under a millisecond; a loaded machine's
/// follower reads it within a tick).
const CLOSE_LEAD_S: f64 = 0.3;

/// The window of one sharded cell.
pub(crate) struct Planned<'a> {
    start: f64,
    end: Cell<f64>,
    auto: Option<Auto<'a>>,
}

/// What an early close needs: whom to tell, and whether it was decided.
struct Auto<'a> {
    leader: &'a ShardLeader,
    members: &'a [u32],
    cell: u64,
    decided: Cell<bool>,
}

impl<'a> Planned<'a> {
    /// `[start, end]` on the leader's run clock; with `early` (under
    /// `--duration auto`: the leader, the followers, the cell number) the
    /// end may move earlier.
    pub(crate) fn new(
        (start, end): (f64, f64),
        early: Option<(&'a ShardLeader, &'a [u32], u64)>,
    ) -> Planned<'a> {
        Planned {
            start,
            end: Cell::new(end),
            auto: early.map(|(leader, members, cell)| Auto {
                leader,
                members,
                cell,
                decided: Cell::new(false),
            }),
        }
    }

    /// The window's edges now.
    pub(crate) fn edges(&self) -> (f64, f64) {
        (self.start, self.end.get())
    }
}

/// One pass of the window's loop: true when the window is over. One
/// process asks its closing rule; a sharded window closes at its planned
/// end, which under `--duration auto` the rule, fed every shard's window
/// tokens, moves earlier once (announced to every follower and set on the
/// leader's own window at once).
pub(crate) fn window_closes(
    rc: &RunCtx,
    planned: Option<&Planned<'_>>,
    stop: &mut WindowStop,
    elapsed: f64,
    pool: &StreamPool,
) -> bool {
    let own_tokens = pool.counters.window_tokens.load(Ordering::Relaxed);
    let Some(p) = planned else {
        return stop.pass(rc, elapsed, own_tokens);
    };
    if let Some(a) = p.auto.as_ref().filter(|a| !a.decided.get())
        && let Some(peers) = peer_tokens_now(rc, a, p.start)
        && stop.pass(rc, elapsed, own_tokens + peers)
    {
        a.decided.set(true);
        let end = (rc.clock.now() + CLOSE_LEAD_S).min(p.end.get());
        p.end.set(end);
        pool.window.close(end);
        super::cell::announce(rc, a.leader, a.members, a.cell, (p.start, end));
    }
    rc.clock.now() >= p.end.get()
}

/// The followers' window tokens now, for the closing rule: each one's
/// last report (sent four times a second) carried forward to this instant
/// at its own mean rate since the window opened, so a report's age does
/// not read as a slower rate. `None` until every follower has reported
/// from inside the window.
fn peer_tokens_now(rc: &RunCtx, a: &Auto<'_>, start: f64) -> Option<u64> {
    let (start_u, now_u) = (rc.clock.unix(start), rc.clock.unix(rc.clock.now()));
    let mut sum = 0.0;
    for &i in a.members {
        let s = a.leader.status(i).filter(|s| s.cell == Some(a.cell))?;
        let seen = s.received_unix - start_u;
        if seen < MIN_REPORT_S {
            return None;
        }
        sum += s.window_tokens as f64 * (now_u - start_u) / seen;
    }
    Some(sum.round() as u64)
}

/// A follower's report this far into the window is the first the rule
/// reads (earlier ones hold too few tokens to carry forward).
const MIN_REPORT_S: f64 = 0.2;
