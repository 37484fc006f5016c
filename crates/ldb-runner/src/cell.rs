//! One sustained-decode cell: scout, ramp-up to readiness, the measurement
//! window, closing every stream at once, and draining the server.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::scrape::Scrape;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
use ldb_core::engine::Engine;
use ldb_core::live::{CellStage, CurrentCell, StreamText};
use ldb_core::prompt::Message;
use ldb_core::readiness::{Decision, Observation, Readiness, auto_limit};
use ldb_core::result::{CellResult, CellStatus, PrefillEntry, round};
use ldb_core::tokens::format_context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::assemble::{CellInputs, assemble};
use crate::ctx::RunCtx;
use crate::prefill::{entry, probe, validated_probe};
use crate::prompts::{BodyOptions, chat_body};
use crate::stall::StallWatch;

/// What to run.
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// Concurrency.
    pub concurrency: u32,
    /// Nominal context.
    pub context: u64,
    /// Prompt of the streams and the scout.
    pub messages: Vec<Message>,
    /// Window length, seconds.
    pub duration: f64,
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

const TICK: Duration = Duration::from_millis(250);
const OUTPUT_SLOTS: u32 = 8;

/// Run one cell, and once more when the benchmark itself stalled inside the
/// first window: a stall is this machine's fault, not the server's, and a
/// second window usually misses it. A second stall keeps the cell with its
/// `client_stall_max_s` and the report's warning.
pub async fn measure_cell(rc: &RunCtx, spec: CellSpec) -> CellOutput {
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
        "{at}: the benchmark was not running for {:.1} s inside the window (client stall); \
         measuring the cell again",
        ext.client_stall_max_s
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
            "{at}: the benchmark stalled again ({:.1} s); its client numbers are kept with a warning",
            again.cell.ext.client_stall_max_s
        ));
    }
    again
}

