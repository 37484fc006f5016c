//! Turning a cell's raw measurements into its `CellResult`.

use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::cellstats::{LatencyScope, SchedSample, latency_stats, scheduler_fields};
use ldb_core::engine::Engine;
use ldb_core::gaps::GapStats;
use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{
    AggregateSource, CellExtras, CellResult, CellStatus, DecodeMode, ServerClientMismatch,
    SpecFields, UsageMode,
};
use ldb_core::spec::{SpecWindow, normalize};
use ldb_core::stats::median;
use ldb_core::window::WindowBounds;

/// Everything measured in one cell.
pub struct CellInputs<'a> {
    /// Concurrency.
    pub concurrency: u32,
    /// Context.
    pub context: u64,
    /// Engine.
    pub engine: Engine,
    /// Every request of the cell.
    pub outcomes: &'a [StreamOutcome],
    /// Window start (run clock).
    pub window_start: f64,
    /// Window end.
    pub window_end: f64,
    /// Scrape at the window start.
    pub start_scrape: Option<&'a Scrape>,
    /// Scrape at the window end.
    pub end_scrape: Option<&'a Scrape>,
    /// Scrapes sent inside the window.
    pub sched: &'a [Scrape],
    /// Producing-stream counts sampled inside the window.
    pub producing_samples: &'a [f64],
    /// Readiness timed out or plateaued.
    pub readiness_failed: bool,
    /// Reference acceptance length (0 = off).
    pub accept_len_ref: f64,
    /// Hardware over the window.
    pub hw: Option<&'a HardwareSummary>,
    /// Token gaps inside the window.
    pub gaps: GapStats,
    /// The requests asked the server to ignore end-of-sequence.
    pub ignore_eos: bool,
    /// Largest share of failed requests that leaves the cell valid.
    pub max_error_rate: f64,
}

fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? - a?)
}

