//! One sustained cell measured by every shard at once, as the leader runs
//! it: the scout here, the clocks checked, C split over the live shards,
//! readiness over all of their streams, ONE window announced in advance
//! (each follower gets it on its own clock), and at the end every shard's
//! requests put on the leader's clock and assembled exactly as if one
//! process had run all C streams (`cell::finish`, the single-process path).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ldb_core::live::{CellStage, LiveEvent};
use ldb_core::result::{CellResult, CellStatus, DecodeMode};
use ldb_core::shard::{ShardCellRecord, share, uncertainty_bound};

use super::leader::ShardLeader;
use super::planned::Planned;
use super::wire::{Msg, ShardCellData};
use crate::cell::{
    CellOutput, CellSpec, OUTPUT_SLOTS, announce_done, decode_body, finish, ramp_up, skipped,
};
use crate::cell_io::{Opened, abort_sglang, drain, open_cell};
use crate::cell_view::set_stage;
use crate::cell_window::measure_window;
use crate::ctx::RunCtx;
use crate::pool::StreamPool;

/// The window is announced this far ahead of its start, so every follower
/// knows it before it begins (a loaded machine's message delay is far below).
const ANNOUNCE_LEAD_S: f64 = 0.5;
/// How long the followers' results may take after the window closed:
/// their streams' stop bound (15 s) and the transfer.
const COLLECT_WAIT: Duration = Duration::from_secs(30);

static NEXT_CELL: AtomicU64 = AtomicU64::new(1);

/// A new cell number (sustained and open-loop cells share the count).
pub(crate) fn next_cell_id() -> u64 {
    NEXT_CELL.fetch_add(1, Ordering::Relaxed)
}

/// Run one cell over every shard.
pub(crate) async fn run_sharded_cell(
    rc: &RunCtx,
    leader: &ShardLeader,
    mut spec: CellSpec,
) -> CellOutput {
    for n in leader.take_notes() {
        rc.live.event(n);
    }
    let id = next_cell_id();
    let Opened {
        skip,
        cell_start,
        at,
        scouted,
    } = open_cell(rc, &mut spec).await;
    let prefill = scouted.prefill;
    if skip.is_cancelled() {
        return skipped(rc, &spec);
    }
    leader.sync_clocks().await;
    let members = leader.live_members();
    // Under --duration auto the window may close at its minimum length.
    let shortest = spec
        .auto_stop
        .map_or(spec.duration, |a| a.min_s.min(spec.duration));
    if let Some(why) = clock_refusal(leader, &members, shortest) {
        rc.live.event(format!("cell error {at}: {why}"));
        let cell = CellResult::skipped(
            spec.concurrency,
            spec.context,
            DecodeMode::Duration,
            CellStatus::Error,
            why,
        );
        return CellOutput { cell, prefill };
    }
    let n = members.len() as u32 + 1;
    let c = spec.concurrency;
    let body = decode_body(rc, &spec);
    let text = String::from_utf8_lossy(&body).into_owned();
    for (rank, &i) in members.iter().enumerate() {
        leader.send(
            i,
            Msg::CellStart {
                cell: id,
                concurrency: share(c, n, rank as u32 + 1),
                body: text.clone(),
                idle_timeout_s: rc.cfg.timing.idle_timeout().map(|d| d.as_secs_f64()),
            },
        );
    }
    let mine = share(c, n, 0);
    let mut pool = StreamPool::launch(rc, vec![body], mine, OUTPUT_SLOTS, &skip);
    let peers = || peer_progress(leader, &members, id);
    let ready = ramp_up(rc, &spec, &skip, &mut pool, Some(&peers)).await;
    let aborted = skip.is_cancelled() || pool.hopeless(rc.cfg.timing.max_error_rate);
    let planned = (!aborted).then(|| {
        rc.live.event(ready.event_line(&at));
        let start = rc.clock.now() + ANNOUNCE_LEAD_S;
        let end = start + spec.duration;
        announce(rc, leader, &members, id, (start, end));
        let early = spec.auto_stop.map(|_| (leader, &members[..], id));
        Planned::new((start, end), early)
    });
    let mut win = measure_window(rc, &spec, &skip, &mut pool, aborted, planned.as_ref()).await;
    stop_parts(leader, &members, id);
    set_stage(rc, &spec, CellStage::Drain, 0.0);
    pool.join(|| {
        rc.live
            .event(format!("{at}: a stream did not stop in 15 s"))
    })
    .await;
    let (got, lost) = leader.collect(id, &members, COLLECT_WAIT).await;
    let mut records = vec![own_record(
        &pool,
        mine,
        win.headroom.limited(),
        win.headroom.cpu_share,
    )];
    let extra_producing = merge_into(rc, leader, &mut pool, &got, &mut records);
    for p in &mut win.producing {
        *p += extra_producing;
    }
    abort_sglang(rc, &pool.outcomes).await;
    drain(rc).await;
    if pool.fatal.is_none() && skip.is_cancelled() {
        let mut s = skipped(rc, &spec);
        s.prefill = prefill;
        return s;
    }
    let mut cell = finish(rc, &spec, &pool, &ready, &win, cell_start);
    cell.ext.scout_timeout = scouted.timeout;
    label_shards(rc, leader, &mut cell, records, &members, &lost);
    announce_done(rc, &at, &cell);
    rc.live.send(LiveEvent::CellEnded);
    CellOutput { cell, prefill }
}

