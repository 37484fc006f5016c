//! Finite closed-loop batches: request-count mode and the Burst / E2E matrix.
//!
//! A batch of `N` requests runs on `min(C, N)` workers. Each worker claims the
//! next request slot from a shared counter, runs that request to completion,
//! and claims again until `N` slots have been handed out, so at most `C`
//! requests are in flight and a finished one is replaced at once (closed
//! loop). Nothing is cancelled at a window end: every request runs to its
//! natural end.
//!
//! Payloads ask for the final usage chunk only (`include_usage`, no
//! continuous usage), as AIPerf and `vllm bench serve` do.
//!
//! Throughput = Σ `completion_tokens` of the completed requests ÷ (last
//! completion − first send). Both ends are timestamps recorded by the requests
//! themselves (the send time taken just before the request is written, the
//! completion time when `[DONE]` was read), so neither the 250 ms monitor
//! tick nor a `/metrics` scrape can stretch the denominator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::scrape::Scrape;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
use ldb_core::cellstats::{LatencyScope, SchedSample, latency_stats, scheduler_fields};
use ldb_core::live::{CellStage, CurrentCell, StreamText};
use ldb_core::prompt::Message;
use ldb_core::result::{
    AggregateSource, CellExtras, CellResult, CellStatus, DecodeMode, UsageMode,
};
use ldb_core::stats::median;
use ldb_core::tokens::format_context;
use ldb_core::window::WindowBounds;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cell::{CellOutput, CellSpec, drain, scout};
use crate::ctx::RunCtx;
use crate::prompts::{BodyOptions, chat_body};

/// `benchmark_mode` of primary request-count cells.
pub const MODE_REQUEST_COUNT: DecodeMode = DecodeMode::RequestCount;
/// `benchmark_mode` of the Burst / E2E matrix after the sustained one.
pub const MODE_BURST: DecodeMode = DecodeMode::BurstE2e;

/// One finite-batch cell.
#[derive(Debug, Clone)]
pub struct BurstSpec {
    /// Concurrency (maximum requests in flight).
    pub concurrency: u32,
    /// Nominal context.
    pub context: u64,
    /// Prompt of every request (and of the scout).
    pub messages: Vec<Message>,
    /// Measured requests.
    pub requests: u64,
    /// Discarded warmup requests before the measured batch.
    pub warmup: u64,
    /// [`MODE_REQUEST_COUNT`] or [`MODE_BURST`].
    pub mode: DecodeMode,
    /// Record the scout as this context's prefill row.
    pub record_prefill: bool,
}

/// Measured and warmup request counts of a Burst / E2E cell at concurrency `c`:
/// N = `count` or max(C, C × `per_c`); warmup = `warmup` or C.
pub fn burst_counts(c: u32, count: u64, warmup: u64, per_c: u64) -> (u64, u64) {
    let c = u64::from(c);
    let n = if count > 0 {
        count
    } else {
        c.max(c * per_c.max(1))
    };
    let w = if warmup > 0 { warmup } else { c };
    (n, w)
}

/// One request of a batch with the time its stream ended (`[DONE]` read, error
/// or cut), on the run clock.
struct Done {
    outcome: StreamOutcome,
    end: f64,
}

const TICK: Duration = Duration::from_millis(250);
const OUTPUT_SLOTS: u32 = 8;