/// Build the cell result (status Ok / CapacityLimited / NoTokens).
pub fn assemble(i: CellInputs<'_>) -> CellResult {
    let window = WindowBounds {
        start: Some(i.window_start),
        end: Some(i.window_end),
    };
    let wall = (i.window_end - i.window_start).max(1e-9);
    let tracks: Vec<_> = i.outcomes.iter().map(|o| &o.track).collect();
    let continuous = tracks.iter().any(|t| t.has_continuous_usage());
    let any_usage = tracks.iter().any(|t| t.has_usage());
    let raw_tokens: u64 = tracks.iter().map(|t| t.window_tokens).sum();
    let window_chunks: u64 = tracks.iter().map(|t| t.window_chunks).sum();
    let window_reasoning: u64 = tracks.iter().map(|t| t.window_reasoning_tokens).sum();
    let mut chunk_ratio = 1.0;
    let (tokens, source, usage_mode) = if continuous {
        (
            raw_tokens,
            AggregateSource::OpenaiContinuousUsage,
            UsageMode::Continuous,
        )
    } else if any_usage {
        // Usage only at the end: tokens per chunk from finished requests.
        let (tok, ch) = tracks
            .iter()
            .filter(|t| t.has_usage() && t.chunks() > 0)
            .fold((0u64, 0u64), |(a, b), t| {
                (a + t.output_tokens(), b + t.chunks())
            });
        let ratio = if ch > 0 { tok as f64 / ch as f64 } else { 1.0 };
        chunk_ratio = ratio;
        (
            (window_chunks as f64 * ratio).round() as u64,
            AggregateSource::OpenaiStreamChunksCalibrated,
            UsageMode::FinalOnly,
        )
    } else {
        (
            window_chunks,
            AggregateSource::OpenaiStreamChunksFallback,
            UsageMode::None,
        )
    };
    let last = tracks
        .iter()
        .filter_map(|t| t.last_window_t)
        .fold(f64::NAN, f64::max);
    let active_secs = if last.is_finite() {
        last - i.window_start
    } else {
        0.0
    };

    let samples: Vec<_> = i
        .outcomes
        .iter()
        .map(|o| o.track.to_sample(i.window_start, window))
        .collect();
    let in_window: Vec<_> = samples.iter().filter(|s| s.in_window).collect();
    let latency = latency_stats(in_window.iter().copied(), LatencyScope::Window);
    let all_latency = latency_stats(samples.iter(), LatencyScope::All);
    let reasoning_tokens = if continuous {
        window_reasoning
    } else {
        ((window_reasoning as f64 * chunk_ratio).round() as u64).min(tokens)
    };
    let mixed = tracks.iter().any(|t| t.mixed_chunks() > 0);
    let split_source = match (continuous, mixed) {
        (true, false) => "usage_deltas",
        (true, true) => "usage_deltas_mixed",
        (false, false) => "chunk_share",
        (false, true) => "chunk_share_mixed",
    };

    // Server side: counter deltas between the scrapes bracketing the window.
    let mut server_tokens = 0.0;
    let mut server_rate = 0.0;
    let mut scrape_secs = 0.0;
    let mut server_counter_rate = None;
    if let (Some(a), Some(b)) = (i.start_scrape, i.end_scrape) {
        scrape_secs = b.t - a.t;
        if let Some(dg) = delta(a.snap.gen_tokens, b.snap.gen_tokens) {
            server_tokens = dg.max(0.0);
            if scrape_secs > 0.0 {
                server_rate = server_tokens / scrape_secs;
                server_counter_rate = Some(server_rate);
            }
        }
    }
    let server_tokens_source = if server_counter_rate.is_some() {
        i.end_scrape
            .and_then(|s| s.snap.gen_tokens_source)
            .unwrap_or_default()
            .to_string()
    } else {
        String::new()
    };
    if server_rate == 0.0 {
        server_rate = median(i.sched.iter().filter_map(|s| s.snap.gen_throughput_gauge));
    }
    let sched_samples: Vec<SchedSample> = i
        .sched
        .iter()
        .chain(i.start_scrape)
        .filter_map(|s| {
            Some(SchedSample {
                running: s.snap.running?,
                waiting: s.snap.waiting.unwrap_or(0.0),
            })
        })
        .collect();
    let producing_mean = if i.producing_samples.is_empty() {
        0.0
    } else {
        i.producing_samples.iter().sum::<f64>() / i.producing_samples.len() as f64
    };
    let sched = scheduler_fields(
        i.concurrency,
        &sched_samples,
        i.readiness_failed,
        producing_mean,
    );
    let kv: Vec<f64> = i.sched.iter().filter_map(|s| s.snap.kv_usage).collect();
    let kv_mean = if kv.is_empty() {
        0.0
    } else {
        kv.iter().sum::<f64>() / kv.len() as f64
    };
    let kv_max = kv.iter().copied().fold(0.0, f64::max);
    let prefix_hit_rate = match (i.start_scrape, i.end_scrape) {
        (Some(a), Some(b)) => match (
            delta(a.snap.prefix_queries, b.snap.prefix_queries),
            delta(a.snap.prefix_hits, b.snap.prefix_hits),
        ) {
            (Some(q), Some(h)) if q > 0.0 => Some((h / q).clamp(0.0, 1.0)),
            _ => None,
        },
        _ => None,
    };

    let (spec, steps_source) =
        spec_fields(&i, server_tokens, tokens, scrape_secs, server_rate, wall);

    let aggregate = tokens as f64 / wall;
    let status = if tokens == 0 {
        CellStatus::NoTokens
    } else if sched.capacity_limited {
        CellStatus::CapacityLimited
    } else {
        CellStatus::Ok
    };
    let effective = sched.effective_concurrency;
    let (agg, per_req) = if tokens == 0 {
        (None, None)
    } else {
        let denom = if effective > 0.0 {
            effective
        } else {
            f64::from(i.concurrency)
        };
        (Some(aggregate), Some(aggregate / denom))
    };
    let tpj =
        i.hw.and_then(|h| ldb_core::hardware::tokens_per_joule(tokens as f64, h))
            .unwrap_or(0.0);
    let completed = i
        .outcomes
        .iter()
        .filter(|o| o.track.to_sample(0.0, window).completed)
        .count() as u64;
    let failed = i
        .outcomes
        .iter()
        .filter(|o| o.track.error().is_some())
        .count() as u64;
    let capacity_reason = capacity_reason(&i, &sched);
    let errors = error_summary(i.outcomes, i.max_error_rate);
    let early_stops = if i.ignore_eos {
        samples.iter().filter(|s| s.finish_reason == "stop").count() as u64
    } else {
        0
    };
    let status = if errors.over_limit {
        CellStatus::Error
    } else {
        status
    };
    let mismatch = agg
        .zip(server_counter_rate)
        .and_then(|(client, server)| mismatch(client, server));
    CellResult {
        concurrency: i.concurrency,
        context_tokens: i.context,
        benchmark_mode: DecodeMode::Duration,
        measurement_seconds: wall,
        measurement_wall_seconds: wall,
        client_output_tokens: tokens,
        server_output_tokens: server_tokens.round() as u64,
        aggregate_source: if tokens == 0 {
            AggregateSource::None
        } else {
            source
        },
        aggregate_tps: if errors.over_limit { None } else { agg },
        per_request_avg_tps: if errors.over_limit { None } else { per_req },
        latency,
        request_samples: samples.clone(),
        total_tokens: tokens,
        num_completed: completed,
        num_errors: failed,
        server_gen_throughput: server_rate,
        server_utilization: kv_mean,
        spec,
        sched,
        ext: CellExtras {
            status,
            status_reason: match status {
                CellStatus::NoTokens => {
                    "no output token arrived inside the measurement window".into()
                }
                CellStatus::CapacityLimited => capacity_reason,
                CellStatus::Error => errors.reason.clone(),
                _ => String::new(),
            },
            active_decode_tps: if active_secs > 0.0 {
                tokens as f64 / active_secs
            } else {
                0.0
            },
            measurement_active_seconds: active_secs,
            usage_mode,
            requests_started: i.outcomes.len() as u64,
            requests_cancelled: i.outcomes.iter().filter(|o| o.cancelled).count() as u64,
            server_utilization_max: kv_max,
            server_steps_source: steps_source,
            server_prefix_cache_hit_rate: prefix_hit_rate,
            tokens_per_joule: tpj,
            all_samples_latency: all_latency,
            token_gap_p50: i.gaps.p50,
            token_gap_p90: i.gaps.p90,
            token_gap_p99: i.gaps.p99,
            token_gap_max: i.gaps.max,
            reasoning_tokens,
            content_tokens: tokens - reasoning_tokens,
            channel_split_source: split_source.into(),
            error_rate: errors.rate,
            error_reasons: errors.reasons,
            early_stop_requests: early_stops,
            usage_anomalies: tracks
                .iter()
                .filter(|t| t.usage_anomaly().is_some())
                .count() as u64,
            server_client_mismatch: mismatch,
            server_tokens_source,
            ..CellExtras::default()
        },
        ..CellResult::default()
    }
}