/// Open the window and return its start: now, or for a planned window
/// both edges set at once (the start is ahead) and its start awaited.
pub(crate) async fn open_window(
    rc: &RunCtx,
    skip: &tokio_util::sync::CancellationToken,
    pool: &StreamPool,
    planned: Option<(f64, f64)>,
) -> f64 {
    let Some((start, end)) = planned else {
        let now = rc.clock.now();
        pool.window.open(now);
        return now;
    };
    pool.window.close(end);
    pool.window.open(start);
    let wait = (start - rc.clock.now()).max(0.0);
    tokio::select! {
        _ = skip.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
    }
    start
}

/// One pass of the window's loop (`cell::tick`); a planned window's last
/// pass falls on its end, so the end scrape is sent there and not up to a
/// tick later. True when skipped.
pub(crate) async fn tick_within(
    rc: &RunCtx,
    skip: &tokio_util::sync::CancellationToken,
    planned: Option<(f64, f64)>,
) -> bool {
    let left = planned.map(|(_, e)| e - rc.clock.now());
    match left {
        Some(l) if l < crate::cell::TICK.as_secs_f64() => {
            tokio::select! {
                _ = skip.cancelled() => true,
                _ = tokio::time::sleep(Duration::from_secs_f64(l.max(0.0))) => false,
            }
        }
        _ => crate::cell::tick(skip).await,
    }
}

/// Why the window may not open: a shard whose clock offset is known less
/// well than the window allows (`ldb_core::shard::uncertainty_bound`).
pub(crate) fn clock_refusal(
    leader: &ShardLeader,
    members: &[u32],
    window_s: f64,
) -> Option<String> {
    let bound = uncertainty_bound(window_s);
    members.iter().find_map(|&i| match leader.clock(i) {
        None => Some(format!("shard {i}'s clock could not be measured")),
        Some(e) if e.uncertainty_s > bound => Some(format!(
            "shard {i}'s clock offset is known to ±{:.2} ms, above the ±{:.2} ms a {window_s} s \
             window allows (0.05 % of its length per edge); the window was not opened",
            e.uncertainty_s * 1e3,
            bound * 1e3
        )),
        Some(_) => None,
    })
}

/// Tell every follower in `members` to stop its part of cell `cell` now:
/// what it measured still comes back (every kind of cell ends this way).
pub(crate) fn stop_parts(leader: &ShardLeader, members: &[u32], cell: u64) {
    for &i in members {
        leader.send(i, Msg::CellEnd { cell });
    }
}

/// The other shards' producing streams and tokens in this cell.
fn peer_progress(leader: &ShardLeader, members: &[u32], cell: u64) -> (u32, u64) {
    members
        .iter()
        .filter_map(|&i| leader.status(i))
        .filter(|s| s.cell == Some(cell))
        .fold((0, 0), |(p, t), s| (p + s.producing, t + s.tokens))
}

