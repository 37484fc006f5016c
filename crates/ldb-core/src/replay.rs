//! Trace replays and multi-turn sessions as the result file keeps them
//! (`trace_results`, `session_results`; docs/workloads.md): requests sent at
//! their scheduled times, every latency counted from that time (as the
//! open-loop cells do, `crate::open_loop`), throughput over time in 1 s
//! buckets, and the prefix-cache hit rate the prompts intended next to the
//! one the server achieved. Arithmetic only.

pub mod affinity;
pub mod assemble;
pub mod session;

use serde::{Deserialize, Serialize};

use crate::prefix_cache::CacheGranularity;
use crate::result::{CellStatus, ResetStatus};
use crate::trace::{TraceCounts, TraceOptions};

pub use assemble::{ReplayInputs, ReplayRequest, assemble};

/// Points of difference between intended and achieved hit rate above which
/// the report flags the replay.
pub const HIT_RATE_FLAG_POINTS: f64 = 10.0;

/// A latency distribution, seconds (`None` fields: no sample).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Distribution {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
}

impl Distribution {
    /// The distribution of `values` (non-finite ones dropped).
    pub fn of(mut values: Vec<f64>) -> Self {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let p = |q: f64| Some(crate::stats::percentile_sorted(&values, q));
        Self {
            count: values.len() as u64,
            mean: Some(values.iter().sum::<f64>() / values.len() as f64),
            p50: p(50.0),
            p90: p(90.0),
            p99: p(99.0),
            max: values.last().copied(),
        }
    }
}

/// One second of a replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bucket {
    /// Start of the bucket, seconds after the replay's start.
    pub t: f64,
    /// Requests due in it.
    pub scheduled: u64,
    /// Requests that completed in it.
    pub completed: u64,
    /// Output tokens of the requests that completed in it.
    pub output_tokens: u64,
}

/// Intended against achieved prefix-cache hit rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PrefixCacheCheck {
    /// Share of prompt tokens an unlimited prefix cache at `granularity`
    /// would serve, from the prompts as built (`crate::prefix_cache`).
    pub prefix_cache_intended: Option<f64>,
    /// The granularity it was counted at.
    pub granularity: Option<CacheGranularity>,
    /// The hit rate the server reported over the replay.
    pub server_prefix_cache_hit_rate: Option<f64>,
    /// Where that came from, named as cells name it: `vllm_counters`,
    /// `sglang_counters`, `server_counters` (counter deltas),
    /// `llamacpp_timings` (`timings.cache_n` summed) or
    /// `usage_cached_tokens` (`usage.prompt_tokens_details.cached_tokens`
    /// summed). Older result files say `metrics` or `usage`.
    pub achieved_source: Option<String>,
    /// Over `--metrics-url` replicas: what the counters rest on (see
    /// `PrefixCacheCell::server_prefix_cache_basis`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_basis: Option<String>,
    /// The two differ by more than 10 points.
    pub differs: bool,
    /// The reset before the replay (`--reset-prefix-cache before-run` or
    /// `before-cell`); absent with `never`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_reset: Option<ResetStatus>,
    /// After a reset that was done: the prompt tokens the first request
    /// found cached (0 = the reset emptied the cache); absent when it could
    /// not be told apart from the requests after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_request_cached_tokens: Option<u64>,
    /// Where that came from: `usage` (the answer's `cached_tokens`) or
    /// `metrics` (the prefix-hit counter around the first request alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_request_cached_source: Option<String>,
}

impl PrefixCacheCheck {
    /// Sets `differs` from the two rates.
    pub fn judge(mut self) -> Self {
        self.differs = matches!(
            (self.prefix_cache_intended, self.server_prefix_cache_hit_rate),
            (Some(i), Some(a)) if (i - a).abs() * 100.0 > HIT_RATE_FLAG_POINTS
        );
        self
    }
}

