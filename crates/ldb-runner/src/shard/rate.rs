//! An open-loop cell (`--request-rate`) over every shard. The leader draws
//! the cell's one schedule as a single process would and deals it out by
//! request index (`ldb_core::shard_rate::deal`); each shard sends its
//! requests at their due times on the leader's time line (its clock offset
//! applied), by the single-process sending loop (`open_loop_send.rs`), with
//! its part of `--max-in-flight`. At the end every follower sends its
//! requests back; the leader moves them onto its own clock and assembles
//! the cell from the union with the single-process code (`open_loop.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{CellCounters, FIRST_TOKEN_LIMIT, SharedWindow, StreamEnv, StreamOutcome};
use ldb_core::open_loop::RateResult;
use ldb_core::result::CellStatus;
use ldb_core::shard::{ShardCellRecord, share};
use ldb_core::shard_rate::{deal, max_overlap};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::leader::ShardLeader;
use super::wire::{Msg, ShardCellData, WireOutcome};
use crate::ctx::RunCtx;
use crate::open_loop_send::{Sender, send_all};

/// The schedule starts this far after the orders leave, so every follower
/// holds its part before the first due time (a loaded machine's message
/// delay is far below).
pub(crate) const ORDER_LEAD_S: f64 = 0.5;
/// How long the followers' results may take after the cell's time limit:
/// their requests' stop and the transfer.
const COLLECT_AFTER_LIMIT: Duration = Duration::from_secs(30);

/// Leader → follower: the follower's part of an open-loop cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RateOrder {
    /// Cell number (counts up over the run, shared with sustained cells).
    pub cell: u64,
    /// The schedule's start on the follower's clock, Unix seconds.
    pub t0: f64,
    /// The cell's time limit on the follower's clock, Unix seconds: no
    /// request is sent after it and the ones still open are cancelled.
    pub limit: f64,
    /// Its requests: (request index in the cell's schedule, due seconds
    /// after `t0`), in due order.
    pub requests: Vec<(u64, f64)>,
    /// The distinct request bodies (JSON text).
    pub bodies: Vec<String>,
    /// Per request, which body it sends.
    pub body_of: Vec<u32>,
    /// Its part of `--max-in-flight` (0: no cap).
    pub max_in_flight: u64,
    /// `--stream-idle-timeout`, seconds (none: unlimited).
    pub idle_timeout_s: Option<f64>,
}

/// What a shard's part of an open-loop cell adds to its `ShardCellData`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateShare {
    /// Per outcome (same order): its request index and due time on the
    /// shard's run clock.
    pub scheduled: Vec<(u64, f64)>,
    /// A request waited for one of the shard's `--max-in-flight` slots.
    pub capped: bool,
    /// Requests never sent: every slot still taken at the time limit.
    pub not_sent: u64,
    /// The time limit came before every request ended.
    pub timed_out: bool,
}

/// The leader's handle on one sharded open-loop cell.
pub(crate) struct RateShards {
    leader: Arc<ShardLeader>,
    cell: u64,
    members: Vec<u32>,
}

/// The followers' part of a cell, put into the leader's.
pub(crate) struct Merged {
    /// A follower's request waited for a slot.
    pub capped: bool,
    /// Requests the followers never sent.
    pub not_sent: u64,
    /// A follower reached the time limit with requests open.
    pub timed_out: bool,
    records: Vec<ShardCellRecord>,
    lost: Vec<u32>,
}

impl Merged {
    /// Each shard's record and the shards lost, of a part that holds no
    /// schedule (a session run).
    pub(crate) fn of(records: Vec<ShardCellRecord>, lost: Vec<u32>) -> Merged {
        Merged {
            capped: false,
            not_sent: 0,
            timed_out: false,
            records,
            lost,
        }
    }
}

/// A request's `(sent, ended)` on the run clock, for the most in flight.
fn interval(o: &StreamOutcome) -> (f64, f64) {
    let end = o
        .done_at
        .or(o.track.to_sample(0.0, Default::default()).end_s);
    (o.track.start(), end.unwrap_or(f64::NAN))
}

/// The most requests in flight at once over every shard, from the union
/// of their requests on the leader's clock.
pub(crate) fn most_in_flight(outs: &[(usize, f64, StreamOutcome)]) -> u64 {
    let v: Vec<(f64, f64)> = outs.iter().map(|(_, _, o)| interval(o)).collect();
    max_overlap(&v)
}

