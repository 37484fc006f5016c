//! `--sessions` and `--trace-sessions` over shards (docs/shards.md,
//! "Sessions"). The leader plans every conversation as one process would
//! (the same salt, so the same text), deals them whole: conversation `k`
//! (in the order one process numbers them) to shard `k mod n`, and sends
//! each follower its conversations, planned, with the run's start and
//! limit on its clock. Every shard runs its own with the single-process
//! session loop (a follower in `part.rs`). At the end each follower's
//! turns come back; the leader moves them onto its clock and folds them
//! into the tally, the intended cache and the router's turns that its own
//! turns fed, and `sessions.rs` assembles the result from the union.

use std::collections::{BTreeMap, HashSet};

use ldb_core::prefix_cache::chain;
use ldb_core::prompt::Message;
use ldb_core::replay::affinity::TurnSpan;
use ldb_core::replay::session::{ConversationSegments, SessionRequest, SessionResult};
use ldb_core::result::CellStatus;
use ldb_core::shard::ShardCellRecord;
use ldb_core::shard_rate::max_overlap;

use super::super::tool_loop;
use super::turn::intend;
use super::{Due, Shared, Turn};
use crate::ctx::RunCtx;
use crate::shard::rate::{Merged, ORDER_LEAD_S, RateShards};
use crate::shard::session_wire::{SessionOrder, WireMessage, WireSession, WireTurn};
use crate::shard::wire::{Msg, ShardCellData};

pub(in crate::replay) use crate::shard::rate::Closed;

/// When this process leads shards: the clocks measured and checked against
/// `--duration` (a session run has no schedule to span; its turns' times
/// are counted from their due times, each on one shard's clock).
pub(super) async fn open(rc: &RunCtx) -> Result<Option<RateShards>, String> {
    RateShards::open(rc, rc.cfg.matrix.duration).await
}

/// A session run dealt over shards, the followers' orders built.
pub(super) struct Dealt {
    shards: RateShards,
    /// Each follower's index and order (times not set yet).
    orders: Vec<(u32, SessionOrder)>,
    /// The sessions dealt to each shard, by index (the leader's at 0).
    ids: BTreeMap<u32, HashSet<u64>>,
}

/// Deals the conversations (`plans[k]` is session `k`): without shards all
/// are this process's; over shards, session `k` goes to shard `k mod n`,
/// and each follower's are built into its order.
pub(super) fn deal(
    rc: &RunCtx,
    sh: &Shared,
    shards: Option<RateShards>,
    plans: Vec<Vec<Turn>>,
) -> (Vec<(u64, Vec<Turn>)>, Option<Dealt>) {
    let Some(shards) = shards else {
        return ((0u64..).zip(plans).collect(), None);
    };
    let n = u64::from(shards.shard_count());
    let members = shards.members().to_vec();
    let mut own = Vec::new();
    let mut parts: Vec<Vec<WireSession>> = vec![Vec::new(); members.len()];
    let mut ids: BTreeMap<u32, HashSet<u64>> = BTreeMap::new();
    for (id, turns) in (0u64..).zip(plans) {
        let rank = (id % n) as usize;
        let index = if rank == 0 { 0 } else { members[rank - 1] };
        ids.entry(index).or_default().insert(id);
        match rank {
            0 => own.push((id, turns)),
            r => parts[r - 1].push(wire_session(sh, id, turns)),
        }
    }
    rc.live.event(format!(
        "sessions over {n} shards: {} (dealt by conversation, session k to shard k mod {n})",
        (0..n as u32)
            .map(|r| {
                let i = if r == 0 { 0 } else { members[r as usize - 1] };
                ids.get(&i).map_or(0, HashSet::len).to_string()
            })
            .collect::<Vec<_>>()
            .join("/")
    ));
    let orders = members
        .iter()
        .zip(parts)
        .map(|(&i, sessions)| (i, order(rc, sh, shards.cell(), sessions)))
        .collect();
    let dealt = Dealt {
        shards,
        orders,
        ids,
    };
    (own, Some(dealt))
}

