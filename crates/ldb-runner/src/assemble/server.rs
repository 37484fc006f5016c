//! The server side of a window: counter deltas between the scrapes that
//! bracket it, the scheduler and KV gauges sampled inside it, prefix-cache
//! hits, and speculative-decoding fields.

use ldb_client::scrape::Scrape;
use ldb_core::cellstats::{SchedSample, scheduler_fields_timed};
use ldb_core::engine::Engine;
use ldb_core::gauge_mean::{GaugeBasis, TIME_WEIGHTED, max_weight, reading_weights, weighted_mean};
use ldb_core::result::{SchedulerFields, SpecFields, round};
use ldb_core::spec::{SpecWindow, normalize};
use ldb_core::stats::median;

use super::CellInputs;

/// A counter's growth; none when it went down (the server restarted
/// between the two reads, so the difference counts nothing).
fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let d = b? - a?;
    (d >= 0.0).then_some(d)
}

/// The server's own count of the window.
pub(super) struct ServerCount {
    /// Generated tokens between the bracketing scrapes (0 without a counter).
    pub tokens: f64,
    /// Tokens per second: the counter delta over the scrape interval, else
    /// the median of the engine's throughput gauge.
    pub rate: f64,
    /// Seconds between the bracketing scrapes' readings ([`Scrape::read_at`]).
    pub scrape_secs: f64,
    /// The rate from the counter, when there was one.
    pub counter_rate: Option<f64>,
    /// The counter rate's lowest and highest values given when each scrape
    /// could have been read (anywhere between its sending and its answer);
    /// the high one is `None` when the two scrapes' spans overlap.
    pub counter_bounds: Option<(f64, Option<f64>)>,
    /// The counter's name, empty without one.
    pub source: String,
}

/// Counter deltas between the start and end scrapes.
pub(super) fn server_count(i: &CellInputs<'_>) -> ServerCount {
    let mut out = ServerCount {
        tokens: 0.0,
        rate: 0.0,
        scrape_secs: 0.0,
        counter_rate: None,
        counter_bounds: None,
        source: String::new(),
    };
    // Scrapes of two server processes (a restart inside the window) give
    // no count: their difference would be negative or a mix of both.
    if let (Some(a), Some(b)) = (i.start_scrape, i.end_scrape)
        && a.snap.restart_evidence(&b.snap).is_none()
    {
        out.scrape_secs = b.read_at() - a.read_at();
        if let Some(dg) = delta(a.snap.gen_tokens, b.snap.gen_tokens) {
            out.tokens = dg.max(0.0);
            if out.scrape_secs > 0.0 {
                out.rate = out.tokens / out.scrape_secs;
                out.counter_rate = Some(out.rate);
                let widest = b.t - a.sent;
                let narrowest = b.sent - a.t;
                out.counter_bounds = Some((
                    out.tokens / widest,
                    (narrowest > 0.0).then(|| out.tokens / narrowest),
                ));
                out.source = b.snap.gen_tokens_source.unwrap_or_default().to_string();
            }
        }
    }
    if out.rate == 0.0 {
        out.rate = median(window_samples(i).filter_map(|s| s.snap.gen_throughput_gauge));
    }
    out
}

/// The scrapes sent inside the window: its start scrape and the background
/// ones (every `--metrics-interval`; none when it is 0).
fn window_samples<'a>(i: &CellInputs<'a>) -> impl Iterator<Item = &'a Scrape> + use<'a> {
    i.start_scrape.into_iter().chain(i.sched.iter())
}

/// The scrapes that read the window's gauges: the start scrape, the
/// background ones and the end scrape (sent at the window's end while the
/// streams still run), each with its weight: the share of the window it
/// stands for (`ldb_core::gauge_mean`).
fn gauge_readings<'a>(i: &CellInputs<'a>) -> (Vec<&'a Scrape>, Vec<f64>) {
    let reads: Vec<&Scrape> = window_samples(i).chain(i.end_scrape).collect();
    let times: Vec<f64> = reads.iter().map(|s| s.read_at()).collect();
    let weights = reading_weights(&times, i.window_start, i.window_end);
    (reads, weights)
}

/// Running and queued requests over the window's readings, time-weighted,
/// with the producing-stream samples as a fallback.
pub(super) fn scheduler(i: &CellInputs<'_>) -> SchedulerFields {
    let (reads, weights) = gauge_readings(i);
    let (samples, weights): (Vec<SchedSample>, Vec<f64>) = reads
        .iter()
        .zip(weights)
        .filter_map(|(s, w)| {
            Some((
                SchedSample {
                    running: s.snap.running?,
                    waiting: s.snap.waiting.unwrap_or(0.0),
                },
                w,
            ))
        })
        .unzip();
    let producing_mean = if i.producing_samples.is_empty() {
        0.0
    } else {
        i.producing_samples.iter().sum::<f64>() / i.producing_samples.len() as f64
    };
    scheduler_fields_timed(
        i.concurrency,
        &samples,
        &weights,
        i.readiness_failed,
        producing_mean,
        usize::from(confirm_saw_queue(i)),
    )
}

