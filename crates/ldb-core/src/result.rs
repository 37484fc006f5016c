//! The result model: what a run writes to its JSON file, and reads back.
//!
//! Key names follow the reference tool's result files so existing scripts keep
//! working. Where the reference computed a key wrongly, the key keeps its name
//! and gets the right value; `docs/result-json.md` lists every changed meaning
//! and every key added here. Units are in the names where the reference had
//! none (seconds unless stated, tok/s for rates).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hardware::HardwareSummary;

mod cell_out;
mod latency;
mod modes;
mod prefill;
mod prefix;
mod tables;
pub(crate) mod wire;

pub use latency::{Dist, LatencyStats, RequestSample};
pub use modes::{AggregateSource, DecodeMode, PrefillMethod, PrefillMode, RunStatus, UsageMode};
pub use prefill::{PrefillEntry, ServerValidation};
pub use prefix::{PREFIX_MISMATCH_POINTS, PrefixCacheCell, ResetStatus, RunPrefixCache};
pub use tables::{matrix_table, summary_tables};
use wire::{round1, round3, round4_all};

/// Version of the result layout written by this build (bumped on breaking changes).
///
/// 2: `rate_results[].achieved_rate` is completed requests per second; the
/// send rate it was in 1 is `offered_rate_measured` (an older file reads
/// that way, see `document::load`); `request_samples[].time_to_second_token`
/// is `null` when not measured.
pub const SCHEMA_VERSION: u32 = 2;

/// Outcome of one matrix cell, as a machine-readable word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Measured at the requested concurrency; the value is trustworthy.
    #[default]
    Ok,
    /// Measured, but the server ran fewer than C requests or queued some.
    CapacityLimited,
    /// Measured window produced no tokens; no throughput value is reported.
    NoTokens,
    /// A request failed during the cell; the value is not reported.
    Error,
    /// Not run: C × (context + max_tokens) exceeds the KV budget.
    SkippedKv,
    /// Not run: context + max_tokens exceeds the model's context length.
    SkippedContext,
    /// Not run or cut short: the user skipped it (`s`) or stopped the run.
    SkippedUser,
    /// Not run: `--slo-search` stopped raising the concurrency at this
    /// context after two consecutive levels failed the SLO.
    SkippedSlo,
}

impl CellStatus {
    /// True for statuses whose cell was never measured.
    pub fn is_skip(self) -> bool {
        matches!(
            self,
            CellStatus::SkippedKv
                | CellStatus::SkippedContext
                | CellStatus::SkippedUser
                | CellStatus::SkippedSlo
        )
    }

    /// True for statuses a resumed run keeps as they are: a measured value
    /// (`ok`, `capacity_limited`) or a deliberate skip. `error` and
    /// `no_tokens` are not finished: a resumed run measures them again.
    pub fn is_finished(self) -> bool {
        !matches!(self, CellStatus::Error | CellStatus::NoTokens)
    }

    /// The snake_case word used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Ok => "ok",
            CellStatus::CapacityLimited => "capacity_limited",
            CellStatus::NoTokens => "no_tokens",
            CellStatus::Error => "error",
            CellStatus::SkippedKv => "skipped_kv",
            CellStatus::SkippedContext => "skipped_context",
            CellStatus::SkippedUser => "skipped_user",
            CellStatus::SkippedSlo => "skipped_slo",
        }
    }
}