/// One follower's order, its times not set yet.
fn order(rc: &RunCtx, sh: &Shared, cell: u64, sessions: Vec<WireSession>) -> SessionOrder {
    let router = &sh.cfg.router;
    SessionOrder {
        cell,
        sessions,
        body: sh.net.body.clone(),
        seed: sh.net.seed,
        salt: sh.salt,
        context: sh.context,
        tool_loop: sh.cfg.tool_loop.map(|tl| (tl.latency, tl.result_tokens)),
        session_header: router.session_header.clone(),
        replica_header: router.replica_header.clone(),
        replica_bases: sh
            .router
            .as_ref()
            .map_or_else(Vec::new, |t| t.bases().to_vec()),
        idle_timeout_s: rc.cfg.timing.idle_timeout().map(|d| d.as_secs_f64()),
        ..SessionOrder::default()
    }
}

/// Session `id`'s turns as they travel; with the tool loop, each turn
/// carries the text of the result its call would get.
fn wire_session(sh: &Shared, id: u64, turns: Vec<Turn>) -> WireSession {
    let turns = (1u32..)
        .zip(turns)
        .map(|(turn, t)| {
            let (after_reply, at) = match t.due {
                Due::AfterReply(s) => (Some(s), None),
                Due::At(s) => (None, Some(s)),
            };
            WireTurn {
                after_reply,
                at,
                adds: t.adds.iter().map(wire_message).collect(),
                built_tokens: t.built_tokens,
                max_tokens: t.max_tokens,
                tool_result: sh
                    .cfg
                    .tool_loop
                    .map(|tl| tool_loop::result_text(sh, &tl, (id, turn))),
            }
        })
        .collect();
    WireSession { id, turns }
}

fn wire_message(m: &Message) -> WireMessage {
    let tool = m.tool.as_ref();
    WireMessage {
        role: m.role.to_string(),
        content: m.content.clone(),
        tool_calls: tool.and_then(|t| t.tool_calls.clone()),
        tool_call_id: tool.and_then(|t| t.tool_call_id.clone()),
    }
}

