//! One sustained-decode cell: scout, ramp-up to readiness, the measurement
//! window (`cell_window.rs`), closing every stream at once, and draining the
//! server.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::scrape::Scrape;
use ldb_core::live::{CellStage, LiveEvent};
use ldb_core::prompt::Message;
use ldb_core::readiness::{Decision, Observation, Readiness, auto_limit};
use ldb_core::result::{CellResult, CellStatus, PrefillEntry, round};
use ldb_core::tokens::format_context;
use tokio_util::sync::CancellationToken;

use crate::assemble::{CellInputs, assemble};
use crate::cell_io::{Opened, abort_sglang, drain, open_cell};
use crate::cell_view::{CellProgress, set_stage, update_live};
use crate::cell_window::{WindowRecord, measure_window};
use crate::ctx::RunCtx;
use crate::pool::StreamPool;
use crate::prompts::{BodyOptions, stream_body};

/// What to run.
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// Concurrency.
    pub concurrency: u32,
    /// Nominal context.
    pub context: u64,
    /// Prompt of the streams and the scout.
    pub messages: Vec<Message>,
    /// Window length, seconds (the maximum under `auto_stop`).
    pub duration: f64,
    /// `--duration auto` for a sustained cell: close the window once its
    /// rate is known (None: the window is `duration`).
    pub auto_stop: Option<ldb_core::autostop::AutoStop>,
    /// Record the scout as this context's prefill row.
    pub record_prefill: bool,
    /// Run the interference probe after the window when the run asks for
    /// it (`--mixed-prefill-contexts`): the matrix's cells, not the hidden
    /// warmup.
    pub probe: bool,
}

/// What came out.
#[derive(Debug)]
pub struct CellOutput {
    /// The cell.
    pub cell: CellResult,
    /// The scout's prefill row, when recorded.
    pub prefill: Option<PrefillEntry>,
}

pub(crate) const TICK: Duration = Duration::from_millis(250);
/// Ramp-up passes further apart than this mean the benchmark was not running
/// (four ticks): readiness starts its holds again (see `ldb_core::readiness`).
const RAMP_FREEZE_GAP_S: f64 = 1.0;
pub(crate) const OUTPUT_SLOTS: u32 = 8;

/// Run one cell, and once more when the benchmark itself stalled inside the
/// first window: a stall is this machine's fault, not the server's, and a
/// second window usually misses it. A second stall keeps the cell with its
/// `client_stall_max_s` and the report's warning.
pub async fn measure_cell(rc: &RunCtx, spec: CellSpec) -> CellOutput {
    if let Some(leader) = rc.executor.leader() {
        return crate::shard::cell::run_sharded_cell(rc, &leader, spec).await;
    }
    let first = run_cell(rc, spec.clone()).await;
    let ext = &first.cell.ext;
    if !ext.client_stalled() || ext.status.is_skip() || rc.controls.stop.is_cancelled() {
        return first;
    }
    let at = format!(
        "C={} ctx={}",
        spec.concurrency,
        format_context(spec.context)
    );
    rc.live.event(format!(
        "{at}: the benchmark was not running for {:.1} s inside the window (client stall{}); \
         measuring the cell again",
        ext.client_stall_max_s,
        stall_detail(ext)
    ));
    let record_prefill = spec.record_prefill && first.prefill.is_none();
    let mut again = run_cell(
        rc,
        CellSpec {
            record_prefill,
            ..spec
        },
    )
    .await;
    if again.cell.ext.status.is_skip() {
        return first;
    }
    again.cell.ext.measure_attempts = 2;
    if again.prefill.is_none() {
        again.prefill = first.prefill;
    }
    if again.cell.ext.client_stalled() {
        rc.live.event(format!(
            "{at}: the benchmark stalled again ({:.1} s{}); its client numbers are kept with a warning",
            again.cell.ext.client_stall_max_s,
            stall_detail(&again.cell.ext)
        ));
    }
    again
}

/// "; window 21:03:25–21:04:52 UTC; its threads waited …": when the stalled
/// window ran (to line it up with the machine's and the server's logs) and
/// what the process's counters say about why.
fn stall_detail(ext: &ldb_core::result::CellExtras) -> String {
    let mut s = String::new();
    if let (Some(a), Some(b)) = (ext.window_start_unix, ext.window_end_unix) {
        s.push_str(&format!("; window {}–{} UTC", utc_hms(a), utc_hms(b)));
    }
    if let Some(d) = ext.client_load().describe() {
        s.push_str("; ");
        s.push_str(&d);
    }
    s
}