/// Tell each follower the window on its own clock.
pub(crate) fn announce(
    rc: &RunCtx,
    leader: &ShardLeader,
    members: &[u32],
    cell: u64,
    w: (f64, f64),
) {
    for &i in members {
        let off = leader.clock(i).map_or(0.0, |e| e.offset_s);
        leader.send(
            i,
            Msg::Window {
                cell,
                start: rc.clock.unix(w.0) + off,
                end: rc.clock.unix(w.1) + off,
            },
        );
    }
}

/// The leader's own share as a shard record.
fn own_record(
    pool: &StreamPool,
    concurrency: u32,
    limited: bool,
    cpu: Option<f64>,
) -> ShardCellRecord {
    ShardCellRecord {
        index: 0,
        concurrency,
        delivered_tokens: pool.outcomes.iter().map(|o| o.track.window_tokens).sum(),
        requests: pool.outcomes.len() as u64,
        client_limited: limited,
        client_cpu_share: cpu,
        ..ShardCellRecord::default()
    }
}

/// Put every follower's requests on the leader's clock and into the pool,
/// and their gap histograms into its histogram. Returns the followers'
/// mean producing streams (added to the leader's samples).
fn merge_into(
    rc: &RunCtx,
    leader: &ShardLeader,
    pool: &mut StreamPool,
    got: &BTreeMap<u32, ShardCellData>,
    records: &mut Vec<ShardCellRecord>,
) -> f64 {
    let mut producing = 0.0;
    for (&i, d) in got {
        let clock = leader.clock(i).unwrap_or_default();
        // follower run time t → its Unix clock → the leader's → leader run time
        let dt = d.origin_unix - clock.offset_s - rc.clock.unix(0.0);
        records.push(ShardCellRecord {
            index: i,
            concurrency: d.concurrency,
            delivered_tokens: d.outcomes.iter().map(|o| o.track.window_tokens).sum(),
            requests: d.outcomes.len() as u64,
            client_limited: d.client_limited,
            client_cpu_share: d.client_cpu_share,
            clock_offset_s: clock.offset_s,
            clock_uncertainty_s: clock.uncertainty_s,
            lost: false,
        });
        pool.outcomes
            .extend(d.outcomes.iter().cloned().map(|o| o.into_outcome(dt)));
        pool.counters.gaps.absorb(&d.gaps);
        producing += d.producing_mean;
    }
    producing
}

/// Add a record of each lost shard (its last clock reading) to the shards'
/// records, in shard order.
pub(crate) fn with_lost(leader: &ShardLeader, records: &mut Vec<ShardCellRecord>, lost: &[u32]) {
    for &i in lost {
        let clock = leader.clock(i).unwrap_or_default();
        records.push(ShardCellRecord {
            index: i,
            lost: true,
            clock_offset_s: clock.offset_s,
            clock_uncertainty_s: clock.uncertainty_s,
            ..ShardCellRecord::default()
        });
    }
    records.sort_by_key(|r| r.index);
}

/// Record each shard's part; a cell that lost a shard is an error (its load
/// was not C), and `--on-shard-loss stop` ends the run after it.
pub(crate) fn label_shards(
    rc: &RunCtx,
    leader: &ShardLeader,
    cell: &mut CellResult,
    mut records: Vec<ShardCellRecord>,
    members: &[u32],
    lost: &[u32],
) {
    with_lost(leader, &mut records, lost);
    cell.ext.client_limited |= records.iter().any(|r| r.client_limited);
    cell.ext.shards = records;
    let _ = members;
    if lost.is_empty() {
        return;
    }
    cell.ext.shards_lost = lost.to_vec();
    cell.ext.status = CellStatus::Error;
    cell.ext.status_reason = format!(
        "shards_lost: shard {} lost during the cell; its streams are not counted, so the \
         load was below C",
        lost.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    cell.aggregate_tps = None;
    cell.per_request_avg_tps = None;
    if leader.settings().stop_on_loss {
        rc.live.event(format!(
            "run stopped: {} (--on-shard-loss stop)",
            cell.ext.status_reason
        ));
        rc.controls.stop.cancel();
    } else {
        rc.live.event(format!(
            "shard {lost:?} lost; the next cells are split over the shards left"
        ));
    }
}