/// Run one cell.
pub async fn run_cell(rc: &RunCtx, spec: CellSpec) -> CellOutput {
    let skip = rc.controls.new_skip();
    let cell_start = rc.clock.now();
    let (c, ctx) = (spec.concurrency, spec.context);
    rc.live
        .event(format!("cell start C={c} ctx={}", format_context(ctx)));
    set_stage(rc, &spec, CellStage::Scout, 0.0);
    let prefill = if ctx > 0 {
        scout(rc, &spec, &skip).await
    } else {
        None
    };
    if skip.is_cancelled() {
        return skipped(rc, &spec);
    }
    let body = chat_body(
        &rc.model,
        &spec.messages,
        BodyOptions {
            max_tokens: rc.cfg.max_tokens,
            continuous_usage: rc.engine.supports_continuous_usage(),
            ignore_eos: !rc.cfg.respect_eos,
            temperature: rc.cfg.temperature,
        },
    );
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let cancel = skip.child_token();
    let sinks: Vec<Arc<Mutex<String>>> = (0..c.min(OUTPUT_SLOTS))
        .map(|_| Arc::new(Mutex::new(String::new())))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel::<StreamOutcome>();
    let mut workers = Vec::new();
    for slot in 0..c {
        let env = StreamEnv {
            http: rc.http.clone(),
            clock: rc.clock,
            window: window.clone(),
            counters: counters.clone(),
            cancel: cancel.clone(),
            text_sink: sinks.get(slot as usize).cloned(),
            path: "/v1/chat/completions",
        };
        workers.push(tokio::spawn(worker(env, body.clone(), tx.clone())));
    }
    drop(tx);
    let launch = rc.clock.now();
    let mut outcomes: Vec<StreamOutcome> = Vec::new();
    let mut fatal_error: Option<String> = None;

    // Ramp-up until readiness, plateau or timeout.
    set_stage(rc, &spec, CellStage::RampUp, 0.0);
    let prefill_rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    let limit = if rc.cfg.cell_warmup_timeout > 0.0 {
        rc.cfg.cell_warmup_timeout
    } else {
        auto_limit(c, ctx, prefill_rate)
    };
    let mut readiness = Readiness::new(c, limit)
        .with_holds(rc.cfg.ready_stable_seconds, rc.cfg.plateau_seconds)
        .with_prefill_estimate(prefill_rate.map_or(0.0, |r| ctx as f64 / r));
    let mut decision = Decision::Wait;
    while decision == Decision::Wait {
        if tick(&skip).await {
            break;
        }
        collect(&mut rx, &mut outcomes, &mut fatal_error);
        if fatal_error.is_some() || failing(&counters, c, rc.cfg.max_error_rate) {
            break;
        }
        let now = rc.clock.now();
        let fresh = fresh_scrape(rc, launch);
        let obs = Observation {
            elapsed: now - launch,
            running: fresh.as_ref().and_then(|s| s.snap.running),
            waiting: fresh.as_ref().and_then(|s| s.snap.waiting),
            producing: counters.producing.load(Ordering::Relaxed).max(0) as u32,
            any_tokens: counters.tokens.load(Ordering::Relaxed) > 0,
        };
        update_live(
            rc,
            &spec,
            CellStage::RampUp,
            now - launch,
            &obs,
            &counters,
            0.0,
            &sinks,
            None,
        );
        decision = readiness.observe(obs);
    }
    let aborted = skip.is_cancelled()
        || fatal_error.is_some()
        || failing(&counters, c, rc.cfg.max_error_rate);

    // The window.
    let ws = rc.clock.now();
    let (mut ready_reason, mut timeout_reason, mut timed_out, mut plateau) =
        (String::new(), String::new(), false, false);
    match &decision {
        Decision::Ready(r) => ready_reason = r.clone(),
        Decision::Plateau { reason, .. } => {
            ready_reason = reason.clone();
            plateau = true;
        }
        Decision::Timeout(r) => {
            ready_reason = "warmup_timeout".into();
            timeout_reason = r.clone();
            timed_out = true;
        }
        Decision::Wait => {}
    }
    if !aborted {
        let word = if timed_out { "warmup timeout" } else { "ready" };
        let why = if timed_out {
            &timeout_reason
        } else {
            &ready_reason
        };
        rc.live
            .event(format!("{word} C={c} ctx={} {why}", format_context(ctx)));
    }
    window.open(ws);
    let hw_mark = rc.hw_mark();
    let start_scrape = if rc.metrics && !aborted {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let mut sched: Vec<Scrape> = Vec::new();
    let mut producing_samples: Vec<f64> = Vec::new();
    let mut last_seq = start_scrape.as_ref().map_or(0, |s| s.seq);
    let mut last_tokens = 0u64;
    let mut trace: Vec<f64> = Vec::new();
    let mut last_trace_t = ws;
    // The driver's own lateness: each pass should follow the last by one
    // tick. A much longer gap means this process was not running, so tokens
    // piled up unread and the window's client count is wrong.
    let mut stall = StallWatch::new(rc.clock.now(), TICK.as_secs_f64());
    loop {
        if aborted || tick(&skip).await {
            break;
        }
        collect(&mut rx, &mut outcomes, &mut fatal_error);
        if fatal_error.is_some() || failing(&counters, c, rc.cfg.max_error_rate) {
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
        let producing = counters.producing.load(Ordering::Relaxed).max(0) as u32;
        producing_samples.push(f64::from(producing));
        if now - last_trace_t >= 1.0 {
            let tok = counters.window_tokens.load(Ordering::Relaxed);
            trace.push((tok - last_tokens) as f64 / (now - last_trace_t));
            last_tokens = tok;
            last_trace_t = now;
            if trace.len() > 120 {
                trace.remove(0);
            }
        }
        let latest = rc.scraper.latest();
        let obs = Observation {
            elapsed: now - launch,
            running: latest.as_ref().and_then(|s| s.snap.running),
            waiting: latest.as_ref().and_then(|s| s.snap.waiting),
            producing,
            any_tokens: true,
        };
        update_live(
            rc,
            &spec,
            CellStage::Window,
            now - ws,
            &obs,
            &counters,
            now - ws,
            &sinks,
            Some(&trace),
        );
        if now - ws >= spec.duration {
            break;
        }
    }
    let we = rc.clock.now();
    window.close(we);
    // Hardware covers the window only, like the tokens it is divided into:
    // not the end scrape, the stream shutdown or the drain.
    let hw_end = rc.hw_mark();
    cancel.cancel();
    let end_scrape = if rc.metrics && !aborted {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    set_stage(rc, &spec, CellStage::Drain, 0.0);
    for w in workers {
        if tokio::time::timeout(Duration::from_secs(15), w)
            .await
            .is_err()
        {
            rc.live.event(format!(
                "C={c} ctx={}: a stream did not stop in 15 s",
                format_context(ctx)
            ));
        }
    }
    collect(&mut rx, &mut outcomes, &mut fatal_error);
    let (hw, hw_summary) = rc.hw_between(hw_mark, hw_end);
    abort_sglang(rc, &outcomes).await;
    drain(rc).await;
    let mut cell = assemble(CellInputs {
        concurrency: c,
        context: ctx,
        engine: rc.engine,
        outcomes: &outcomes,
        window_start: ws,
        window_end: we,
        start_scrape: start_scrape.as_ref(),
        end_scrape: end_scrape.as_ref(),
        sched: &sched,
        producing_samples: &producing_samples,
        readiness_failed: timed_out || plateau,
        accept_len_ref: rc.cfg.accept_len_ref,
        hw: hw_summary.as_ref(),
        gaps: counters.gaps.stats(),
        ignore_eos: !rc.cfg.respect_eos,
        max_error_rate: rc.cfg.max_error_rate,
    });
    cell.ext.client_stall_max_s = round(stall.worst(), 3);
    cell.ext.measure_attempts = 1;
    cell.ext.window_start_unix = Some(rc.clock.unix(ws));
    cell.ext.window_end_unix = Some(rc.clock.unix(we));
    cell.wall_time = rc.clock.now() - cell_start;
    cell.warmup_duration = ws - cell_start;
    cell.ext.ramp_seconds = ws - launch;
    cell.warmup_timed_out = timed_out;
    cell.ready_reason = ready_reason;
    cell.timeout_reason = timeout_reason;
    cell.hardware_summary = hw;
    cell.ext.kv_required_tokens = u64::from(c) * (ctx + rc.cfg.max_tokens);
    if let Some(err) = fatal_error {
        cell.ext.status = CellStatus::Error;
        cell.ext.status_reason = err;
        cell.aggregate_tps = None;
        cell.per_request_avg_tps = None;
    } else if skip.is_cancelled() {
        let mut s = skipped(rc, &spec);
        s.prefill = prefill;
        return s;
    }
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
    rc.live.event(format!(
        "cell done C={c} ctx={} {msg}{norm}",
        format_context(ctx)
    ));
    if cell.ext.status == CellStatus::Error {
        rc.live.event(format!(
            "cell error C={c} ctx={}: {}",
            format_context(ctx),
            cell.ext.status_reason
        ));
    }
    rc.live.update(|s| s.current = None);
    CellOutput { cell, prefill }
}

fn skipped(rc: &RunCtx, spec: &CellSpec) -> CellOutput {
    CellOutput {
        cell: user_skip(rc, spec.concurrency, spec.context, "duration"),
        prefill: None,
    }
}

/// A cell the user skipped (`s`) or cut short by stopping the run.
pub(crate) fn user_skip(rc: &RunCtx, concurrency: u32, context: u64, mode: &str) -> CellResult {
    let why = if rc.controls.stop.is_cancelled() {
        "run stopped by the user"
    } else {
        "skipped by the user"
    };
    rc.live.event(format!(
        "cell skipped C={concurrency} ctx={}",
        format_context(context)
    ));
    rc.live.update(|s| s.current = None);
    CellResult::skipped(
        concurrency,
        context,
        mode,
        CellStatus::SkippedUser,
        why.into(),
    )
}

/// Pause after a failed request before the stream sends the next one, so a
/// failing server is not hammered in a tight loop.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

async fn worker(env: StreamEnv, body: Bytes, tx: mpsc::UnboundedSender<StreamOutcome>) {
    while !env.cancel.is_cancelled() {
        let out = run_stream(&env, body.clone()).await;
        let fatal = out.track.error().is_some_and(|e| e.is_fatal());
        let failed = out.track.error().is_some();
        if tx.send(out).is_err() || fatal {
            break;
        }
        if failed {
            tokio::select! {
                _ = env.cancel.cancelled() => break,
                _ = tokio::time::sleep(RETRY_PAUSE) => {}
            }
        }
    }
}

/// Failures are beyond saving the cell: at least 3, and either nothing has
/// produced a token yet or every stream failed once on average while the
/// failed share is above the limit. The cell then ends early instead of
/// waiting out its readiness limit or window.
fn failing(counters: &CellCounters, concurrency: u32, max_rate: f64) -> bool {
    let failed = counters.failed.load(Ordering::Relaxed);
    let started = counters.started.load(Ordering::Relaxed).max(1);
    failed >= 3
        && (counters.tokens.load(Ordering::Relaxed) == 0
            || (failed >= u64::from(concurrency) && failed as f64 / started as f64 > max_rate))
}

async fn tick(skip: &CancellationToken) -> bool {
    tokio::select! {
        _ = skip.cancelled() => true,
        _ = tokio::time::sleep(TICK) => false,
    }
}

/// Gather finished requests; `fatal` keeps the first failure that no later
/// request can escape (authentication, missing model, unreachable server).
fn collect(
    rx: &mut mpsc::UnboundedReceiver<StreamOutcome>,
    out: &mut Vec<StreamOutcome>,
    fatal: &mut Option<String>,
) {
    while let Ok(o) = rx.try_recv() {
        if fatal.is_none()
            && let Some(e) = o.track.error().filter(|e| e.is_fatal())
        {
            *fatal = Some(e.to_string());
        }
        out.push(o);
    }
}

fn fresh_scrape(rc: &RunCtx, since: f64) -> Option<Arc<Scrape>> {
    if !rc.metrics {
        return None;
    }
    rc.scraper.latest().filter(|s| s.sent >= since)
}

pub(crate) async fn scout(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
) -> Option<PrefillEntry> {
    let env = StreamEnv {
        http: rc.http.clone(),
        clock: rc.clock,
        window: Arc::new(SharedWindow::default()),
        counters: Arc::new(CellCounters::default()),
        cancel: skip.clone(),
        text_sink: None,
        path: "/v1/chat/completions",
    };
    let ctx = spec.context;
    if !spec.record_prefill {
        probe(&env, &rc.model, &spec.messages, skip).await;
        return None;
    }
    rc.live.event(format!(
        "integrated prefill start ctx={}",
        format_context(ctx)
    ));
    let (p, validation) = validated_probe(rc, &env, &spec.messages, skip, true).await;
    if let Some(e) = &p.error {
        rc.live.event(format!(
            "integrated prefill failed ctx={}: {e}",
            format_context(ctx)
        ));
        return None;
    }
    let use_server = rc.cfg.prefill_metric == crate::config::PrefillMetric::Prometheus;
    let row = entry("integrated_scout", ctx, &p, validation, use_server);
    if row.tok_per_sec > 0.0
        && let Ok(mut g) = rc.prefill_rate.lock()
    {
        *g = Some(row.tok_per_sec);
    }
    rc.live.event(format!(
        "integrated prefill done ctx={} {} tok/s",
        format_context(ctx),
        ldb_core::tokens::thousands(row.tok_per_sec as u64)
    ));
    Some(row)
}

async fn abort_sglang(rc: &RunCtx, outcomes: &[StreamOutcome]) {
    if rc.engine != Engine::Sglang {
        return;
    }
    for o in outcomes.iter().filter(|o| o.cancelled) {
        if let Some(rid) = &o.request_id {
            let body = serde_json::json!({"rid": rid});
            let _ = rc
                .http
                .post_json("/abort_request", &body, Duration::from_secs(5))
                .await;
        }
    }
}

/// Wait until the server runs and queues nothing (bounded), so cells do not overlap.
pub async fn drain(rc: &RunCtx) {
    if !rc.metrics {
        tokio::time::sleep(Duration::from_millis(500)).await;
        return;
    }
    let t0 = rc.clock.now();
    while rc.clock.now() - t0 < 60.0 {
        match rc
            .scraper
            .fresh_after(rc.clock.now(), Duration::from_secs(6))
            .await
        {
            Some(s)
                if s.snap.running.unwrap_or(0.0) <= 0.0 && s.snap.waiting.unwrap_or(0.0) <= 0.0 =>
            {
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
    rc.live
        .event("server did not drain within 60 s; continuing");
}

fn set_stage(rc: &RunCtx, spec: &CellSpec, stage: CellStage, elapsed: f64) {
    rc.live.update(|s| {
        let cur = s.current.get_or_insert_with(CurrentCell::default);
        if cur.concurrency != spec.concurrency || cur.context != spec.context {
            *cur = CurrentCell::default();
        }
        cur.concurrency = spec.concurrency;
        cur.context = spec.context;
        cur.stage = stage;
        cur.stage_elapsed = elapsed;
        cur.window_total = spec.duration;
    });
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the values are the live view's fields"
)]
fn update_live(
    rc: &RunCtx,
    spec: &CellSpec,
    stage: CellStage,
    stage_elapsed: f64,
    obs: &Observation,
    counters: &CellCounters,
    window_elapsed: f64,
    sinks: &[Arc<Mutex<String>>],
    trace: Option<&Vec<f64>>,
) {
    let outputs: Vec<StreamText> = sinks
        .iter()
        .enumerate()
        .map(|(i, s)| StreamText {
            slot: i as u32,
            text: s.lock().map(|t| t.clone()).unwrap_or_default(),
        })
        .collect();
    let accept = rc
        .scraper
        .latest()
        .and_then(|s| s.snap.spec_accept_length_gauge);
    rc.live.update(|s| {
        let cur = s.current.get_or_insert_with(CurrentCell::default);
        cur.concurrency = spec.concurrency;
        cur.context = spec.context;
        cur.stage = stage;
        cur.stage_elapsed = stage_elapsed;
        cur.running = obs.running;
        cur.queued = obs.waiting;
        cur.producing = obs.producing;
        cur.window_tokens = counters.window_tokens.load(Ordering::Relaxed);
        cur.window_elapsed = window_elapsed;
        cur.window_total = spec.duration;
        if accept.is_some() {
            cur.accept_length = accept;
        }
        if let Some(t) = trace {
            cur.tps_trace = t.clone();
        }
        s.outputs = outputs;
    });
}