/// Time of day (UTC) of a Unix time, `HH:MM:SS`.
fn utc_hms(unix: f64) -> String {
    chrono::DateTime::from_timestamp(unix.max(0.0) as i64, 0)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// Run one cell: scout, streams up to readiness, the window, then every
/// stream closed at once and the server drained.
pub async fn run_cell(rc: &RunCtx, mut spec: CellSpec) -> CellOutput {
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
    if spec.probe {
        crate::interference::solo_once(rc, &skip).await;
    }
    let bodies = crate::prefix_groups::group_bodies(rc, &spec.messages, decode_options(rc));
    let mut pool = StreamPool::launch(rc, bodies, spec.concurrency, OUTPUT_SLOTS, &skip);
    pool.counters.timeline.start_at(pool.launch);
    let ready = ramp_up(rc, &spec, &skip, &mut pool, None).await;
    let aborted = skip.is_cancelled() || pool.hopeless(rc.cfg.timing.max_error_rate);
    if !aborted {
        rc.live.event(ready.event_line(&at));
    }
    let win = measure_window(rc, &spec, &skip, &mut pool, aborted, None).await;
    let probe = crate::interference::after_window(rc, &spec, &skip, &mut pool, &win, aborted).await;
    set_stage(rc, &spec, CellStage::Drain, 0.0);
    pool.join(|| {
        rc.live
            .event(format!("{at}: a stream did not stop in 15 s"))
    })
    .await;
    abort_sglang(rc, &pool.outcomes).await;
    drain(rc).await;
    if pool.fatal.is_none() && skip.is_cancelled() {
        let mut s = skipped(rc, &spec);
        s.prefill = prefill;
        return s;
    }
    if probe.is_some() {
        // Requests the streams started during the probe are not the window's.
        pool.outcomes.retain(|o| o.track.start() < win.end);
    }
    let mut cell = finish(rc, &spec, &pool, &ready, &win, cell_start);
    cell.ext.scout_timeout = scouted.timeout;
    cell.ext.interference = probe;
    announce_done(rc, &at, &cell);
    rc.live.send(LiveEvent::CellEnded);
    CellOutput { cell, prefill }
}

/// `C=4 ctx=16k`, the cell as events name it.
pub(crate) fn where_(spec: &CellSpec) -> String {
    format!(
        "C={} ctx={}",
        spec.concurrency,
        format_context(spec.context)
    )
}

/// The streams' request body.
pub(crate) fn decode_body(rc: &RunCtx, spec: &CellSpec) -> Bytes {
    stream_body(&rc.model, &spec.messages, decode_options(rc))
}

/// The streams' body options.
fn decode_options(rc: &RunCtx) -> BodyOptions {
    BodyOptions {
        api: rc.cfg.target.api,
        max_tokens: rc.cfg.matrix.max_tokens,
        continuous_usage: rc.engine.supports_continuous_usage(),
        ignore_eos: !rc.cfg.matrix.respect_eos,
        temperature: rc.cfg.matrix.temperature,
        tools: rc.cfg.matrix.tools.clone(),
    }
}

/// How the ramp-up ended.
#[derive(Debug, Default)]
pub(crate) struct RampEnd {
    ready_reason: String,
    timeout_reason: String,
    pub(crate) timed_out: bool,
    plateau: bool,
    /// The scrapes' gauges during ramp-up, for the timeline.
    pub(crate) scrapes: Vec<ldb_core::timeline::ServerPoint>,
    /// Hardware mark at the streams' launch, for the timeline.
    pub(crate) hw_launch: Option<usize>,
}

impl RampEnd {
    fn from_decision(d: &Decision) -> RampEnd {
        match d {
            Decision::Ready(r) => RampEnd {
                ready_reason: r.clone(),
                ..RampEnd::default()
            },
            Decision::Plateau { reason, .. } => RampEnd {
                ready_reason: reason.clone(),
                plateau: true,
                ..RampEnd::default()
            },
            Decision::Timeout(r) => RampEnd {
                ready_reason: "warmup_timeout".into(),
                timeout_reason: r.clone(),
                timed_out: true,
                ..RampEnd::default()
            },
            Decision::Wait => RampEnd::default(),
        }
    }

    pub(crate) fn event_line(&self, at: &str) -> String {
        if self.timed_out {
            format!("warmup timeout {at} {}", self.timeout_reason)
        } else {
            format!("ready {at} {}", self.ready_reason)
        }
    }
}

/// Ramp-up until readiness, a plateau below C, the time limit, a skip or
/// failures beyond saving the cell.
/// `peers` gives the other shards' producing streams and tokens (sharded
/// runs: readiness then waits for every shard's streams).
pub(crate) async fn ramp_up(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &mut StreamPool,
    peers: Peers<'_>,
) -> RampEnd {
    let (c, ctx) = (spec.concurrency, spec.context);
    set_stage(rc, spec, CellStage::RampUp, 0.0);
    let prefill_rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    let limit = if rc.cfg.timing.cell_warmup_timeout > 0.0 {
        rc.cfg.timing.cell_warmup_timeout
    } else {
        auto_limit(c, ctx, prefill_rate)
    };
    let mut readiness = Readiness::new(c, limit)
        .with_holds(
            rc.cfg.timing.ready_stable_seconds,
            rc.cfg.timing.plateau_seconds,
        )
        .with_prefill_estimate(prefill_rate.map_or(0.0, |r| ctx as f64 / r))
        .with_freeze_gap(RAMP_FREEZE_GAP_S);
    let hw_launch = rc.hw_mark();
    let mut scrapes = crate::cell_timeline::ScrapeLog::default();
    let mut decision = Decision::Wait;
    while decision == Decision::Wait {
        if tick(skip).await {
            break;
        }
        pool.collect();
        if pool.hopeless(rc.cfg.timing.max_error_rate) {
            break;
        }
        let elapsed = rc.clock.now() - pool.launch;
        let fresh = fresh_scrape(rc, pool.launch);
        scrapes.keep(fresh.as_deref());
        let obs = Observation {
            elapsed,
            running: fresh.as_ref().and_then(|s| s.snap.running),
            waiting: fresh.as_ref().and_then(|s| s.snap.waiting),
            producing: pool.producing() + peers.map_or(0, |p| p().0),
            any_tokens: pool.counters.tokens.load(Ordering::Relaxed) + peers.map_or(0, |p| p().1)
                > 0,
        };
        let progress = CellProgress {
            stage: CellStage::RampUp,
            stage_elapsed: elapsed,
            window_elapsed: 0.0,
            obs: &obs,
            trace: None,
        };
        update_live(rc, spec, pool, &progress);
        decision = readiness.observe(obs);
    }
    let (freezes, longest) = readiness.freezes();
    if freezes > 0 {
        rc.live.event(format!(
            "{}: the benchmark was not running for up to {longest:.1} s during ramp-up \
             ({freezes}×); the readiness hold started again each time, so tokens that \
             waited unread are not counted in the window",
            where_(spec)
        ));
    }
    RampEnd {
        scrapes: scrapes.points,
        hw_launch,
        ..RampEnd::from_decision(&decision)
    }
}

/// The other shards' producing streams and tokens received, for readiness.
pub(crate) type Peers<'a> = Option<&'a dyn Fn() -> (u32, u64)>;

/// The cell result from the streams' outcomes and the window's record.
pub(crate) fn finish(
    rc: &RunCtx,
    spec: &CellSpec,
    pool: &StreamPool,
    ramp: &RampEnd,
    win: &WindowRecord,
    cell_start: f64,
) -> CellResult {
    let (c, ctx) = (spec.concurrency, spec.context);
    let (hw, hw_summary) = rc.hw_between(win.hw_start, win.hw_end);
    let mut cell = assemble(CellInputs {
        concurrency: c,
        context: ctx,
        engine: rc.engine,
        outcomes: &pool.outcomes,
        window_start: win.start,
        window_end: win.end,
        start_scrape: win.start_scrape.as_ref(),
        end_scrape: win.end_scrape.as_ref(),
        sched: &win.sched,
        confirm_scrape: win.confirm.as_ref(),
        producing_samples: &win.producing,
        readiness_failed: ramp.timed_out || ramp.plateau,
        accept_len_ref: rc.cfg.output.accept_len_ref,
        hw: hw_summary.as_ref(),
        gaps: pool.counters.gaps.stats(),
        ignore_eos: !rc.cfg.matrix.respect_eos,
        max_error_rate: rc.cfg.timing.max_error_rate,
    });
    // In memory only: `--repeat` pools the repeats' gap histograms.
    cell.ext.gap_counts = Some(pool.counters.gaps.snapshot());
    cell.ext.client_stall_max_s = round(win.stall, 3);
    cell.ext.client_runqueue_wait_s = win.load.runqueue_wait_s.map(|s| round(s, 3));
    cell.ext.client_major_faults = win.load.major_faults;
    cell.ext.machine_steal_s = win.load.steal_s.map(|s| round(s, 2));
    cell.ext.client_cpu_share = win.headroom.cpu_share.map(|s| round(s, 3));
    cell.ext.event_loop_lag_p99 = win.headroom.loop_lag_p99_s.map(|s| round(s, 4));
    cell.ext.client_limited = win.headroom.limited();
    cell.ext.measure_attempts = 1;
    win.stop.record(&mut cell.ext);
    cell.ext.window_start_unix = Some(rc.clock.unix(win.start));
    cell.ext.window_end_unix = Some(rc.clock.unix(win.end));
    cell.wall_time = rc.clock.now() - cell_start;
    cell.warmup_duration = win.start - cell_start;
    cell.ext.ramp_seconds = win.start - pool.launch;
    cell.warmup_timed_out = ramp.timed_out;
    cell.ready_reason = ramp.ready_reason.clone();
    cell.timeout_reason = ramp.timeout_reason.clone();
    cell.hardware_summary = hw;
    cell.ext.kv_required_tokens = u64::from(c) * (ctx + rc.cfg.matrix.max_tokens);
    cell.ext.timeline = crate::cell_timeline::timeline(rc, pool, ramp, win);
    if let Some(err) = &pool.fatal {
        cell.ext.status = CellStatus::Error;
        cell.ext.status_reason = err.clone();
        cell.aggregate_tps = None;
        cell.per_request_avg_tps = None;
    }
    cell
}

/// `cell done …` (and `cell error …`) in the event log.
pub(crate) fn announce_done(rc: &RunCtx, at: &str, cell: &CellResult) {
    let msg = match cell.aggregate_tps {
        Some(v) => format!("{v:.1} tok/s"),
        None => cell.ext.status.as_str().to_uppercase(),
    };
    let norm = if cell.spec.steps_per_s > 0.0 {
        format!(
            " | norm {:.1} step/s len={:.2}",
            cell.spec.steps_per_s, cell.spec.accept_len_effective
        )
    } else {
        String::new()
    };
    rc.live.event(format!("cell done {at} {msg}{norm}"));
    if cell.ext.status == CellStatus::Error {
        rc.live
            .event(format!("cell error {at}: {}", cell.ext.status_reason));
    }
}

pub(crate) fn skipped(rc: &RunCtx, spec: &CellSpec) -> CellOutput {
    CellOutput {
        cell: user_skip(
            rc,
            spec.concurrency,
            spec.context,
            ldb_core::result::DecodeMode::Duration,
        ),
        prefill: None,
    }
}

/// A cell the user skipped (`s`) or cut short by stopping the run.
pub(crate) fn user_skip(
    rc: &RunCtx,
    concurrency: u32,
    context: u64,
    mode: ldb_core::result::DecodeMode,
) -> CellResult {
    let why = if rc.controls.stop.is_cancelled() {
        "run stopped by the user"
    } else {
        "skipped by the user"
    };
    rc.live.event(format!(
        "cell skipped C={concurrency} ctx={}",
        format_context(context)
    ));
    rc.live.send(LiveEvent::CellEnded);
    CellResult::skipped(
        concurrency,
        context,
        mode,
        CellStatus::SkippedUser,
        why.into(),
    )
}

pub(crate) async fn tick(skip: &CancellationToken) -> bool {
    tokio::select! {
        _ = skip.cancelled() => true,
        _ = tokio::time::sleep(TICK) => false,
    }
}

fn fresh_scrape(rc: &RunCtx, since: f64) -> Option<Arc<Scrape>> {
    if !rc.metrics {
        return None;
    }
    rc.scraper.latest().filter(|s| s.sent >= since)
}
