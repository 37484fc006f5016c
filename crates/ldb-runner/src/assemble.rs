//! Turning a cell's raw measurements into its `CellResult`.

mod client;
mod server;

use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::engine::Engine;
use ldb_core::gaps::GapStats;
use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{
    AggregateSource, CellExtras, CellResult, CellStatus, DecodeMode, SchedulerFields,
    ServerClientMismatch,
};

use client::client_side;
use server::{
    ServerCount, capacity_reason, gauge_basis, kv_usage, prefix_hit_rate, scheduler, server_count,
    spec_fields,
};

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
    /// The read taken after the end scrape because one reading alone saw a
    /// queue (`confirm_read.rs`).
    pub confirm_scrape: Option<&'a Scrape>,
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

/// Build the cell result (status Ok / CapacityLimited / NoTokens / Error).
pub fn assemble(i: CellInputs<'_>) -> CellResult {
    let wall = (i.window_end - i.window_start).max(1e-9);
    let client = client_side(&i);
    let tokens = client.count.tokens;
    let server = server_count(&i);
    let sched = scheduler(&i);
    let (kv_mean, kv_max) = kv_usage(&i);
    let (spec, steps_source) = spec_fields(&i, &server, tokens, wall);
    let (prefix_rate, prefix_basis) = prefix_hit_rate(&i).unzip();

    let errors = error_summary(i.outcomes, i.max_error_rate);
    let status = verdict(tokens, &sched, &errors);
    let aggregate = (tokens > 0).then(|| tokens as f64 / wall);
    let denom = if sched.effective_concurrency > 0.0 {
        sched.effective_concurrency
    } else {
        f64::from(i.concurrency)
    };
    let tally = &client.tally;
    CellResult {
        concurrency: i.concurrency,
        context_tokens: i.context,
        benchmark_mode: DecodeMode::Duration,
        measurement_seconds: wall,
        measurement_wall_seconds: wall,
        client_output_tokens: tokens,
        server_output_tokens: server.tokens.round() as u64,
        aggregate_source: if tokens == 0 {
            AggregateSource::None
        } else {
            client.count.source
        },
        aggregate_tps: aggregate.filter(|_| !errors.over_limit),
        per_request_avg_tps: aggregate.filter(|_| !errors.over_limit).map(|a| a / denom),
        latency: client.latency,
        total_tokens: tokens,
        num_completed: tally.completed,
        num_errors: tally.errors,
        server_gen_throughput: server.rate,
        server_utilization: kv_mean,
        spec,
        ext: CellExtras {
            status,
            status_reason: status_reason(status, &i, &sched, &errors),
            active_decode_tps: if client.active_secs > 0.0 {
                tokens as f64 / client.active_secs
            } else {
                0.0
            },
            measurement_active_seconds: client.active_secs,
            usage_mode: client.count.usage_mode,
            requests_started: i.outcomes.len() as u64,
            requests_cancelled: tally.cancelled,
            server_utilization_max: kv_max,
            server_steps_source: steps_source,
            server_prefix_cache_hit_rate: prefix_rate,
            prefix_cache: ldb_core::result::PrefixCacheCell {
                server_prefix_cache_basis: prefix_basis.unwrap_or_default(),
                ..Default::default()
            },
            server_gauge_basis: gauge_basis(&i),
            tokens_per_joule: i
                .hw
                .and_then(|h| ldb_core::hardware::tokens_per_joule(tokens as f64, h))
                .unwrap_or(0.0),
            all_samples_latency: client.all_latency,
            token_gap_p50: i.gaps.p50,
            token_gap_p90: i.gaps.p90,
            token_gap_p99: i.gaps.p99,
            token_gap_max: i.gaps.max,
            reasoning_tokens: client.reasoning_tokens,
            content_tokens: tokens - client.reasoning_tokens - client.tool_call_tokens,
            tool_call_tokens: client.tool_call_tokens,
            channel_split_source: client.split_source.into(),
            error_rate: errors.rate,
            error_reasons: errors.reasons,
            early_stop_requests: tally.early_stops,
            usage_anomalies: tally.usage_anomalies,
            server_client_mismatch: aggregate.and_then(|client| counter_mismatch(client, &server)),
            server_gen_throughput_low: server.counter_bounds.map(|(low, _)| low),
            server_gen_throughput_high: server.counter_bounds.and_then(|(_, high)| high),
            server_tokens_source: server.source,
            ttft_breakdown: crate::ttft_breakdown::cell_breakdown(
                i.start_scrape,
                i.end_scrape,
                i.outcomes
                    .iter()
                    .zip(&client.samples)
                    .filter(|(_, s)| s.first_token_in_window),
            ),
            ..CellExtras::default()
        },
        request_samples: client.samples,
        sched,
        ..CellResult::default()
    }
}

/// Why the cell has its status, in words (empty for an ok cell).
fn status_reason(
    status: CellStatus,
    i: &CellInputs<'_>,
    sched: &SchedulerFields,
    errors: &ErrorSummary,
) -> String {
    match status {
        CellStatus::NoTokens => "no output token arrived inside the measurement window".into(),
        CellStatus::CapacityLimited => capacity_reason(i, sched),
        CellStatus::Error => errors.reason.clone(),
        _ => String::new(),
    }
}

/// The client's rate against the server's token counter, when the server
/// exports one (see [`mismatch`]).
fn counter_mismatch(client: f64, server: &ServerCount) -> Option<ServerClientMismatch> {
    let rate = server.counter_rate?;
    let (low, high) = server.counter_bounds?;
    mismatch(client, rate, (low, high.unwrap_or(f64::INFINITY)))
}

/// The cell's status: failures beyond the limit, then no tokens, then
/// capacity, else ok.
fn verdict(tokens: u64, sched: &SchedulerFields, errors: &ErrorSummary) -> CellStatus {
    if errors.over_limit {
        CellStatus::Error
    } else if tokens == 0 {
        CellStatus::NoTokens
    } else if sched.capacity_limited {
        CellStatus::CapacityLimited
    } else {
        CellStatus::Ok
    }
}

/// Client and server rates that differ by more than this share are flagged.
const MISMATCH_LIMIT: f64 = 0.05;

/// The mismatch record when the client's rate lies more than
/// [`MISMATCH_LIMIT`] outside the server counter's `bounds` (its rate over
/// the longest and the shortest span the bracketing scrapes allow). With
/// prompt scrapes the bounds close on `server`, and the rule is a plain 5 %
/// gap; a slow `/metrics` answer widens them rather than raising a false
/// alarm. The record's gap is measured from `server`, the middle estimate.
pub(crate) fn mismatch(
    client: f64,
    server: f64,
    (low, high): (f64, f64),
) -> Option<ServerClientMismatch> {
    let inside = client >= low * (1.0 - MISMATCH_LIMIT) && client <= high * (1.0 + MISMATCH_LIMIT);
    if server <= 0.0 || inside {
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

#[cfg(test)]
mod tests;