impl RateShards {
    /// When this process leads shards: measure the clocks and check them
    /// against a schedule `span_s` long (Err: why the cell may not run).
    pub(crate) async fn open(rc: &RunCtx, span_s: f64) -> Result<Option<RateShards>, String> {
        let Some(leader) = rc.executor.leader() else {
            return Ok(None);
        };
        for n in leader.take_notes() {
            rc.live.event(n);
        }
        leader.sync_clocks().await;
        let members = leader.live_members();
        if let Some(why) = super::cell::clock_refusal(&leader, &members, span_s) {
            return Err(why);
        }
        let cell = super::cell::next_cell_id();
        Ok(Some(RateShards {
            leader,
            cell,
            members,
        }))
    }

    /// Shards taking part, the leader included.
    fn count(&self) -> u32 {
        self.members.len() as u32 + 1
    }

    /// The leader's part of `--max-in-flight` (0: no cap).
    pub(crate) fn own_cap(&self, max_in_flight: u64) -> u64 {
        u64::from(share(max_in_flight as u32, self.count(), 0))
    }

    /// Deal the schedule, send every follower its part (its times on its
    /// clock) and return the leader's own requests with their bodies. `t0`
    /// and `limit` are run-clock times of the leader.
    pub(crate) fn send_orders(
        &self,
        rc: &RunCtx,
        due: &[f64],
        times: (f64, f64),
        body: &dyn Fn(usize) -> Bytes,
    ) -> (Vec<(usize, f64)>, HashMap<usize, Bytes>) {
        self.send_parts(rc, deal(due, self.count()), times, body)
    }

    /// Send every follower its part of a schedule already split, `parts[0]`
    /// the leader's and `parts[r]` the follower of rank `r` (its times on
    /// its clock); return the leader's own requests with their bodies.
    /// Each part lists (index in the schedule, due seconds after `t0`).
    pub(crate) fn send_parts(
        &self,
        rc: &RunCtx,
        parts: Vec<Vec<(usize, f64)>>,
        times: (f64, f64),
        body: &dyn Fn(usize) -> Bytes,
    ) -> (Vec<(usize, f64)>, HashMap<usize, Bytes>) {
        let p = self.prepare_parts(rc, parts, body);
        self.send_prepared(rc, p.orders, times);
        (p.mine, p.own)
    }

    /// Every follower's order of a schedule already split (as
    /// [`Self::send_parts`] takes it), built but not sent and without its
    /// times: a trace's parts can hold many MB of bodies, and building them
    /// must come before the schedule's start is fixed.
    pub(crate) fn prepare_parts(
        &self,
        rc: &RunCtx,
        parts: Vec<Vec<(usize, f64)>>,
        body: &dyn Fn(usize) -> Bytes,
    ) -> PreparedParts {
        // Every body built in schedule order, as one process builds them
        // while it sends: the intended prefix cache admits them in that order.
        let n = parts
            .iter()
            .flatten()
            .map(|&(k, _)| k + 1)
            .max()
            .unwrap_or(0);
        let mut built: Vec<Option<Bytes>> = (0..n).map(|k| Some(body(k))).collect();
        let mut take = |k: usize| built.get_mut(k).and_then(Option::take).unwrap_or_default();
        let mut parts = parts.into_iter();
        let mine = parts.next().unwrap_or_default();
        let mut orders = Vec::with_capacity(self.members.len());
        for ((rank, &i), part) in self.members.iter().enumerate().zip(parts) {
            let mut bodies: Vec<Bytes> = Vec::new();
            let mut seen: HashMap<Bytes, u32> = HashMap::new();
            let body_of = part
                .iter()
                .map(|&(k, _)| {
                    let b = take(k);
                    *seen.entry(b.clone()).or_insert_with(|| {
                        bodies.push(b);
                        bodies.len() as u32 - 1
                    })
                })
                .collect();
            let order = RateOrder {
                cell: self.cell,
                requests: part.iter().map(|&(k, d)| (k as u64, d)).collect(),
                bodies: bodies
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect(),
                body_of,
                max_in_flight: u64::from(share(
                    rc.cfg.open_loop.max_in_flight as u32,
                    self.count(),
                    rank as u32 + 1,
                )),
                idle_timeout_s: rc.cfg.timing.idle_timeout().map(|d| d.as_secs_f64()),
                ..RateOrder::default()
            };
            orders.push((i, order));
        }
        let own = mine.iter().map(|&(k, _)| (k, take(k))).collect();
        PreparedParts { orders, mine, own }
    }