/// One decode cell (sustained, request-count or burst).
///
/// Read with the derived `Deserialize` (parts flattened, missing keys default);
/// written through `cell_out::CellOut`, which keeps the reference's key
/// order where `capacity_limited` comes after the readiness keys.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CellResult {
    /// Requested concurrency.
    pub concurrency: u32,
    /// Nominal context in tokens.
    pub context_tokens: u64,
    /// `duration`, `request-count` or `burst-e2e`.
    pub benchmark_mode: DecodeMode,
    /// Measured requests per cell in request modes (0 in duration mode).
    pub request_count_target: u64,
    /// Warmup requests per cell in request modes.
    pub warmup_request_count: u64,
    /// Denominator of `aggregate_tps`: the wall window in duration mode.
    pub measurement_seconds: f64,
    /// Window start → window end by the wall clock.
    pub measurement_wall_seconds: f64,
    /// Output tokens the client counted inside the window.
    pub client_output_tokens: u64,
    /// Generated-token counter delta over the window (vLLM, llama.cpp, SGLang counters).
    pub server_output_tokens: u64,
    /// Where `aggregate_tps` came from.
    pub aggregate_source: AggregateSource,
    /// Headline tok/s (`null` in JSON for skipped and failed cells).
    pub aggregate_tps: Option<f64>,
    /// `aggregate_tps` divided by the effective concurrency.
    pub per_request_avg_tps: Option<f64>,
    /// Latency statistics over requests that produced tokens in the window.
    #[serde(flatten)]
    pub latency: LatencyStats,
    /// Every request sample of the cell.
    pub request_samples: Vec<RequestSample>,
    /// Tokens inside the window (same as `client_output_tokens`, or the server delta).
    pub total_tokens: u64,
    /// Whole cell time: scout, ramp-up, window and drain.
    pub wall_time: f64,
    /// Requests that completed (reached their natural end) during the cell.
    pub num_completed: u64,
    /// Requests that failed during the cell.
    pub num_errors: u64,
    /// Server generation rate over the window (counter delta / scrape interval).
    pub server_gen_throughput: f64,
    /// Mean KV-cache usage fraction over the window's scrapes.
    pub server_utilization: f64,
    /// Spec decode.
    #[serde(flatten)]
    pub spec: SpecFields,
    /// Scheduler.
    #[serde(flatten)]
    pub sched: SchedulerFields,
    /// Ramp-up.
    pub warmup_timed_out: bool,
    /// Cell start (before the scout) → window start.
    pub warmup_duration: f64,
    /// Why the window started.
    pub ready_reason: String,
    /// Why readiness was not reached (timeout) or a skip deficit.
    pub timeout_reason: String,
    /// Hardware summary over the window (`{}` when unavailable).
    pub hardware_summary: HardwareSummary,
    /// New keys (see docs/result-json.md).
    #[serde(flatten)]
    pub ext: CellExtras,
}

/// Speculative-decoding fields of a cell (flattened into the cell, keys
/// prefixed as the reference named them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpecFields {
    /// Accepted / drafted tokens over the window.
    #[serde(rename = "server_spec_accept_rate")]
    pub accept_rate: f64,
    /// Tokens per drafted step, 1 + accepted / drafts.
    #[serde(rename = "server_spec_accept_length")]
    pub accept_length: f64,
    /// Drafts (drafted engine steps) in the window.
    #[serde(rename = "server_spec_drafts")]
    pub drafts: u64,
    /// Draft tokens proposed in the window.
    #[serde(rename = "server_spec_draft_tokens")]
    pub draft_tokens: u64,
    /// Draft tokens accepted in the window.
    #[serde(rename = "server_spec_accepted_tokens")]
    pub accepted_tokens: u64,
    /// Acceptance probability of each draft position (4 dp in JSON).
    #[serde(rename = "server_spec_pos_accept", serialize_with = "round4_all")]
    pub pos_accept: Vec<f64>,
    /// Engine (target-model) steps in the window.
    #[serde(rename = "server_engine_steps")]
    pub engine_steps: f64,
    /// Engine steps per second over the scrape interval of the counters.
    #[serde(rename = "server_steps_per_s")]
    pub steps_per_s: f64,
    /// Output tokens per engine step.
    #[serde(rename = "server_accept_len_effective")]
    pub accept_len_effective: f64,
    /// steps/s × a reference acceptance length (0 unless configured).
    pub accept_norm_tps: f64,
    /// The reference acceptance length used (0 unless configured).
    pub accept_norm_ref_len: f64,
}

