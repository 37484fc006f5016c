//! A finished batch into its cell result: tokens of the completed requests
//! over first send → last completion, the server's counters over the same
//! span, and the capacity rule of a finite batch.

use ldb_client::scrape::Scrape;
use ldb_core::cellstats::{LatencyScope, SchedSample, latency_stats, scheduler_fields};
use ldb_core::result::{
    AggregateSource, CellExtras, CellResult, CellStatus, RequestSample, SchedulerFields, UsageMode,
};
use ldb_core::stats::median;
use ldb_core::window::WindowBounds;

use super::{Batch, BurstSpec, Done};

/// A counter's growth; none when it went down (the server restarted
/// between the two reads, so the difference counts nothing).
fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let d = b? - a?;
    (d >= 0.0).then_some(d)
}

/// First send → last completion of a batch, and its completed requests.
struct Span<'a> {
    first_send: f64,
    last_done: f64,
    secs: f64,
    completed: Vec<&'a Done>,
}

fn span(m: &Batch) -> Span<'_> {
    let first_send = m
        .done
        .iter()
        .map(|d| d.outcome.track.start())
        .fold(f64::INFINITY, f64::min);
    let completed: Vec<&Done> = m
        .done
        .iter()
        .filter(|d| {
            d.outcome.track.error().is_none()
                && !d.outcome.cancelled
                && d.outcome
                    .track
                    .to_sample(0.0, WindowBounds::default())
                    .completed
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
    Span {
        first_send,
        last_done,
        secs,
        completed,
    }
}

/// The server's generated tokens over the batch and their rate.
fn server_count(m: &Batch, start: Option<&Scrape>, end: Option<&Scrape>, secs: f64) -> (f64, f64) {
    let (mut tokens, mut rate) = (0.0, 0.0);
    if let (Some(a), Some(b)) = (start, end)
        && a.snap.restart_evidence(&b.snap).is_none()
        && let Some(dg) = delta(a.snap.gen_tokens, b.snap.gen_tokens)
    {
        tokens = dg.max(0.0);
        if secs > 0.0 {
            rate = tokens / secs;
        }
    }
    if rate == 0.0 {
        rate = median(m.sched.iter().filter_map(|s| s.snap.gen_throughput_gauge));
    }
    (tokens, rate)
}

/// Scheduler fields of a batch. A finite batch is never steady: requests
/// arrive between engine steps and wait for the next one (a queue of a few
/// requests at every wave edge), and the batch drains at its end. Neither is
/// a capacity limit, so the sustained rules on mean running and queue length
/// do not apply. The batch is capacity-limited when the server never decoded
/// all requested streams at once (a max_num_seqs or KV cap below C). That is
/// read from the requests' own first/last token times, not from ~1 s
/// scrapes, which a batch of a second or two can fall between.
fn batch_scheduler(m: &Batch, workers: u32, samples: &[RequestSample]) -> (SchedulerFields, u32) {
    let sched_samples: Vec<SchedSample> = m
        .sched
        .iter()
        .filter_map(|s| {
            Some(SchedSample {
                running: s.snap.running?,
                waiting: s.snap.waiting.unwrap_or(0.0),
            })
        })
        .collect();
    let overlap = max_overlap(samples);
    let mut sched = scheduler_fields(workers, &sched_samples, false, f64::from(overlap));
    sched.underfilled = false;
    sched.capacity_limited = overlap < workers;
    (sched, overlap)
}

/// Status and its reason: any failure, then no tokens, then capacity.
fn verdict(
    errors: &[&str],
    requests: usize,
    tokens: u64,
    sched: &SchedulerFields,
    overlap: u32,
    workers: u32,
) -> (CellStatus, String) {
    if let Some(first) = errors.first() {
        let why = format!("{} of {requests} requests failed: {first}", errors.len());
        (CellStatus::Error, why)
    } else if tokens == 0 {
        let why = "no request completed with output tokens".into();
        (CellStatus::NoTokens, why)
    } else if sched.capacity_limited {
        let why =
            format!("at most {overlap} of {workers} requests were generating at the same time");
        (CellStatus::CapacityLimited, why)
    } else {
        (CellStatus::Ok, String::new())
    }
}

/// The cell from a measured batch.
pub(super) fn assemble(
    spec: &BurstSpec,
    m: &Batch,
    start: Option<&Scrape>,
    end: Option<&Scrape>,
    hw: Option<&ldb_core::hardware::HardwareSummary>,
) -> CellResult {
    let sp = span(m);
    let secs = sp.secs;
    let tokens: u64 = sp
        .completed
        .iter()
        .map(|d| d.outcome.track.output_tokens())
        .sum();
    let usage_everywhere = sp.completed.iter().all(|d| d.outcome.track.has_usage());
    let window = WindowBounds {
        start: Some(sp.first_send),
        end: Some(sp.last_done),
    };
    let samples: Vec<_> = m
        .done
        .iter()
        .map(|d| d.outcome.track.to_sample(sp.first_send, window))
        .collect();
    let errors: Vec<&str> = m
        .done
        .iter()
        .filter_map(|d| d.outcome.track.error().map(|e| e.message.as_str()))
        .collect();
    let (server_tokens, server_rate) = server_count(m, start, end, secs);
    let workers = u64::from(spec.concurrency).min(spec.requests) as u32;
    let (sched, overlap) = batch_scheduler(m, workers, &samples);
    let (kv_mean, kv_max) = kv_usage(m);
    let (status, status_reason) = verdict(&errors, m.done.len(), tokens, &sched, overlap, workers);
    let valid = matches!(status, CellStatus::Ok | CellStatus::CapacityLimited);
    let aggregate = (valid && secs > 0.0).then(|| tokens as f64 / secs);
    // The achieved prefix-cache hit rate by the same rule as a sustained
    // cell's (counter deltas between the scrapes that bracket the batch),
    // so the intended rate the cell carries has its counterpart; a true 0
    // is a value.
    let (prefix_rate, prefix_basis) = start
        .zip(end)
        .and_then(|(a, b)| crate::prefix_achieved::rate_between(a, b))
        .unzip();
    let ttft_breakdown = crate::ttft_breakdown::cell_breakdown(
        start,
        end,
        m.done.iter().map(|d| &d.outcome).zip(&samples),
    );
    CellResult {
        concurrency: spec.concurrency,
        context_tokens: spec.context,
        benchmark_mode: spec.mode,
        request_count_target: spec.requests,
        warmup_request_count: spec.warmup,
        measurement_seconds: secs,
        measurement_wall_seconds: secs,
        client_output_tokens: tokens,
        server_output_tokens: server_tokens.round() as u64,
        aggregate_source: aggregate_source(tokens, usage_everywhere),
        aggregate_tps: aggregate,
        per_request_avg_tps: aggregate.map(|a| a / f64::from(workers.max(1))),
        latency: latency_stats(samples.iter(), LatencyScope::All),
        request_samples: samples,
        total_tokens: tokens,
        num_completed: sp.completed.len() as u64,
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
            usage_mode: usage_mode(tokens, usage_everywhere),
            requests_started: m.done.len() as u64,
            requests_cancelled: m.done.iter().filter(|d| d.outcome.cancelled).count() as u64,
            server_utilization_max: kv_max,
            tokens_per_joule: hw
                .and_then(|h| ldb_core::hardware::tokens_per_joule(tokens as f64, h))
                .unwrap_or(0.0),
            ttft_breakdown,
            server_prefix_cache_hit_rate: prefix_rate,
            prefix_cache: ldb_core::result::PrefixCacheCell {
                server_prefix_cache_basis: prefix_basis.unwrap_or_default(),
                ..Default::default()
            },
            ..CellExtras::default()
        },
        ..CellResult::default()
    }
}

