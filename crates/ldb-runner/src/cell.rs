//! One sustained-decode cell: scout, ramp-up to readiness, the measurement
//! window, closing every stream at once, and draining the server.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::scrape::Scrape;
use ldb_core::client_load::ClientLoad;
use ldb_core::headroom::Headroom;
use ldb_core::live::{CellStage, LiveEvent};
use ldb_core::prompt::Message;
use ldb_core::readiness::{Decision, Observation, Readiness, auto_limit};
use ldb_core::result::{CellResult, CellStatus, PrefillEntry, round};
use ldb_core::tokens::format_context;
use tokio_util::sync::CancellationToken;

use crate::assemble::{CellInputs, assemble};
use crate::cell_io::{Opened, abort_sglang, drain, open_cell};
use crate::cell_view::{CellProgress, RateTrace, set_stage, update_live};
use crate::client_load::{read_client_load, usable_cpus};
use crate::confirm_read::edge_reads;
use crate::ctx::RunCtx;
use crate::loop_lag::LagProbe;
use crate::pool::StreamPool;
use crate::prompts::{BodyOptions, chat_body};
use crate::shard::planned::{Planned, window_closes};
use crate::stall::StallWatch;
use crate::window_stop::WindowStop;

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
    if let Some(leader) = crate::shard::leader() {
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
    let bodies = crate::prefix_groups::group_bodies(rc, &spec.messages, decode_options(rc));
    let mut pool = StreamPool::launch(rc, bodies, spec.concurrency, OUTPUT_SLOTS, &skip);
    let ready = ramp_up(rc, &spec, &skip, &mut pool, None).await;
    let aborted = skip.is_cancelled() || pool.hopeless(rc.cfg.timing.max_error_rate);
    if !aborted {
        rc.live.event(ready.event_line(&at));
    }
    let win = measure_window(rc, &spec, &skip, &mut pool, aborted, None).await;
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
    let mut cell = finish(rc, &spec, &pool, &ready, &win, cell_start);
    cell.ext.scout_timeout = scouted.timeout;
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
    chat_body(&rc.model, &spec.messages, decode_options(rc))
}

/// The streams' body options.
fn decode_options(rc: &RunCtx) -> BodyOptions {
    BodyOptions {
        max_tokens: rc.cfg.matrix.max_tokens,
        continuous_usage: rc.engine.supports_continuous_usage(),
        ignore_eos: !rc.cfg.matrix.respect_eos,
        temperature: rc.cfg.matrix.temperature,
    }
}

/// How the ramp-up ended.
#[derive(Debug, Default)]
pub(crate) struct RampEnd {
    ready_reason: String,
    timeout_reason: String,
    pub(crate) timed_out: bool,
    plateau: bool,
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
    RampEnd::from_decision(&decision)
}

/// The other shards' producing streams and tokens received, for readiness.
pub(crate) type Peers<'a> = Option<&'a dyn Fn() -> (u32, u64)>;

/// What the window saw, besides the streams' own counts.
pub(crate) struct WindowRecord {
    start: f64,
    end: f64,
    start_scrape: Option<Scrape>,
    end_scrape: Option<Scrape>,
    /// Periodic scrapes sent inside the window.
    sched: Vec<Scrape>,
    /// The confirming read of a lone queue reading (`confirm_read.rs`).
    confirm: Option<Scrape>,
    /// Producing streams at each pass.
    pub(crate) producing: Vec<f64>,
    /// Longest lateness of the driver (see `stall.rs`).
    stall: f64,
    /// The benchmark's own load over the window (see `client_load.rs`).
    load: ClientLoad,
    /// Whether the benchmark kept up (see `ldb_core::headroom`).
    pub(crate) headroom: Headroom,
    hw_start: Option<usize>,
    hw_end: Option<usize>,
    /// Why the window closed, and its rate's interval under `--duration auto`.
    stop: WindowStop,
}