    /// Send the orders [`Self::prepare_parts`] built, with the schedule's
    /// start `t0` and its `limit` (the leader's run-clock times) moved onto
    /// each follower's clock.
    pub(crate) fn send_prepared(
        &self,
        rc: &RunCtx,
        orders: Vec<(u32, RateOrder)>,
        (t0, limit): (f64, f64),
    ) {
        for (i, mut order) in orders {
            let off = self.leader.clock(i).map_or(0.0, |e| e.offset_s);
            order.t0 = rc.clock.unix(t0) + off;
            order.limit = rc.clock.unix(limit) + off;
            for bodies in leading_bodies(&mut order) {
                let cell = order.cell;
                self.leader.send(i, Msg::RateBodies { cell, bodies });
            }
            self.leader.send(i, Msg::RateStart(Box::new(order)));
        }
    }

    /// Tell every follower to stop its part now (the user skipped the cell
    /// or the run stops): what was sent still comes back.
    pub(crate) fn stop_parts(&self) {
        super::cell::stop_parts(&self.leader, &self.members, self.cell);
    }

    /// Every follower's part, until each answered, was lost, or the limit
    /// (a run-clock time) and the collection margin passed.
    pub(crate) async fn collect(
        &self,
        rc: &RunCtx,
        limit: f64,
    ) -> (BTreeMap<u32, ShardCellData>, Vec<u32>) {
        let within =
            Duration::from_secs_f64((limit - rc.clock.now()).max(0.0)) + COLLECT_AFTER_LIMIT;
        self.leader.collect(self.cell, &self.members, within).await
    }

    /// Put the followers' requests on the leader's clock into `outs`, their
    /// token gaps into `counters`, and note each shard's part.
    pub(crate) fn merge(
        &self,
        rc: &RunCtx,
        (got, lost): (BTreeMap<u32, ShardCellData>, Vec<u32>),
        outs: &mut Vec<(usize, f64, StreamOutcome)>,
        counters: &CellCounters,
    ) -> Merged {
        let own = outs.len();
        let mut m = Merged {
            capped: false,
            not_sent: 0,
            timed_out: false,
            records: vec![record(0, own as u32, outs.iter().map(|x| &x.2))],
            lost,
        };
        for (&i, d) in &got {
            let clock = self.leader.clock(i).unwrap_or_default();
            // follower run time t → its Unix clock → the leader's → leader run time
            let dt = d.origin_unix - clock.offset_s - rc.clock.unix(0.0);
            let share = d.rate.clone().unwrap_or_default();
            let from = outs.len();
            for (o, &(k, due)) in d.outcomes.iter().zip(&share.scheduled) {
                outs.push((k as usize, due + dt, o.clone().into_outcome(dt)));
            }
            counters.gaps.absorb(&d.gaps);
            m.capped |= share.capped;
            m.not_sent += share.not_sent;
            m.timed_out |= share.timed_out;
            m.records.push(ShardCellRecord {
                clock_offset_s: clock.offset_s,
                clock_uncertainty_s: clock.uncertainty_s,
                ..record(i, d.concurrency, outs[from..].iter().map(|x| &x.2))
            });
        }
        m
    }

    /// Shards taking part, the leader included.
    pub(crate) fn shard_count(&self) -> u32 {
        self.count()
    }

    /// The followers taking part, in rank order (rank 0 is the leader).
    pub(crate) fn members(&self) -> &[u32] {
        &self.members
    }

    /// This part's cell number.
    pub(crate) fn cell(&self) -> u64 {
        self.cell
    }

    /// Follower `i`'s clock offset and its uncertainty, seconds (zero when
    /// never measured).
    pub(crate) fn clock_of(&self, i: u32) -> (f64, f64) {
        let c = self.leader.clock(i).unwrap_or_default();
        (c.offset_s, c.uncertainty_s)
    }

