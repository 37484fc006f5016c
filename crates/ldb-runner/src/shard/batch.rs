//! A finite closed-loop batch (`--request-count` cells and the Burst / E2E
//! matrix, `burst.rs`) over every shard. The leader splits the batch's
//! workers (C) and its requests (N) like C — `/ n` each, the remainder one
//! each to the lowest indexes — and announces one start instant; every
//! shard runs its workers from that instant with the single-process worker
//! loop, each claiming requests from its shard's own count until its part
//! of N is handed out. At the end each follower sends every request with
//! its end time; the leader moves them onto its clock and assembles the
//! cell from the union with the single-process code (`burst/assemble.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{CellCounters, FIRST_TOKEN_LIMIT, SharedWindow, StreamEnv};
use ldb_core::shard::ShardCellRecord;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::leader::ShardLeader;
use super::rate::ORDER_LEAD_S;
use super::wire::{Msg, ShardCellData, WireOutcome};
use crate::burst::Done;
use crate::ctx::RunCtx;

/// How long the leader waits for the followers' parts after its own ended.
/// A batch has no time limit of its own (its requests run to their end),
/// so this is only the last guard: a follower that stops answering is
/// lost after 5 s of silence long before it.
const COLLECT_WAIT: Duration = Duration::from_secs(2 * 3600);

/// Leader → follower: the follower's part of a finite batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BatchOrder {
    /// Cell number (shared with the other cells' count).
    pub cell: u64,
    /// The batch's start on the follower's clock, Unix seconds.
    pub start: f64,
    /// Its workers (at most this many requests in flight).
    pub workers: u32,
    /// Its requests.
    pub requests: u64,
    /// The request body (JSON text).
    pub body: String,
    /// `--stream-idle-timeout`, seconds (none: unlimited).
    pub idle_timeout_s: Option<f64>,
}

/// `total` split over `shards`: the part of shard `rank`.
fn part(total: u64, shards: u32, rank: u32) -> u64 {
    let n = u64::from(shards.max(1));
    total / n + u64::from(u64::from(rank) < total % n)
}

/// The leader's handle on one sharded batch.
pub(crate) struct BatchShards {
    leader: Arc<ShardLeader>,
    cell: u64,
    members: Vec<u32>,
    /// The leader's own workers and requests.
    pub(crate) own: (u64, u64),
    /// The announced start, leader's run clock.
    pub(crate) start: f64,
}

impl BatchShards {
    /// When this process leads shards: measure the clocks, split the
    /// batch, send every follower its part with the start instant on its
    /// clock. Workers are min(C, N) as for one process, each shard's
    /// min(its C, its N).
    pub(crate) async fn open(
        rc: &RunCtx,
        concurrency: u32,
        n: u64,
        body: &Bytes,
    ) -> Option<BatchShards> {
        let leader = rc.executor.leader()?;
        for note in leader.take_notes() {
            rc.live.event(note);
        }
        leader.sync_clocks().await;
        let members = leader.live_members();
        let count = members.len() as u32 + 1;
        let split = |rank: u32| {
            let requests = part(n, count, rank);
            (
                part(u64::from(concurrency), count, rank).min(requests),
                requests,
            )
        };
        let cell = super::cell::next_cell_id();
        let start = rc.clock.now() + ORDER_LEAD_S;
        let text = String::from_utf8_lossy(body).into_owned();
        for (rank, &i) in members.iter().enumerate() {
            let (workers, requests) = split(rank as u32 + 1);
            let off = leader.clock(i).map_or(0.0, |e| e.offset_s);
            let order = BatchOrder {
                cell,
                start: rc.clock.unix(start) + off,
                workers: workers as u32,
                requests,
                body: text.clone(),
                idle_timeout_s: rc.cfg.timing.idle_timeout().map(|d| d.as_secs_f64()),
            };
            leader.send(i, Msg::BatchStart(Box::new(order)));
        }
        Some(BatchShards {
            leader,
            cell,
            members,
            own: split(0),
            start,
        })
    }

    /// Wait for the announced start (or the skip).
    pub(crate) async fn wait_start(&self, rc: &RunCtx, skip: &CancellationToken) {
        let wait = (self.start - rc.clock.now()).max(0.0);
        tokio::select! {
            _ = skip.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
        }
    }

    /// Tell every follower to stop its part now (the cell was skipped).
    pub(crate) fn stop_parts(&self) {
        super::cell::stop_parts(&self.leader, &self.members, self.cell);
    }