/// The measurement window: open it, follow it for `spec.duration` (or until
/// its rate is known, `--duration auto`: `window_stop.rs`), close it and send
/// the end scrape, then drop every stream once it has answered. A sharded
/// cell passes its `planned` window `[start, end]` (run clock, announced to
/// every shard before it starts): it opens and closes exactly there.
pub(crate) async fn measure_window(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &mut StreamPool,
    aborted: bool,
    planned: Option<&Planned<'_>>,
) -> WindowRecord {
    // From here to the end scrape the server is measured: background
    // /metrics reads slow to --metrics-interval.
    let _measuring = rc.scraper.measuring();
    let edges = || planned.map(|p| p.edges());
    let ws = crate::shard::cell::open_window(rc, skip, pool, edges()).await;
    // The driver's own lateness from the window's first instant: each pass
    // should follow the last by one tick. A much longer gap means this
    // process was not running, so tokens piled up unread and the window's
    // client count is wrong.
    let mut stall = StallWatch::new(ws, TICK.as_secs_f64());
    let hw_start = rc.hw_mark();
    let load_start = read_client_load();
    let lag_probe = LagProbe::start();
    // The start scrape runs beside the loop, not awaited here: a freeze of
    // this process while it waited for the answer would hide from the stall
    // watch (and a slow /metrics must not pass for one).
    let start_scrape = spawn_scrape(rc, !aborted);
    let mut sched: Vec<Scrape> = Vec::new();
    let mut producing: Vec<f64> = Vec::new();
    // Periodic scrapes count from 1; the edge scrapes carry 0.
    let mut last_seq = 0;
    let mut trace = RateTrace::new(ws);
    let mut stop = WindowStop::new(spec.auto_stop, spec.duration);
    loop {
        if aborted || crate::shard::cell::tick_within(rc, skip, edges()).await {
            break;
        }
        pool.collect();
        if pool.hopeless(rc.cfg.timing.max_error_rate) {
            break;
        }
        let now = rc.clock.now();
        stall.pass(now);
        if let Some(s) = rc.scraper.latest()
            && s.seq != last_seq
            && s.sent >= ws
        {
            last_seq = s.seq;
            sched.push((*s).clone());
        }
        let now_producing = pool.producing();
        producing.push(f64::from(now_producing));
        trace.sample(now, pool.counters.window_tokens.load(Ordering::Relaxed));
        let latest = rc.scraper.latest();
        let obs = Observation {
            elapsed: now - pool.launch,
            running: latest.as_ref().and_then(|s| s.snap.running),
            waiting: latest.as_ref().and_then(|s| s.snap.waiting),
            producing: now_producing,
            any_tokens: true,
        };
        let progress = CellProgress {
            stage: CellStage::Window,
            stage_elapsed: now - ws,
            window_elapsed: now - ws,
            obs: &obs,
            trace: Some(&trace.values),
        };
        update_live(rc, spec, pool, &progress);
        if window_closes(rc, planned, &mut stop, now - ws, pool) {
            break;
        }
    }
    let we = edges().map_or_else(|| rc.clock.now(), |(_, e)| e.min(rc.clock.now()));
    pool.window.close(we);
    // The end scrape is sent at the window's end, while the streams still
    // run: the server reads its counters somewhere between the sending and
    // the answer, and that whole span must still be generating like the
    // window, or a slow /metrics reads a rate that already fell.
    let end_scrape = spawn_scrape(rc, !aborted);
    let load = read_client_load().since(&load_start);
    let lag = lag_probe.finish().await;
    let headroom = Headroom::measure(load.cpu_s, we - ws, usable_cpus(), &lag);
    // Hardware covers the window only, like the tokens it is divided into:
    // not the end scrape, the stream shutdown or the drain.
    let hw_end = rc.hw_mark();
    let (start_scrape, end_scrape, confirm) =
        edge_reads(rc, [start_scrape, end_scrape], &sched, pool).await;
    WindowRecord {
        start: ws,
        end: we,
        start_scrape,
        end_scrape,
        sched,
        confirm,
        producing,
        stall: stall.worst(),
        load,
        headroom,
        hw_start,
        hw_end,
        stop,
    }
}

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

/// One scrape sent now on its own task (none without metrics or `wanted`).
fn spawn_scrape(rc: &RunCtx, wanted: bool) -> Option<tokio::task::JoinHandle<Option<Scrape>>> {
    (rc.metrics && wanted).then(|| {
        let scraper = rc.scraper.clone();
        tokio::spawn(async move { scraper.scrape_once().await })
    })
}

/// The answer of a scrape sent on its own task (None: failed, or no task).
pub(crate) async fn join_scrape(
    task: Option<tokio::task::JoinHandle<Option<Scrape>>>,
) -> Option<Scrape> {
    match task {
        Some(task) => task.await.ok().flatten(),
        None => None,
    }
}

fn fresh_scrape(rc: &RunCtx, since: f64) -> Option<Arc<Scrape>> {
    if !rc.metrics {
        return None;
    }
    rc.scraper.latest().filter(|s| s.sent >= since)
}