    /// Send follower `i` a message of this part.
    pub(crate) fn send_to(&self, i: u32, m: Msg) {
        self.leader.send(i, m);
    }

    /// Each shard's part with a record of each lost one, and, when a shard
    /// was lost, why the cell is an error (`what` names the part that was
    /// not counted); `--on-shard-loss stop` then ends the run.
    pub(crate) fn close(&self, rc: &RunCtx, m: Merged, what: &str) -> Closed {
        let mut records = m.records;
        super::cell::with_lost(&self.leader, &mut records, &m.lost);
        if m.lost.is_empty() {
            return Closed {
                records,
                lost: m.lost,
                reason: None,
            };
        }
        // A session run has no rate to fall short of: its lost sessions
        // are counted apart (`replay/sessions/shards.rs`).
        let short = match what {
            "sessions" => "",
            _ => ", so the offered rate was below the rate asked for",
        };
        let reason = format!(
            "shards_lost: shard {} lost during the cell; its part of the {what} is not \
             counted{short}",
            m.lost
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        if self.leader.settings().stop_on_loss {
            rc.live
                .event(format!("run stopped: {reason} (--on-shard-loss stop)"));
            rc.controls.stop.cancel();
        } else {
            rc.live.event(format!(
                "shard {:?} lost; the next cells are split over the shards left",
                m.lost
            ));
        }
        Closed {
            records,
            lost: m.lost,
            reason: Some(reason),
        }
    }

    /// Record each shard's part on the row; a cell that lost a shard is an
    /// error (part of the schedule was never sent), and `--on-shard-loss
    /// stop` ends the run after it.
    pub(crate) fn label(&self, rc: &RunCtx, row: &mut RateResult, m: Merged) {
        let closed = self.close(rc, m, "schedule");
        row.shards = closed.records;
        let Some(reason) = closed.reason else {
            return;
        };
        row.shards_lost = closed.lost;
        row.status = CellStatus::Error;
        row.status_reason = reason;
        row.achieved_rate = None;
        row.offered_rate_measured = None;
    }
}

/// Bytes of bodies one frame of an order carries at most (one body larger
/// than this travels alone).
const PART_FRAME_BYTES: usize = 2 << 20;

/// Takes the order's bodies but the last frame's worth off it, in frames of
/// about [`PART_FRAME_BYTES`]; the follower puts them back in front of the
/// ones its `RateStart` carries.
fn leading_bodies(order: &mut RateOrder) -> Vec<Vec<String>> {
    let mut frames: Vec<Vec<String>> = Vec::new();
    let (mut frame, mut bytes) = (Vec::new(), 0usize);
    for b in std::mem::take(&mut order.bodies) {
        if bytes > 0 && bytes + b.len() > PART_FRAME_BYTES {
            frames.push(std::mem::take(&mut frame));
            bytes = 0;
        }
        bytes += b.len();
        frame.push(b);
    }
    order.bodies = frame;
    frames
}

/// The parts of a split schedule, built and not yet sent.
pub(crate) struct PreparedParts {
    /// Each follower's index and its order (times not set yet).
    pub orders: Vec<(u32, RateOrder)>,
    /// The leader's own requests: (index in the schedule, due seconds).
    pub mine: Vec<(usize, f64)>,
    /// The leader's own requests' bodies, by index.
    pub own: HashMap<usize, Bytes>,
}

impl PreparedParts {
    /// The bytes of the largest follower's bodies: what its order carries.
    pub(crate) fn largest_part_bytes(&self) -> usize {
        self.orders
            .iter()
            .map(|(_, o)| o.bodies.iter().map(String::len).sum::<usize>())
            .max()
            .unwrap_or(0)
    }
}

/// A sharded open-loop part after its end: each shard's record (the lost
/// ones included), the shards lost, and the error it makes of the cell.
pub(crate) struct Closed {
    pub records: Vec<ShardCellRecord>,
    pub lost: Vec<u32>,
    pub reason: Option<String>,
}

/// One shard's part as a record: its requests of the schedule, the ones it
/// sent, and the output tokens they received.
fn record<'a>(
    index: u32,
    assigned: u32,
    outcomes: impl Iterator<Item = &'a StreamOutcome>,
) -> ShardCellRecord {
    let (mut requests, mut tokens) = (0u64, 0u64);
    for o in outcomes {
        requests += 1;
        tokens += o.track.output_tokens();
    }
    ShardCellRecord {
        index,
        concurrency: assigned,
        delivered_tokens: tokens,
        requests,
        ..ShardCellRecord::default()
    }
}