/// Client and server rates that differ by more than this share are flagged.
const MISMATCH_LIMIT: f64 = 0.05;

/// The mismatch record when the client's and the server's rates disagree.
pub(crate) fn mismatch(client: f64, server: f64) -> Option<ServerClientMismatch> {
    if server <= 0.0 || ((client - server) / server).abs() <= MISMATCH_LIMIT {
        return None;
    }
    Some(ServerClientMismatch {
        client_tps: client,
        server_tps: server,
        difference_pct: (client - server) / server * 100.0,
    })
}

/// Failed requests of a cell, against the share that leaves it valid.
pub(crate) struct ErrorSummary {
    /// Failed / started.
    pub rate: f64,
    /// First distinct reasons (at most 3).
    pub reasons: Vec<String>,
    /// Above the limit: the cell is an error.
    pub over_limit: bool,
    /// The status reason for an error cell.
    pub reason: String,
}

/// Count failures over the requests started in the cell.
pub(crate) fn error_summary(outcomes: &[StreamOutcome], max_rate: f64) -> ErrorSummary {
    let failed: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| o.track.error().map(|e| e.message.as_str()))
        .collect();
    let rate = if outcomes.is_empty() {
        0.0
    } else {
        failed.len() as f64 / outcomes.len() as f64
    };
    let mut reasons: Vec<String> = Vec::new();
    for f in &failed {
        if reasons.len() < 3 && !reasons.iter().any(|r| r == f) {
            reasons.push((*f).to_string());
        }
    }
    let over_limit = !failed.is_empty() && rate > max_rate;
    let reason = if over_limit {
        format!(
            "{} of {} requests failed ({:.1}% > {:.1}%): {}",
            failed.len(),
            outcomes.len(),
            rate * 100.0,
            max_rate * 100.0,
            reasons.join("; ")
        )
    } else {
        String::new()
    };
    ErrorSummary {
        rate,
        reasons,
        over_limit,
        reason,
    }
}

/// Which capacity condition fired, in words.
fn capacity_reason(i: &CellInputs<'_>, sched: &ldb_core::result::SchedulerFields) -> String {
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

fn spec_fields(
    i: &CellInputs<'_>,
    server_tokens: f64,
    client_tokens: u64,
    scrape_secs: f64,
    server_rate: f64,
    wall: f64,
) -> (SpecFields, String) {
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
            i.sched
                .iter()
                .filter_map(|s| s.snap.spec_accept_length_gauge)
                .filter(|v| *v > 1.0),
        );
        if gauge > 1.0 && server_rate > 0.0 {
            let steps_per_s = server_rate / gauge;
            let rate = median(i.sched.iter().filter_map(|s| s.snap.spec_accept_rate_gauge));
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

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