/// Run one finite-batch cell: scout (ctx > 0), warmup batch, measured batch.
pub async fn run_burst_cell(rc: &RunCtx, spec: BurstSpec) -> CellOutput {
    let skip = rc.controls.new_skip();
    let cell_start = rc.clock.now();
    let (c, ctx, n, w) = (spec.concurrency, spec.context, spec.requests, spec.warmup);
    rc.live.event(format!(
        "{} cell start C={c} ctx={} requests={n} warmup={w}",
        spec.mode,
        format_context(ctx)
    ));
    let as_cell = CellSpec {
        concurrency: c,
        context: ctx,
        messages: spec.messages.clone(),
        duration: 0.0,
        record_prefill: spec.record_prefill,
    };
    stage(rc, &spec, CellStage::Scout);
    let prefill = if ctx > 0 {
        scout(rc, &as_cell, &skip).await
    } else {
        None
    };
    let body = chat_body(
        &rc.model,
        &spec.messages,
        BodyOptions {
            max_tokens: rc.cfg.max_tokens,
            continuous_usage: false,
            ignore_eos: !rc.cfg.respect_eos,
            temperature: rc.cfg.temperature,
        },
    );

    // Warmup batch: same payload, samples discarded.
    let mut first_error: Option<String> = None;
    if w > 0 && !skip.is_cancelled() {
        stage(rc, &spec, CellStage::RampUp);
        let warm = batch(rc, &spec, &body, w, &skip, false).await;
        if let Some(e) = warm.done.iter().find_map(|d| d.outcome.track.error()) {
            first_error = Some(format!("warmup request failed: {e}"));
        }
        drain(rc).await;
    }
    if skip.is_cancelled() {
        return skipped(rc, &spec, prefill);
    }
    if let Some(err) = first_error {
        return failed(rc, &spec, cell_start, err, prefill);
    }

    // Measured batch.
    let start_scrape = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let hw_mark = rc.hw_mark();
    let measured_from = rc.clock.now();
    let m = batch(rc, &spec, &body, n, &skip, true).await;
    let end_scrape = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let (hw, hw_summary) = rc.hw_since(hw_mark);
    if skip.is_cancelled() {
        return skipped(rc, &spec, prefill);
    }
    let mut cell = assemble(
        &spec,
        &m,
        start_scrape.as_ref(),
        end_scrape.as_ref(),
        hw_summary.as_ref(),
    );
    cell.hardware_summary = hw;
    cell.warmup_duration = measured_from - cell_start;
    cell.ext.kv_required_tokens = u64::from(c) * (ctx + rc.cfg.max_tokens);
    drain(rc).await;
    cell.wall_time = rc.clock.now() - cell_start;
    let msg = match cell.aggregate_tps {
        Some(v) => format!("{v:.1} tok/s"),
        None => cell.ext.status.as_str().to_uppercase(),
    };
    rc.live.event(format!(
        "{} cell done C={c} ctx={} {msg} ({} of {n} requests completed in {:.2} s)",
        spec.mode,
        format_context(ctx),
        cell.num_completed,
        cell.measurement_seconds
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

/// What one batch produced.
struct Batch {
    done: Vec<Done>,
    /// Scrapes that arrived while the batch ran.
    sched: Vec<Scrape>,
}

/// Run `n` requests on min(C, n) closed-loop workers and wait for all of them.
async fn batch(
    rc: &RunCtx,
    spec: &BurstSpec,
    body: &Bytes,
    n: u64,
    skip: &CancellationToken,
    measured: bool,
) -> Batch {
    let workers = u64::from(spec.concurrency).min(n);
    let claimed = Arc::new(AtomicU64::new(0));
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let sinks: Vec<Arc<Mutex<String>>> = (0..spec.concurrency.min(OUTPUT_SLOTS))
        .map(|_| Arc::new(Mutex::new(String::new())))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let t0 = rc.clock.now();
    window.open(t0);
    let mut handles = Vec::new();
    for slot in 0..workers {
        let env = StreamEnv {
            http: rc.http.clone(),
            clock: rc.clock,
            window: window.clone(),
            counters: counters.clone(),
            cancel: skip.child_token(),
            text_sink: sinks.get(slot as usize).cloned(),
            path: "/v1/chat/completions",
        };
        handles.push(tokio::spawn(worker(
            env,
            body.clone(),
            claimed.clone(),
            n,
            tx.clone(),
        )));
    }
    drop(tx);
    let mut done = Vec::new();
    let mut sched = Vec::new();
    let mut last_seq = rc.scraper.latest().map_or(0, |s| s.seq);
    let mut open = true;
    let (mut trace, mut last_t, mut last_tok) = (Vec::<f64>::new(), t0, 0u64);
    while open {
        tokio::select! {
            biased;
            _ = skip.cancelled() => break,
            msg = rx.recv() => match msg {
                Some(d) => done.push(d),
                None => open = false,
            },
            _ = tokio::time::sleep(TICK) => {}
        }
        let now = rc.clock.now();
        let latest = rc.scraper.latest();
        if let Some(s) = &latest
            && s.seq != last_seq
            && s.sent >= t0
        {
            last_seq = s.seq;
            sched.push((**s).clone());
        }
        // Live rate (display only). Payloads carry no per-chunk usage, so the
        // window counter holds content chunks; scale them by the tokens per
        // chunk of the requests finished so far (several tokens per chunk
        // with speculative decoding).
        let (tok, chunks) = done.iter().fold((0u64, 0u64), |(a, b), d| {
            (
                a + d.outcome.track.output_tokens(),
                b + d.outcome.track.chunks(),
            )
        });
        let per_chunk = if chunks > 0 {
            tok as f64 / chunks as f64
        } else {
            1.0
        };
        let tokens = (counters.window_tokens.load(Ordering::Relaxed) as f64 * per_chunk) as u64;
        if now - last_t >= 1.0 {
            trace.push(tokens.saturating_sub(last_tok) as f64 / (now - last_t));
            if trace.len() > 120 {
                trace.remove(0);
            }
            (last_t, last_tok) = (now, tokens);
        }
        // Expected batch time from the requests finished so far (0 = unknown yet).
        let expected = if done.is_empty() {
            0.0
        } else {
            (now - t0) * n as f64 / done.len() as f64
        };
        let stage_kind = if measured {
            CellStage::Window
        } else {
            CellStage::RampUp
        };
        rc.live.update(|s| {
            let cur = s.current.get_or_insert_with(CurrentCell::default);
            cur.concurrency = spec.concurrency;
            cur.context = spec.context;
            cur.stage = stage_kind;
            cur.stage_elapsed = now - t0;
            cur.running = latest.as_ref().and_then(|l| l.snap.running);
            cur.queued = latest.as_ref().and_then(|l| l.snap.waiting);
            cur.producing = counters.producing.load(Ordering::Relaxed).max(0) as u32;
            cur.window_tokens = tokens;
            cur.window_elapsed = now - t0;
            cur.window_total = if expected > 0.0 {
                expected.max(now - t0)
            } else {
                0.0
            };
            cur.tps_trace = trace.clone();
            s.outputs = sinks
                .iter()
                .enumerate()
                .map(|(i, t)| StreamText {
                    slot: i as u32,
                    text: t.lock().map(|x| x.clone()).unwrap_or_default(),
                })
                .collect();
        });
    }
    for h in handles {
        // Skipped: the streams see the cancelled token and end at once.
        let _ = tokio::time::timeout(Duration::from_secs(15), h).await;
    }
    while let Ok(d) = rx.try_recv() {
        done.push(d);
    }
    Batch { done, sched }
}

async fn worker(
    env: StreamEnv,
    body: Bytes,
    claimed: Arc<AtomicU64>,
    n: u64,
    tx: mpsc::UnboundedSender<Done>,
) {
    while !env.cancel.is_cancelled() && claimed.fetch_add(1, Ordering::Relaxed) < n {
        let outcome = run_stream(&env, body.clone()).await;
        // Completion is the arrival of [DONE]; reading the rest of the body
        // afterwards (connection reuse) is not part of the request.
        let end = outcome.done_at.unwrap_or_else(|| env.clock.now());
        let failed = outcome.track.error().is_some();
        if tx.send(Done { outcome, end }).is_err() || failed {
            break;
        }
    }
}

fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? - a?)
}

/// The cell from a measured batch.
fn assemble(
    spec: &BurstSpec,
    m: &Batch,
    start: Option<&Scrape>,
    end: Option<&Scrape>,
    hw: Option<&ldb_core::hardware::HardwareSummary>,
) -> CellResult {
    let c = spec.concurrency;
    let first_send = m
        .done
        .iter()
        .map(|d| d.outcome.track.start())
        .fold(f64::INFINITY, f64::min);
    let completed: Vec<&Done> = m
        .done
        .iter()
        .filter(|d| {
            d.outcome.track.error().is_none() && !d.outcome.cancelled && {
                let s = d.outcome.track.to_sample(0.0, WindowBounds::default());
                s.completed
            }
        })
        .collect();
    let last_done = completed
        .iter()
        .map(|d| d.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let secs = if last_done.is_finite() && first_send.is_finite() {
        (last_done - first_send).max(1e-9)
    } else {
        0.0
    };
    let tokens: u64 = completed
        .iter()
        .map(|d| d.outcome.track.output_tokens())
        .sum();
    let usage_everywhere = completed.iter().all(|d| d.outcome.track.has_usage());
    let window = WindowBounds {
        start: Some(first_send),
        end: Some(last_done),
    };
    let samples: Vec<_> = m
        .done
        .iter()
        .map(|d| d.outcome.track.to_sample(first_send, window))
        .collect();
    let latency = latency_stats(samples.iter(), LatencyScope::All);
    let errors: Vec<&str> = m
        .done
        .iter()
        .filter_map(|d| d.outcome.track.error().map(|e| e.message.as_str()))
        .collect();

    let (mut server_tokens, mut server_rate) = (0.0, 0.0);
    if let (Some(a), Some(b)) = (start, end)
        && let Some(dg) = delta(a.snap.gen_tokens, b.snap.gen_tokens)
    {
        server_tokens = dg.max(0.0);
        if secs > 0.0 {
            server_rate = server_tokens / secs;
        }
    }
    if server_rate == 0.0 {
        server_rate = median(m.sched.iter().filter_map(|s| s.snap.gen_throughput_gauge));
    }
    let samples_sched: Vec<SchedSample> = m
        .sched
        .iter()
        .filter_map(|s| {
            Some(SchedSample {
                running: s.snap.running?,
                waiting: s.snap.waiting.unwrap_or(0.0),
            })
        })
        .collect();
    // A finite batch is never steady: requests arrive between engine steps and
    // wait for the next one (a queue of a few requests at every wave edge), and
    // the batch drains at its end. Neither is a capacity limit, so the sustained
    // rules on mean running and queue length do not apply. The batch is
    // capacity-limited when the server never decoded all requested streams at
    // once (a max_num_seqs or KV cap below C). That is read from the requests'
    // own first/last token times, not from ~1 s scrapes, which a batch of a
    // second or two can fall between.
    let workers = u64::from(c).min(spec.requests) as u32;
    let overlap = max_overlap(&samples);
    let mut sched = scheduler_fields(workers, &samples_sched, false, f64::from(overlap));
    sched.underfilled = false;
    sched.capacity_limited = overlap < workers;
    let kv: Vec<f64> = m.sched.iter().filter_map(|s| s.snap.kv_usage).collect();
    let kv_mean = if kv.is_empty() {
        0.0
    } else {
        kv.iter().sum::<f64>() / kv.len() as f64
    };

    let status = if !errors.is_empty() {
        CellStatus::Error
    } else if tokens == 0 {
        CellStatus::NoTokens
    } else if sched.capacity_limited {
        CellStatus::CapacityLimited
    } else {
        CellStatus::Ok
    };
    let valid = matches!(status, CellStatus::Ok | CellStatus::CapacityLimited);
    let aggregate = (valid && secs > 0.0).then(|| tokens as f64 / secs);
    let status_reason = match status {
        CellStatus::Error => format!(
            "{} of {} requests failed: {}",
            errors.len(),
            m.done.len(),
            errors[0]
        ),
        CellStatus::NoTokens => "no request completed with output tokens".into(),
        CellStatus::CapacityLimited => {
            format!("at most {overlap} of {workers} requests were generating at the same time")
        }
        _ => String::new(),
    };
    let tpj = hw
        .and_then(|h| ldb_core::hardware::tokens_per_joule(tokens as f64, h))
        .unwrap_or(0.0);
    CellResult {
        concurrency: c,
        context_tokens: spec.context,
        benchmark_mode: spec.mode,
        request_count_target: spec.requests,
        warmup_request_count: spec.warmup,
        measurement_seconds: secs,
        measurement_wall_seconds: secs,
        client_output_tokens: tokens,
        server_output_tokens: server_tokens.round() as u64,
        aggregate_source: if tokens == 0 {
            AggregateSource::None
        } else if usage_everywhere {
            AggregateSource::OpenaiCompletedUsage
        } else {
            AggregateSource::OpenaiStreamChunksFallback
        },
        aggregate_tps: aggregate,
        per_request_avg_tps: aggregate.map(|a| a / f64::from(workers.max(1))),
        latency,
        request_samples: samples,
        total_tokens: tokens,
        num_completed: completed.len() as u64,
        num_errors: errors.len() as u64,
        server_gen_throughput: server_rate,
        server_utilization: kv_mean,
        sched,
        ready_reason: format!(
            "request_count={}, warmup_request_count={}",
            spec.requests, spec.warmup
        ),
        ext: CellExtras {
            status,
            status_reason,
            active_decode_tps: aggregate.unwrap_or(0.0),
            measurement_active_seconds: secs,
            usage_mode: if usage_everywhere && tokens > 0 {
                UsageMode::FinalOnly
            } else {
                UsageMode::None
            },
            requests_started: m.done.len() as u64,
            requests_cancelled: m.done.iter().filter(|d| d.outcome.cancelled).count() as u64,
            server_utilization_max: kv.iter().copied().fold(0.0, f64::max),
            tokens_per_joule: tpj,
            ..CellExtras::default()
        },
        ..CellResult::default()
    }
}

/// Most requests generating at the same moment: overlap of the intervals from
/// first to last token (an interval ending exactly when another starts does
/// not overlap it). A one-token request is generating at its single instant
/// (a zero-length interval still counts).
fn max_overlap(samples: &[ldb_core::result::RequestSample]) -> u32 {
    // At one instant: ends of intervals with a length first, then starts,
    // then ends of zero-length intervals, so touching intervals do not
    // overlap and an instant is counted with whatever runs at it.
    let mut edges: Vec<(f64, u8, i32)> = samples
        .iter()
        .filter_map(|s| Some((s.first_token_s?, s.end_s?)))
        .flat_map(|(a, b)| [(a, 1, 1), (b, if b > a { 0 } else { 2 }, -1)])
        .collect();
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut cur, mut best) = (0i32, 0i32);
    for (_, _, d) in edges {
        cur += d;
        best = best.max(cur);
    }
    best.max(0) as u32
}

fn skipped(
    rc: &RunCtx,
    spec: &BurstSpec,
    prefill: Option<ldb_core::result::PrefillEntry>,
) -> CellOutput {
    let mut cell = crate::cell::user_skip(rc, spec.concurrency, spec.context, spec.mode);
    cell.request_count_target = spec.requests;
    cell.warmup_request_count = spec.warmup;
    CellOutput { cell, prefill }
}

fn failed(
    rc: &RunCtx,
    spec: &BurstSpec,
    cell_start: f64,
    err: String,
    prefill: Option<ldb_core::result::PrefillEntry>,
) -> CellOutput {
    rc.live.event(format!(
        "cell error C={} ctx={}: {err}",
        spec.concurrency,
        format_context(spec.context)
    ));
    rc.live.update(|s| s.current = None);
    let mut cell = CellResult::skipped(
        spec.concurrency,
        spec.context,
        spec.mode,
        CellStatus::Error,
        err,
    );
    cell.timeout_reason.clear();
    cell.request_count_target = spec.requests;
    cell.warmup_request_count = spec.warmup;
    cell.wall_time = rc.clock.now() - cell_start;
    CellOutput { cell, prefill }
}

fn stage(rc: &RunCtx, spec: &BurstSpec, stage: CellStage) {
    rc.live.update(|s| {
        let cur = s.current.get_or_insert_with(CurrentCell::default);
        if cur.concurrency != spec.concurrency || cur.context != spec.context {
            *cur = CurrentCell::default();
        }
        cur.concurrency = spec.concurrency;
        cur.context = spec.context;
        cur.stage = stage;
        cur.stage_elapsed = 0.0;
        cur.window_total = 0.0;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(first: f64, end: f64) -> ldb_core::result::RequestSample {
        ldb_core::result::RequestSample {
            first_token_s: Some(first),
            end_s: Some(end),
            ..Default::default()
        }
    }

    #[test]
    fn overlap_counts_simultaneous_generation() {
        // Two waves of two: the second wave starts when the first ends.
        let s = [
            sample(0.1, 1.0),
            sample(0.11, 1.01),
            sample(1.01, 2.0),
            sample(1.02, 2.0),
        ];
        assert_eq!(max_overlap(&s), 2);
        // A server running one request at a time.
        let s = [sample(0.1, 1.0), sample(1.0, 2.0), sample(2.0, 3.0)];
        assert_eq!(max_overlap(&s), 1);
        assert_eq!(max_overlap(&[]), 0);
        // One-token requests: zero-length intervals still generate.
        assert_eq!(max_overlap(&[sample(0.5, 0.5)]), 1);
        assert_eq!(max_overlap(&[sample(0.1, 1.0), sample(0.5, 0.5)]), 2);
        assert_eq!(max_overlap(&[sample(0.5, 0.5), sample(0.5, 0.5)]), 2);
    }

    #[test]
    fn burst_counts_follow_the_reference_defaults() {
        assert_eq!(burst_counts(4, 0, 0, 5), (20, 4));
        assert_eq!(burst_counts(1, 0, 0, 5), (5, 1));
        assert_eq!(burst_counts(8, 3, 2, 5), (3, 2));
        assert_eq!(burst_counts(8, 0, 0, 0), (8, 8));
    }
}