impl Dealt {
    /// How long before the start the orders leave: the open-loop lead, plus
    /// the time to carry the largest order at a rate slow for a busy host,
    /// so every follower holds its part before its first turn is due.
    pub(super) fn lead_s(&self) -> f64 {
        /// Bytes of an order carried per second, at worst.
        const ORDER_BYTES_PER_S: f64 = 20e6;
        let largest = self
            .orders
            .iter()
            .map(|(_, o)| {
                o.sessions
                    .iter()
                    .flat_map(|s| &s.turns)
                    .map(|t| t.adds.iter().map(|m| m.content.len()).sum::<usize>())
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        ORDER_LEAD_S + largest as f64 / ORDER_BYTES_PER_S
    }

    /// Sends every follower its order, the run's start and limit (the
    /// leader's run-clock times) moved onto its clock.
    pub(super) fn send(&mut self, rc: &RunCtx, (start, limit): (f64, f64)) {
        for (i, mut order) in std::mem::take(&mut self.orders) {
            let off = self.shards.clock_of(i).0;
            order.t0 = rc.clock.unix(start) + off;
            order.limit = rc.clock.unix(limit) + off;
            self.shards.send_to(i, Msg::SessionStart(Box::new(order)));
        }
    }

    /// Waits for every follower's turns (until each answered, was lost, or
    /// the limit and the collection margin passed) and folds them into the
    /// run's tally and `all`, on the leader's clock; each shard's part.
    pub(super) async fn finish(
        self,
        rc: &RunCtx,
        sh: &Shared,
        all: &mut Vec<SessionRequest>,
        limit: f64,
    ) -> Closed {
        if sh.skip.is_cancelled() {
            // Stopped by the user (or the limit): the followers stop too,
            // and what they sent still comes back.
            self.shards.stop_parts();
        }
        let own = self.ids.get(&0).map_or(0, HashSet::len);
        let mut records = vec![record(0, own, &all[..])];
        let (got, lost) = self.shards.collect(rc, limit).await;
        for (&i, d) in &got {
            let (offset, uncertainty) = self.shards.clock_of(i);
            // follower run time t → its Unix clock → the leader's → leader run time
            let dt = d.origin_unix - offset - rc.clock.unix(0.0);
            let mine = self.ids.get(&i).cloned().unwrap_or_default();
            let turns = fold(sh, d, dt, &mine);
            records.push(ShardCellRecord {
                clock_offset_s: offset,
                clock_uncertainty_s: uncertainty,
                ..record(i, mine.len(), &turns)
            });
            all.extend(turns);
        }
        // The most turns open at once over every shard, from the union.
        let spans: Vec<(f64, f64)> = all
            .iter()
            .map(|r| (r.request.sent, r.request.completed_at.unwrap_or(f64::NAN)))
            .collect();
        sh.tally
            .most
            .store(max_overlap(&spans), std::sync::atomic::Ordering::Relaxed);
        let mut closed = self.shards.close(rc, Merged::of(records, lost), "sessions");
        for r in closed.records.iter_mut().filter(|r| r.lost) {
            r.concurrency = self.ids.get(&r.index).map_or(0, HashSet::len) as u32;
        }
        closed
    }
}

/// One follower's turns folded into the run, their times moved by `dt`
/// onto the leader's clock; a turn of a session not dealt to it is left
/// out (never a shard's to report). Returns its turns.
fn fold(sh: &Shared, d: &ShardCellData, dt: f64, mine: &HashSet<u64>) -> Vec<SessionRequest> {
    let Some(share) = d.sessions.as_deref() else {
        return Vec::new();
    };
    let ours = |s: u64| mine.contains(&s);
    let mut turns: Vec<SessionRequest> = share
        .turns
        .iter()
        .filter(|t| ours(t.session))
        .cloned()
        .map(|t| moved(t, dt))
        .collect();
    turns.sort_by_key(|t| (t.session, t.turn));
    {
        // The intended cache, fed each session's turns in order, as its
        // own loop fed it on the follower.
        let mut cache = sh.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut conv: Option<(u64, ConversationSegments)> = None;
        for t in &turns {
            if conv.as_ref().is_none_or(|(s, _)| *s != t.session) {
                conv = Some((
                    t.session,
                    ConversationSegments::new(chain(sh.salt, t.session)),
                ));
            }
            if let Some((_, c)) = conv.as_mut() {
                let reply = t.request.completed_at.map(|_| t.request.output_tokens);
                // agent rows are not dealt out: every reply is resent
                intend(&mut cache, c, t.prompt_tokens, (reply, true));
            }
        }
    }
    if share.turns.iter().all(|t| ours(t.session)) {
        let mut caches = sh.tally.caches.lock().unwrap_or_else(|p| p.into_inner());
        caches.extend(share.caches.iter().copied());
    }
    let stops = share.stops.iter().filter(|s| ours(s.session)).cloned();
    sh.tally
        .stops
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(stops);
    if let Some(t) = &sh.router {
        let spans = share.spans.iter().filter(|s| ours(s.session));
        t.absorb(spans.map(|s| span_moved(s, dt)).collect());
    }
    sh.tally.counters.gaps.absorb(&d.gaps);
    if share.timed_out {
        sh.tally
            .timed_out
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    turns
}

/// A turn with its times moved by `dt`.
fn moved(mut t: SessionRequest, dt: f64) -> SessionRequest {
    let r = &mut t.request;
    r.scheduled += dt;
    r.sent += dt;
    for v in [&mut r.first_token, &mut r.first_answer, &mut r.completed_at] {
        if let Some(x) = v.as_mut() {
            *x += dt;
        }
    }
    t
}

fn span_moved(s: &TurnSpan, dt: f64) -> TurnSpan {
    TurnSpan {
        sent: s.sent + dt,
        end: s.end + dt,
        ..s.clone()
    }
}

/// One shard's part as a record: the sessions dealt to it, the turns it
/// sent, their output tokens.
fn record(index: u32, sessions: usize, turns: &[SessionRequest]) -> ShardCellRecord {
    ShardCellRecord {
        index,
        concurrency: sessions as u32,
        requests: turns.len() as u64,
        delivered_tokens: turns.iter().map(|t| t.request.output_tokens).sum(),
        ..ShardCellRecord::default()
    }
}

/// Records each shard's part on the result; a run that lost a shard is an
/// error: the lost shard's sessions are not counted (`sessions_lost`), and
/// `sessions` still counts them.
pub(in crate::replay) fn label(result: &mut SessionResult, c: Closed) {
    result.shards = c.records;
    if c.reason.is_none() {
        return;
    }
    let lost: u64 = result
        .shards
        .iter()
        .filter(|r| r.lost)
        .map(|r| u64::from(r.concurrency))
        .sum();
    result.status = CellStatus::Error;
    result.status_reason = format!(
        "shards_lost: shard {} lost during the run; its {lost} sessions are not counted",
        c.lost
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    result.shards_lost = c.lost;
    result.sessions_lost = lost;
}