/// How well prompt lengths came out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LengthCheck {
    /// Built prompts counted with the server's tokenizer before the replay.
    pub tokenized: u64,
    /// Largest |counted − intended| among them, tokens.
    pub tokenized_max_error: Option<u64>,
    /// Mean |counted − intended| among them, tokens.
    pub tokenized_mean_error: Option<f64>,
    /// Requests whose `usage.prompt_tokens` came back.
    pub reported: u64,
    /// Largest |reported − intended| among them, tokens.
    pub reported_max_error: Option<u64>,
    /// Completed requests that came back with fewer output tokens than the
    /// trace asked for: the server stopped at end-of-sequence (it ignored
    /// `ignore_eos`, or `--respect-eos` was given), so decode was shorter
    /// than the trace's.
    pub output_short: u64,
}

/// Where a replay's requests came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceSource {
    /// The file as given.
    pub path: String,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// `mooncake`, `burstgpt` or `jsonl`.
    pub format: String,
    /// Filters and time scale.
    pub options: TraceOptions,
    /// What the reader did with the rows.
    pub rows: TraceCounts,
    /// This tool's version.
    pub benchmark_version: String,
}

/// The corpus a replay's prompt text was cut from (`--prompt-corpus`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptCorpusInfo {
    /// The file's name (its last path component).
    pub name: String,
    /// SHA-256 of the whole file, hex.
    pub sha256: String,
    /// Bytes of the file.
    pub bytes: u64,
    /// Chunks cut from its opening and counted with the server's tokenizer.
    pub chunks: u64,
    /// Their tokens together: prompts longer than this repeat the text.
    pub tokens: u64,
    /// How the chunks were counted: `tokenize` (chat `/tokenize`),
    /// `tokenize_content` (llama.cpp's raw `/tokenize`) or `usage` (one
    /// `max_tokens = 1` request each).
    pub counted_by: String,
}

/// One trace replay (`--trace`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceResult {
    /// The trace.
    pub source: TraceSource,
    /// `ok`, `no_tokens`, `error` or `skipped_user`.
    pub status: CellStatus,
    /// Why, when not `ok`.
    pub status_reason: String,
    /// Requests, latencies, throughput.
    pub summary: ReplaySummary,
    /// Intended against achieved prefix-cache hit rate.
    pub prefix_cache: PrefixCacheCheck,
    /// Prompt lengths against the trace's.
    pub lengths: LengthCheck,
    /// The corpus the prompt text was cut from (absent: the word list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_corpus: Option<PromptCorpusInfo>,
    /// `--shards N` only: what each shard sent (`concurrency` holds its
    /// requests of the trace), index order; empty for one process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<crate::shard::ShardCellRecord>,
    /// `--shards N` only: shards lost during the replay (it is then `error`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards_lost: Vec<u32>,
}

/// What every replay (trace or sessions) measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplaySummary {
    /// Requests in the window (after filters).
    pub scheduled: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests that completed.
    pub completed: u64,
    /// Requests that failed.
    pub errors: u64,
    /// The first distinct failure reasons (at most 3).
    pub error_reasons: Vec<String>,
    /// Requests never sent: longer than the server's context (prompt +
    /// output tokens).
    pub skipped_too_long: u64,
    /// Requests never sent: the replay's time limit came while every
    /// `--max-in-flight` slot was taken, or the user stopped it.
    pub not_sent: u64,
    /// Seconds from the replay's start to the last request's end.
    pub wall_time: f64,
    /// Output tokens of completed requests ÷ `wall_time`.
    pub output_tps: f64,
    /// Completed requests ÷ `wall_time`.
    pub achieved_rate: Option<f64>,
    /// Completed requests meeting every per-request `--slo` bound ÷
    /// `wall_time` (`None` without `--slo`).
    pub goodput: Option<f64>,
    /// Time to first token from the scheduled time.
    pub ttft: Distribution,
    /// Time to first answer token from the scheduled time.
    pub ttfo: Distribution,
    /// Scheduled time to completion (completed requests).
    pub e2e: Distribution,
    /// Token gap p99 over the replay, seconds.
    pub token_gap_p99: Option<f64>,
    /// Send time − scheduled time.
    pub dispatch_lag: Distribution,
    /// Most requests in flight at once.
    pub max_in_flight: u64,
    /// `--max-in-flight` held some request back.
    pub max_in_flight_capped: bool,
    /// Throughput over time, 1 s buckets from the replay's start.
    pub buckets: Vec<Bucket>,
}