/// Time-weighted mean and max KV-cache usage over the window's readings.
pub(super) fn kv_usage(i: &CellInputs<'_>) -> (f64, f64) {
    let (reads, weights) = gauge_readings(i);
    let (kv, w): (Vec<f64>, Vec<f64>) = reads
        .iter()
        .zip(weights)
        .filter_map(|(s, w)| Some((s.snap.kv_usage?, w)))
        .unzip();
    (
        weighted_mean(&kv, &w),
        kv.iter().copied().fold(0.0, f64::max),
    )
}

/// Whether the confirming read (taken when one reading alone saw a
/// queue) saw one too.
fn confirm_saw_queue(i: &CellInputs<'_>) -> bool {
    i.confirm_scrape
        .is_some_and(|s| s.snap.waiting.unwrap_or(0.0) > 0.0)
}

/// What the gauge means rest on; none without a reading.
pub(super) fn gauge_basis(i: &CellInputs<'_>) -> Option<GaugeBasis> {
    let (reads, weights) = gauge_readings(i);
    (!reads.is_empty()).then(|| GaugeBasis {
        method: TIME_WEIGHTED.into(),
        scrapes: reads.len() as u64,
        max_gap_s: round(max_weight(&weights), 2),
        queue_scrapes: reads
            .iter()
            .filter(|s| s.snap.waiting.unwrap_or(0.0) > 0.0)
            .count() as u64,
        confirm_scrapes: u64::from(i.confirm_scrape.is_some()),
        confirm_queue_scrapes: u64::from(confirm_saw_queue(i)),
    })
}

/// Δhits / Δlookups of the prefix cache between the bracketing scrapes,
/// and over replicas what they rest on: the same reading as every other
/// mode's (`prefix_achieved::achieved`), so a window of misses has a rate
/// (0) and a replica's late series counts from 0.
pub(super) fn prefix_hit_rate(i: &CellInputs<'_>) -> Option<(f64, String)> {
    crate::prefix_achieved::rate_between(i.start_scrape?, i.end_scrape?)
}

/// Which capacity condition fired, in words.
pub(super) fn capacity_reason(i: &CellInputs<'_>, sched: &SchedulerFields) -> String {
    let ran = format!(
        "server ran {:.1} of {} requested streams",
        sched.effective_concurrency, i.concurrency
    );
    if i.readiness_failed {
        format!("{ran}; readiness ended on a plateau or the timeout")
    } else if sched.avg_queue_reqs >= 0.5 || sched.queue_fraction > 0.5 {
        format!(
            "{ran}; requests queued (mean {:.1}, {:.0}% of scrapes)",
            sched.avg_queue_reqs,
            sched.queue_fraction * 100.0
        )
    } else {
        format!("{ran}; at most {} running", sched.max_running_reqs)
    }
}

/// Speculative-decoding fields from the step counters between the
/// bracketing scrapes, or on SGLang from its acceptance gauge.
pub(super) fn spec_fields(
    i: &CellInputs<'_>,
    server: &ServerCount,
    client_tokens: u64,
    wall: f64,
) -> (SpecFields, String) {
    let (server_tokens, scrape_secs, server_rate) =
        (server.tokens, server.scrape_secs, server.rate);
    if let (Some(a), Some(b)) = (i.start_scrape, i.end_scrape) {
        let out = if server_tokens > 0.0 {
            server_tokens
        } else {
            client_tokens as f64
        };
        let w = SpecWindow {
            start: &a.snap,
            end: &b.snap,
            scrape_seconds: scrape_secs,
            output_tokens: out,
        };
        if let Some(f) = normalize(w, i.accept_len_ref) {
            // llama.cpp adds a request's draft and accepted tokens to its
            // counters only when the request is released, so they cover the
            // requests that ended inside the window, not the window itself.
            let source = if i.engine == Engine::LlamaCpp {
                "counters_request_granular"
            } else {
                "counters"
            };
            return (f, source.into());
        }
    }
    if i.engine == Engine::Sglang {
        let gauge = median(
            window_samples(i)
                .filter_map(|s| s.snap.spec_accept_length_gauge)
                .filter(|v| *v > 1.0),
        );
        if gauge > 1.0 && server_rate > 0.0 {
            let steps_per_s = server_rate / gauge;
            let rate = median(window_samples(i).filter_map(|s| s.snap.spec_accept_rate_gauge));
            return (
                SpecFields {
                    accept_rate: rate,
                    accept_length: gauge,
                    engine_steps: steps_per_s * wall,
                    steps_per_s,
                    accept_len_effective: gauge,
                    accept_norm_tps: if i.accept_len_ref > 0.0 {
                        steps_per_s * i.accept_len_ref
                    } else {
                        0.0
                    },
                    accept_norm_ref_len: i.accept_len_ref,
                    ..SpecFields::default()
                },
                "sglang:spec_accept_length gauge (window median)".into(),
            );
        }
    }
    (SpecFields::default(), String::new())
}