/// Where the cell's token count comes from: the final usage reports when
/// every completed request carried one, the counted stream chunks otherwise.
fn aggregate_source(tokens: u64, usage_everywhere: bool) -> AggregateSource {
    if tokens == 0 {
        AggregateSource::None
    } else if usage_everywhere {
        AggregateSource::OpenaiCompletedUsage
    } else {
        AggregateSource::OpenaiStreamChunksFallback
    }
}

/// How usage reached the cell: every request's final report, or not at all.
fn usage_mode(tokens: u64, usage_everywhere: bool) -> UsageMode {
    if usage_everywhere && tokens > 0 {
        UsageMode::FinalOnly
    } else {
        UsageMode::None
    }
}

/// Mean and peak KV-cache usage over the scheduler samples taken during the
/// batch (0 when the engine reports none).
fn kv_usage(m: &Batch) -> (f64, f64) {
    let kv: Vec<f64> = m.sched.iter().filter_map(|s| s.snap.kv_usage).collect();
    if kv.is_empty() {
        return (0.0, 0.0);
    }
    let mean = kv.iter().sum::<f64>() / kv.len() as f64;
    (mean, kv.iter().copied().fold(0.0, f64::max))
}

/// Client read times of different streams can be reordered by this much
/// when the client is briefly not scheduled: a server that admits request C
/// one step after finishing A can show A's last token read just after C's
/// first one. Overlaps shorter than this are not concurrency (a step of any
/// real server is longer than the reordering a loaded client shows).
const REORDER_TOLERANCE_S: f64 = 0.02;

/// Most requests generating at the same moment: overlap of the intervals from
/// first to last token, each end moved [`REORDER_TOLERANCE_S`] earlier (not
/// before its start); an interval ending exactly when another starts does
/// not overlap it. A one-token request is generating at its single instant
/// (a zero-length interval still counts).
pub(super) fn max_overlap(samples: &[RequestSample]) -> u32 {
    // At one instant: ends of intervals with a length first, then starts,
    // then ends of zero-length intervals, so touching intervals do not
    // overlap and an instant is counted with whatever runs at it.
    let mut edges: Vec<(f64, u8, i32)> = samples
        .iter()
        .filter_map(|s| Some((s.first_token_s?, s.end_s?)))
        .map(|(a, b)| (a, (b - REORDER_TOLERANCE_S).max(a).min(b)))
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
