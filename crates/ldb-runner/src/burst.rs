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

mod assemble;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::scrape::Scrape;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
use ldb_core::live::{CellSample, CellStage, LiveEvent};
use ldb_core::prompt::Message;
use ldb_core::result::{CellResult, CellStatus, DecodeMode};
use ldb_core::tokens::format_context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cell::{CellOutput, CellSpec};
use crate::cell_io::{drain, scout};
use crate::cell_view::{RateTrace, enter_stage, stream_texts};
use crate::ctx::RunCtx;
use crate::prompts::BodyOptions;
use crate::shard::batch as shard_batch;
use assemble::assemble;
#[cfg(test)]
use assemble::max_overlap;

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
pub(crate) struct Done {
    pub outcome: StreamOutcome,
    /// When the request completed (`[DONE]`), or ended.
    pub end: f64,
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
    let mut as_cell = CellSpec {
        concurrency: c,
        context: ctx,
        messages: spec.messages.clone(),
        duration: 0.0,
        auto_stop: None,
        record_prefill: spec.record_prefill,
        probe: false,
    };
    stage(rc, &spec, CellStage::Scout);
    let prefill = if ctx > 0 {
        scout(rc, &mut as_cell, &skip).await.prefill
    } else {
        None
    };
    let bodies =
        crate::prefix_groups::warmed_bodies(rc, ctx, &as_cell.messages, &skip, options(rc)).await;