/// A follower's part of an open-loop cell: send each request at its due
/// time on this clock (`origin_unix` is the run clock's Unix origin), cancel
/// what is open at the limit or when `cancel` fires, and return every
/// request.
pub(crate) async fn run_share(
    order: RateOrder,
    base: StreamEnv,
    origin_unix: f64,
    cancel: CancellationToken,
) -> ShardCellData {
    let clock = base.clock;
    let (t0, limit) = (order.t0 - origin_unix, order.limit - origin_unix);
    let window = Arc::new(SharedWindow::default());
    window.open(t0);
    let counters = Arc::new(CellCounters::default());
    let env = StreamEnv {
        window,
        counters: counters.clone(),
        idle_timeout: order
            .idle_timeout_s
            .map(Duration::from_secs_f64)
            .or(base.idle_timeout),
        first_token_timeout: Some(FIRST_TOKEN_LIMIT),
        ..base
    };
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs_f64((limit - clock.now()).max(0.0));
    let timer = {
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            c.cancel();
        })
    };
    let bodies: Vec<Bytes> = order.bodies.into_iter().map(Bytes::from).collect();
    let by_index: HashMap<usize, usize> = order
        .requests
        .iter()
        .zip(&order.body_of)
        .map(|(r, &b)| (r.0 as usize, b as usize))
        .collect();
    let body = |i: usize| {
        by_index
            .get(&i)
            .and_then(|&b| bodies.get(b))
            .cloned()
            .unwrap_or_default()
    };
    let due: Vec<(usize, f64)> = order
        .requests
        .iter()
        .map(|&(i, d)| (i as usize, d))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (capped, not_sent) = send_all(Sender {
        due: &due,
        t0,
        deadline,
        skip: &cancel,
        cap: (order.max_in_flight > 0)
            .then(|| Arc::new(Semaphore::new(order.max_in_flight as usize))),
        env,
        body: &body,
        tx,
        in_flight: Arc::new(AtomicU64::new(0)),
        most: Arc::new(AtomicU64::new(0)),
    })
    .await;
    let mut outs: Vec<(usize, f64, StreamOutcome)> = Vec::with_capacity(due.len());
    while let Some(o) = rx.recv().await {
        outs.push(o);
    }
    timer.abort();
    outs.sort_by_key(|(i, _, _)| *i);
    ShardCellData {
        cell: order.cell,
        concurrency: due.len() as u32,
        window_unix: Some((order.t0, order.limit)),
        origin_unix,
        outcomes: outs.iter().map(|(_, _, o)| WireOutcome::from(o)).collect(),
        gaps: counters.gaps.snapshot(),
        rate: Some(RateShare {
            scheduled: outs.iter().map(|&(i, s, _)| (i as u64, s)).collect(),
            capped,
            not_sent,
            timed_out: clock.now() >= limit,
        }),
        ..ShardCellData::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_part_travels_in_frames_and_comes_back_whole() {
        let mb = "x".repeat(1 << 20);
        let bodies: Vec<String> = (0..7).map(|i| format!("{i}{mb}")).collect();
        let mut order = RateOrder {
            bodies: bodies.clone(),
            ..RateOrder::default()
        };
        let frames = leading_bodies(&mut order);
        assert!(frames.len() >= 3, "{} frames", frames.len());
        for f in frames.iter().chain([&order.bodies]) {
            let bytes: usize = f.iter().map(String::len).sum();
            assert!(f.len() == 1 || bytes <= PART_FRAME_BYTES, "{bytes}");
        }
        // What the follower puts back together.
        let mut again: Vec<String> = frames.into_iter().flatten().collect();
        again.append(&mut order.bodies);
        assert_eq!(again, bodies);
        let mut small = RateOrder {
            bodies: vec!["{}".into()],
            ..RateOrder::default()
        };
        assert!(leading_bodies(&mut small).is_empty());
        assert_eq!(small.bodies, ["{}"]);
    }
}