    /// Every follower's requests put on the leader's clock into `done`;
    /// each shard's part (the leader's first) and the shards lost.
    pub(crate) async fn merge(
        &self,
        rc: &RunCtx,
        done: &mut Vec<Done>,
    ) -> (Vec<ShardCellRecord>, Vec<u32>) {
        let (got, lost): (BTreeMap<u32, ShardCellData>, Vec<u32>) = self
            .leader
            .collect(self.cell, &self.members, COLLECT_WAIT)
            .await;
        let mut records = vec![record(0, self.own.0, done)];
        for (&i, d) in &got {
            let clock = self.leader.clock(i).unwrap_or_default();
            // follower run time t → its Unix clock → the leader's → leader run time
            let dt = d.origin_unix - clock.offset_s - rc.clock.unix(0.0);
            let theirs: Vec<Done> = d
                .outcomes
                .iter()
                .zip(&d.ends)
                .map(|(o, &end)| Done {
                    outcome: o.clone().into_outcome(dt),
                    end: end + dt,
                })
                .collect();
            records.push(ShardCellRecord {
                clock_offset_s: clock.offset_s,
                clock_uncertainty_s: clock.uncertainty_s,
                ..record(i, u64::from(d.concurrency), &theirs)
            });
            done.extend(theirs);
        }
        (records, lost)
    }
}

/// One shard's part as a record: its workers, its requests and their
/// output tokens.
fn record(index: u32, workers: u64, done: &[Done]) -> ShardCellRecord {
    ShardCellRecord {
        index,
        concurrency: workers as u32,
        delivered_tokens: done.iter().map(|d| d.outcome.track.output_tokens()).sum(),
        requests: done.len() as u64,
        ..ShardCellRecord::default()
    }
}

/// A follower's part of a batch: from the start instant (on this clock;
/// `origin_unix` is the run clock's Unix origin) its workers claim its
/// requests one after another until they are handed out, or `cancel`
/// fires; every request comes back with its end time.
pub(crate) async fn run_share(
    order: BatchOrder,
    base: StreamEnv,
    origin_unix: f64,
    cancel: CancellationToken,
) -> ShardCellData {
    let clock = base.clock;
    let start = order.start - origin_unix;
    let wait = (start - clock.now()).max(0.0);
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
    }
    let window = Arc::new(SharedWindow::default());
    window.open(clock.now());
    let env = StreamEnv {
        window,
        counters: Arc::new(CellCounters::default()),
        idle_timeout: order
            .idle_timeout_s
            .map(Duration::from_secs_f64)
            .or(base.idle_timeout),
        first_token_timeout: Some(FIRST_TOKEN_LIMIT),
        ..base
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let claimed = Arc::new(AtomicU64::new(0));
    let body = Bytes::from(order.body);
    for _ in 0..order.workers {
        let env = StreamEnv {
            cancel: cancel.child_token(),
            ..env.clone()
        };
        tokio::spawn(crate::burst::worker(
            env,
            body.clone(),
            claimed.clone(),
            order.requests,
            tx.clone(),
        ));
    }
    drop(tx);
    let mut done = Vec::new();
    while let Some(d) = rx.recv().await {
        done.push(d);
    }
    ShardCellData {
        cell: order.cell,
        concurrency: order.workers,
        origin_unix,
        ends: done.iter().map(|d| d.end).collect(),
        outcomes: done.iter().map(|d| WireOutcome::from(&d.outcome)).collect(),
        ..ShardCellData::default()
    }
}

/// A sharded batch after its end: each shard's part, and who was lost.
pub(crate) struct ShardedBatch {
    handle: BatchShards,
    records: Vec<ShardCellRecord>,
    lost: Vec<u32>,
}

impl ShardedBatch {
    /// Record each shard's part on the cell; a lost shard makes it an
    /// error and `--on-shard-loss` applies (as for a sustained cell).
    pub(crate) fn label(self, rc: &RunCtx, cell: &mut ldb_core::result::CellResult) {
        let h = &self.handle;
        super::cell::label_shards(rc, &h.leader, cell, self.records, &h.members, &self.lost);
    }
}

/// The workers and requests this process runs: its part over shards, else
/// min(C, N) and N.
pub(crate) fn own_part(shards: Option<&BatchShards>, concurrency: u32, n: u64) -> (u64, u64) {
    shards.map_or((u64::from(concurrency).min(n), n), |s| s.own)
}

/// Over shards: wait for the announced start.
pub(crate) async fn wait_start(
    shards: Option<&BatchShards>,
    rc: &RunCtx,
    skip: &CancellationToken,
) {
    if let Some(s) = shards {
        s.wait_start(rc, skip).await;
    }
}

/// Over shards, after the leader's own part: stop the followers' parts if
/// the cell was skipped, and put their requests into `done`.
pub(crate) async fn finish(
    shards: Option<BatchShards>,
    rc: &RunCtx,
    skip: &CancellationToken,
    done: &mut Vec<Done>,
) -> Option<ShardedBatch> {
    let handle = shards?;
    if skip.is_cancelled() {
        handle.stop_parts();
    }
    let (records, lost) = handle.merge(rc, done).await;
    Some(ShardedBatch {
        handle,
        records,
        lost,
    })
}