/// Scheduler state over the window (flattened into the cell).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerFields {
    /// Mean running requests (1 decimal).
    #[serde(serialize_with = "round1")]
    pub avg_running_reqs: f64,
    /// Max running requests.
    pub max_running_reqs: u64,
    /// Concurrency the server really ran: mean running from the window's
    /// scrapes; without metrics, the mean number of producing streams (≤ C).
    #[serde(serialize_with = "round1")]
    pub effective_concurrency: f64,
    /// Mean waiting requests (1 decimal).
    #[serde(serialize_with = "round1")]
    pub avg_queue_reqs: f64,
    /// Max waiting requests.
    pub max_queue_reqs: u64,
    /// Share of scrapes with a non-empty queue (3 decimals).
    #[serde(serialize_with = "round3")]
    pub queue_fraction: f64,
    /// C > 1 and mean running < 0.98·C.
    pub underfilled: bool,
    /// The server did not run the requested concurrency. The cell writes it
    /// after its readiness keys, where the reference had it, not here.
    #[serde(skip_serializing)]
    pub capacity_limited: bool,
}

/// Keys this tool adds to each cell (flattened into the cell; absent from
/// reference files, so every one defaults on read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CellExtras {
    /// Machine-readable outcome.
    pub status: CellStatus,
    /// Human-readable reason for a non-ok status.
    pub status_reason: String,
    /// Tokens in window / (last token arrival in window − window start).
    pub active_decode_tps: f64,
    /// Window start → last token arrival inside the window.
    pub measurement_active_seconds: f64,
    /// `continuous` (usage on every chunk), `final_only`, or `none` (chunks counted).
    pub usage_mode: UsageMode,
    /// Requests launched during the cell (ramp-up included).
    pub requests_started: u64,
    /// Requests cut at the window end.
    pub requests_cancelled: u64,
    /// Max KV usage fraction over the window's scrapes.
    pub server_utilization_max: f64,
    /// Where `server_steps_per_s` came from.
    pub server_steps_source: String,
    /// Prefix-cache hit share of the prompt tokens looked up during the window
    /// (Δhits / Δqueries; null when the server reports no prefix-cache counters
    /// or nothing was looked up).
    pub server_prefix_cache_hit_rate: Option<f64>,
    /// Intended prefix-cache hit rate, its source and the reset (`prefix.rs`).
    #[serde(flatten)]
    pub prefix_cache: PrefixCacheCell,
    /// What `server_utilization` and the scheduler means rest on (sustained
    /// cells with `/metrics`; see `gauge_mean.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_gauge_basis: Option<crate::gauge_mean::GaugeBasis>,
    /// Why the cell's scout ended without a token: it waited its whole
    /// first-token limit (a server sending only keep-alive comments, say).
    /// Absent when the scout answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scout_timeout: Option<String>,
    /// Joules and dollars per token (`energy_cost.rs`; absent until a run
    /// stamps it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_cost: Option<crate::energy_cost::CellEnergyCost>,
    /// Output tokens per joule of GPU energy in the window (0 when unknown).
    pub tokens_per_joule: f64,
    /// Streams launched → window start.
    pub ramp_seconds: f64,
    /// KV tokens the cell needs (C × (context + max_tokens)).
    pub kv_required_tokens: u64,
    /// Tokens missing from the KV budget for a KV-skipped cell.
    pub kv_deficit_tokens: u64,
    /// Latency statistics over all samples of the cell (ramp-up included), a diagnostic.
    pub all_samples_latency: LatencyStats,
    /// Median gap between consecutive tokens inside the window, seconds
    /// (several tokens arriving together share the gap before them).
    pub token_gap_p50: Option<f64>,
    /// 90th percentile token gap, seconds.
    pub token_gap_p90: Option<f64>,
    /// 99th percentile token gap, seconds.
    pub token_gap_p99: Option<f64>,
    /// Largest token gap inside the window, seconds.
    pub token_gap_max: Option<f64>,
    /// The window's token-gap histogram, in memory only (never written):
    /// `--repeat` pools it across repeats (`repeat::pool`).
    #[serde(skip)]
    pub gap_counts: Option<crate::gaps::GapCounts>,
    /// Window tokens on the reasoning channel.
    pub reasoning_tokens: u64,
    /// Window tokens on the answer channel (`total_tokens −
    /// reasoning_tokens − tool_call_tokens`).
    pub content_tokens: u64,
    /// Window tokens of streamed tool calls (names and argument fragments),
    /// split like `reasoning_tokens`; left out when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub tool_call_tokens: u64,
    /// How the window tokens were split by channel: `usage_deltas` (each
    /// chunk's usage increase, by its channel) or `chunk_share` (chunks by
    /// channel scaled to the token count); `_mixed` appended when some chunks
    /// carried both channels (counted as content).
    pub channel_split_source: String,
    /// Failed requests / requests started in the cell.
    pub error_rate: f64,
    /// The first distinct failure reasons (at most 3).
    pub error_reasons: Vec<String>,
    /// Requests that stopped with `finish_reason: "stop"` although `ignore_eos`
    /// was asked: the server ignores it and outputs are shorter than requested.
    pub early_stop_requests: u64,
    /// Requests whose usage was dropped as implausible (counted by chunks instead).
    pub usage_anomalies: u64,
    /// The client's rate lies more than 5 % outside the server counter's
    /// bounds over the window (`server_gen_throughput_low` … `_high`).
    pub server_client_mismatch: Option<ServerClientMismatch>,
    /// Where `server_output_tokens` came from (the counter name), empty when none.
    pub server_tokens_source: String,
    /// The lowest counter rate the bracketing scrapes allow: the counter
    /// delta over the longest time they can span (the start scrape's
    /// sending to the end scrape's answer). Absent without a counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_gen_throughput_low: Option<f64>,
    /// The highest: the delta over the shortest span (the start scrape's
    /// answer to the end scrape's sending). Absent without a counter, or
    /// when the two scrapes' spans overlap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_gen_throughput_high: Option<f64>,
    /// Window start, Unix seconds (for lining up with server logs).
    pub window_start_unix: Option<f64>,
    /// Window end, Unix seconds.
    pub window_end_unix: Option<f64>,
    /// Longest time inside the window that the cell driver went without
    /// running, beyond its tick, seconds: the benchmark itself was not
    /// scheduled (a starved or frozen client). Above
    /// [`CLIENT_STALL_LIMIT_S`] the window's client numbers are not trusted.
    pub client_stall_max_s: f64,
    /// How many times the cell was measured: 2 when the first window caught
    /// a client stall and the cell was measured again.
    pub measure_attempts: u32,
    /// Time the benchmark's threads spent runnable but waiting for a CPU
    /// inside the window, summed over its threads, seconds (Linux only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_runqueue_wait_s: Option<f64>,
    /// Major page faults of the benchmark's process inside the window (Linux only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_major_faults: Option<u64>,
    /// CPU time the hypervisor took from this machine inside the window, all
    /// CPUs together, seconds (Linux only; 0 on bare metal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_steal_s: Option<f64>,
    /// CPU time of the benchmark's threads inside the window over the
    /// window's length times the CPUs it may run on, 0–1 (Linux only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_share: Option<f64>,
    /// 99th percentile of how late a 10 ms timer on the benchmark's runtime
    /// fired inside the window, seconds: how long an arrived token waited
    /// before the client read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_loop_lag_p99: Option<f64>,
    /// The benchmark itself, not the server, limited this window (see
    /// `ldb_core::headroom`): its numbers may be low and its latencies high.
    /// Written only when true, so files from before this key read back and
    /// write out byte for byte.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_limited: bool,
    /// `--slo` verdict of the cell: met every target (`null`: some target
    /// could not be judged, or the cell was not measured). Absent without `--slo`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::present"
    )]
    pub slo_met: Option<Option<bool>>,
    /// `--slo` keys whose percentile is above its target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_failed: Option<Vec<String>>,
    /// `--slo` keys the cell has no value for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_unknown: Option<Vec<String>>,
    /// `--slo` goodput, tok/s: `aggregate_tps` × the window-token share of
    /// requests that met every per-request target (`null`: not judged).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "wire::present"
    )]
    pub goodput: Option<Option<f64>>,
    /// `--repeat N` (N > 1): each measurement of the cell, in the order
    /// measured (see `crate::repeat`). Absent for a single measurement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<crate::repeat::RepeatEntry>,
    /// `--repeat N`: mean, standard deviation and 95 % interval of each
    /// headline metric over the repeats. Absent for a single measurement.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub repeat_stats: std::collections::BTreeMap<String, crate::student::MeanCi>,
    /// `--duration auto`: why the window closed (`ci` or `max_duration`).
    /// Absent for fixed windows and for windows cut short (skip, errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<crate::autostop::StoppedBy>,
    /// `--duration auto`: 95 % interval `[low, high]` of the window's
    /// client-counted rate, tok/s, at its close (see `crate::autostop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_ci95: Option<[f64; 2]>,
    /// `--duration auto`: how `rate_ci95` was computed (`batch_means`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_ci_method: Option<String>,
    /// `--duration auto`: how far the rate moved across the window (the
    /// least-squares slope of the batch rates × the window), percent of the mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_drift_pct: Option<f64>,
    /// `--shards N`: what each shard contributed, index order (see
    /// `docs/shards.md`). Absent for a single process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<crate::shard::ShardCellRecord>,
    /// `--shards N`: indexes of the shards lost during the cell (their
    /// streams are not counted). Absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards_lost: Vec<u32>,
    /// Per-second client tokens, the server's gauges at each scrape and the
    /// GPU samples over the cell (`timeline.rs`). Absent for cells that
    /// record none (request modes, sharded and skipped cells, older files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<crate::timeline::CellTimeline>,
    /// TTFT taken apart by the engine's own histograms (vLLM, SGLang) or
    /// per-request timings (llama.cpp), with the front end's share
    /// (`ttft_breakdown.rs`). Absent where the engine gives neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_breakdown: Option<crate::ttft_breakdown::TtftBreakdown>,
    /// `--mixed-prefill-contexts`: the prefill–decode interference probe
    /// run after the window closed (`crate::interference`). Absent without
    /// the flag, and in files from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<crate::interference::Interference>,
}