    // Warmup batch: same payload, samples discarded.
    let mut first_error: Option<String> = None;
    if w > 0 && !skip.is_cancelled() {
        stage(rc, &spec, CellStage::RampUp);
        let warm = batch(rc, &spec, &bodies, w, &skip, false).await;
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

    // Measured batch (background /metrics reads at --metrics-interval).
    let measuring = rc.scraper.measuring();
    let start_scrape = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let hw_mark = rc.hw_mark();
    let measured_from = rc.clock.now();
    let mut m = batch(rc, &spec, &bodies, n, &skip, true).await;
    let end_scrape = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    drop(measuring);
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
    cell.ext.kv_required_tokens = u64::from(c) * (ctx + rc.cfg.matrix.max_tokens);
    drain(rc).await;
    cell.wall_time = rc.clock.now() - cell_start;
    if let Some(parts) = m.shards.take() {
        parts.label(rc, &mut cell);
    }
    announce_done(rc, &spec, &cell);
    CellOutput { cell, prefill }
}

/// The cell's end in the event log.
fn announce_done(rc: &RunCtx, spec: &BurstSpec, cell: &CellResult) {
    let (c, ctx, n) = (spec.concurrency, spec.context, spec.requests);
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
    rc.live.send(LiveEvent::CellEnded);
}

/// What one batch produced.
pub(crate) struct Batch {
    pub done: Vec<Done>,
    /// Scrapes that arrived while the batch ran.
    pub sched: Vec<Scrape>,
    /// Over shards: each shard's part (`shard/batch.rs`).
    pub shards: Option<crate::shard::batch::ShardedBatch>,
}

/// The body options of a burst cell's requests.
fn options(rc: &RunCtx) -> BodyOptions {
    BodyOptions {
        api: rc.cfg.target.api,
        max_tokens: rc.cfg.matrix.max_tokens,
        continuous_usage: false,
        ignore_eos: !rc.cfg.matrix.respect_eos,
        temperature: rc.cfg.matrix.temperature,
        tools: rc.cfg.matrix.tools.clone(),
    }
}

/// Run `n` requests on min(C, n) closed-loop workers and wait for all of them.
async fn batch(
    rc: &RunCtx,
    spec: &BurstSpec,
    bodies: &[Bytes],
    n: u64,
    skip: &CancellationToken,
    measured: bool,
) -> Batch {
    // Over shards every request sends group 0's body (prefix groups are
    // not spread across shards yet: docs/workloads.md).
    let parts = shard_batch::BatchShards::open(rc, spec.concurrency, n, &bodies[0]).await;
    let (workers, n) = shard_batch::own_part(parts.as_ref(), spec.concurrency, n);
    let claimed = Arc::new(AtomicU64::new(0));
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let sinks: Vec<Arc<Mutex<String>>> = (0..spec.concurrency.min(OUTPUT_SLOTS))
        .map(|_| Arc::new(Mutex::new(String::new())))
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    shard_batch::wait_start(parts.as_ref(), rc, skip).await;
    let t0 = rc.clock.now();
    window.open(t0);
    let mut handles = Vec::new();
    for slot in 0..workers {
        let env = StreamEnv {
            window: window.clone(),
            counters: counters.clone(),
            cancel: skip.child_token(),
            text_sink: sinks.get(slot as usize).cloned(),
            idle_timeout: rc.cfg.timing.idle_timeout(),
            first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        };
        handles.push(tokio::spawn(worker(
            env,
            bodies[slot as usize % bodies.len().max(1)].clone(),
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
    let mut trace = RateTrace::new(t0);
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
        trace.sample(now, batch_tokens(&done, &counters));
        show_batch(
            rc,
            spec,
            &BatchView {
                measured,
                elapsed: now - t0,
                expected: if done.is_empty() {
                    0.0
                } else {
                    (now - t0) * n as f64 / done.len() as f64
                },
                latest: latest.as_deref(),
                counters: &counters,
                tokens: batch_tokens(&done, &counters),
                trace: &trace.values,
                sinks: &sinks,
            },
        );
    }
    for h in handles {
        // Skipped: the streams see the cancelled token and end at once.
        let _ = tokio::time::timeout(Duration::from_secs(15), h).await;
    }
    while let Ok(d) = rx.try_recv() {
        done.push(d);
    }
    let shards = shard_batch::finish(parts, rc, skip, &mut done).await;
    Batch {
        done,
        sched,
        shards,
    }
}

/// Live rate (display only). Payloads carry no per-chunk usage, so the
/// window counter holds content chunks; scale them by the tokens per chunk
/// of the requests finished so far (several tokens per chunk with
/// speculative decoding).
fn batch_tokens(done: &[Done], counters: &CellCounters) -> u64 {
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
    (counters.window_tokens.load(Ordering::Relaxed) as f64 * per_chunk) as u64
}

/// Where a running batch stands, for one refresh of the view.
struct BatchView<'a> {
    measured: bool,
    elapsed: f64,
    /// Expected batch time from the requests finished so far (0 = unknown yet).
    expected: f64,
    latest: Option<&'a Scrape>,
    counters: &'a CellCounters,
    tokens: u64,
    trace: &'a [f64],
    sinks: &'a [Arc<Mutex<String>>],
}

fn show_batch(rc: &RunCtx, spec: &BurstSpec, v: &BatchView<'_>) {
    let stage_kind = if v.measured {
        CellStage::Window
    } else {
        CellStage::RampUp
    };
    let outputs = stream_texts(v.sinks);
    rc.live.send(LiveEvent::CellSampled(Box::new(CellSample {
        concurrency: spec.concurrency,
        context: spec.context,
        stage: stage_kind,
        stage_elapsed: v.elapsed,
        running: v.latest.and_then(|l| l.snap.running),
        queued: v.latest.and_then(|l| l.snap.waiting),
        producing: v.counters.producing.load(Ordering::Relaxed).max(0) as u32,
        window_tokens: v.tokens,
        window_elapsed: v.elapsed,
        window_total: if v.expected > 0.0 {
            v.expected.max(v.elapsed)
        } else {
            0.0
        },
        accept_length: None,
        tps_trace: Some(v.trace.to_vec()),
        outputs,
    })));
}

/// One closed-loop worker: claim the next request of `n`, run it to its
/// end, claim again (a failed request ends the worker).
pub(crate) async fn worker(
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
    rc.live.send(LiveEvent::CellEnded);
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
    enter_stage(rc, (spec.concurrency, spec.context), stage, 0.0, 0.0);
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
        // A slot freed and refilled, read 10 ms out of order by a busy
        // client: still two at a time, not three.
        let s = [sample(0.0, 1.0), sample(0.0, 1.5), sample(0.99, 2.0)];
        assert_eq!(max_overlap(&s), 2);
        // A real overlap of 50 ms counts.
        let s = [sample(0.0, 1.0), sample(0.0, 1.5), sample(0.95, 2.0)];
        assert_eq!(max_overlap(&s), 3);
    }

    #[test]
    fn burst_counts_follow_the_reference_defaults() {
        assert_eq!(burst_counts(4, 0, 0, 5), (20, 4));
        assert_eq!(burst_counts(1, 0, 0, 5), (5, 1));
        assert_eq!(burst_counts(8, 3, 2, 5), (3, 2));
        assert_eq!(burst_counts(8, 0, 0, 0), (8, 8));
    }
}