/// A driver gap longer than this (seconds, beyond the tick) marks a window
/// whose client-side numbers cannot be trusted: tokens piled up unread and
/// were counted late, or not at all.
pub const CLIENT_STALL_LIMIT_S: f64 = 2.0;

impl CellExtras {
    /// The benchmark itself stalled inside the window.
    pub fn client_stalled(&self) -> bool {
        self.client_stall_max_s > CLIENT_STALL_LIMIT_S
    }

    /// The client's headroom over the window, as recorded.
    pub fn headroom(&self) -> crate::headroom::Headroom {
        crate::headroom::Headroom {
            cpu_share: self.client_cpu_share,
            loop_lag_p99_s: self.event_loop_lag_p99,
        }
    }

    /// The benchmark's own load over the window, as recorded.
    pub fn client_load(&self) -> crate::client_load::ClientLoad {
        crate::client_load::ClientLoad::from_parts(
            self.client_runqueue_wait_s,
            self.client_major_faults,
            self.machine_steal_s,
        )
    }
}

/// The client's and the server's token rates over one window disagree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerClientMismatch {
    /// Tokens the client received per second (`aggregate_tps`).
    pub client_tps: f64,
    /// Tokens the server's counter says it generated per second.
    pub server_tps: f64,
    /// (client − server) / server, percent.
    pub difference_pct: f64,
}

impl CellResult {
    /// The JSON object of this cell, keys in the reference order, new keys last.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// A cell that was not measured (skip of any kind).
    pub fn skipped(
        concurrency: u32,
        context_tokens: u64,
        mode: DecodeMode,
        status: CellStatus,
        reason: String,
    ) -> Self {
        CellResult {
            concurrency,
            context_tokens,
            benchmark_mode: mode,
            aggregate_source: AggregateSource::None,
            timeout_reason: reason.clone(),
            hardware_summary: HardwareSummary::default(),
            ext: CellExtras {
                status,
                status_reason: reason,
                usage_mode: UsageMode::None,
                ..CellExtras::default()
            },
            ..CellResult::default()
        }
    }
}

/// Round to `dp` decimals (the reference rounds several fields on output).
pub fn round(v: f64, dp: i32) -> f64 {
    if !v.is_finite() {
        return 0.0;
    }
    let f = 10f64.powi(dp);
    (v * f).round() / f
}

/// For `skip_serializing_if`: a count that is 0 is left out, so results of
/// runs without it keep their keys.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
