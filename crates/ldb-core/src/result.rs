//! The result model: what a run writes to its JSON file.
//!
//! Key names follow the reference tool's result files so existing scripts keep
//! working. Where the reference computed a key wrongly, the key keeps its name
//! and gets the right value; `docs/result-json.md` lists every changed meaning
//! and every key added here. Units are in the names where the reference had
//! none (seconds unless stated, tok/s for rates).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::stats::Summary;

/// Version of the result layout written by this build (bumped on breaking changes).
pub const SCHEMA_VERSION: u32 = 1;

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
}

impl CellStatus {
    /// True for statuses whose cell was never measured.
    pub fn is_skip(self) -> bool {
        matches!(
            self,
            CellStatus::SkippedKv | CellStatus::SkippedContext | CellStatus::SkippedUser
        )
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
        }
    }
}

/// One request of a decode cell, as measured by the client.
///
/// Times `start_s`, `first_token_s` and `end_s` are seconds relative to the
/// cell's measurement-window start (negative before it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestSample {
    /// Request start → first chunk carrying a token (text, or a usage increase).
    pub ttft: f64,
    /// Request start → first answer (content) chunk; equals `ttft` without
    /// reasoning, 0 when no content arrived.
    #[serde(default)]
    pub ttfo: f64,
    /// First → second content chunk (a gap, 0 without a second chunk).
    pub time_to_second_token: f64,
    /// Request start → last content chunk, for completed requests only (else 0).
    pub latency: f64,
    /// Mean time per output token after the first (per token, not per chunk).
    pub inter_token_latency_avg: f64,
    /// Mean per-token gap over the gaps inside the window (0 when none).
    #[serde(default)]
    pub window_inter_token_latency_avg: f64,
    /// Mean gap between consecutive content chunks.
    pub chunk_inter_token_latency_avg: f64,
    /// Prompt tokens reported by the server (0 if never reported).
    pub input_tokens: u64,
    /// Output tokens (usage when reported, else content chunks).
    pub output_tokens: u64,
    /// Of those, reasoning tokens (usage details when reported, else by chunk channel).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// 1 / `inter_token_latency_avg`.
    pub output_tps_per_user: f64,
    /// `output_tokens / latency` for completed requests (else 0).
    pub e2e_output_tps_per_user: f64,
    /// The stream reached its natural end (`[DONE]` arrived).
    pub completed: bool,
    /// Request start, relative to the window start.
    pub start_s: f64,
    /// First content chunk, relative to the window start (null if none).
    pub first_token_s: Option<f64>,
    /// Last content chunk, relative to the window start (null if none).
    pub end_s: Option<f64>,
    /// The request produced tokens inside the measurement window.
    pub in_window: bool,
    /// Its first token arrived inside the window (its TTFT is a windowed one).
    #[serde(default)]
    pub first_token_in_window: bool,
    /// Where the per-token ITL came from: `usage` (token counts) or `chunks`.
    pub itl_source: String,
    /// The server's finish reason (`length`, `stop`, …), empty when none arrived.
    #[serde(default)]
    pub finish_reason: String,
    /// Failure reason, empty when the request did not fail.
    pub error: String,
}

/// Latency distribution fields, written as `<name>_avg`, `_p50`, `_p90`, `_p99`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Arithmetic mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl From<Summary> for Dist {
    fn from(s: Summary) -> Self {
        Dist {
            avg: s.avg,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
        }
    }
}

/// Client latency statistics over one set of request samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Time to first token (`None`: no first token in the window; JSON `null`).
    pub ttft: Option<Dist>,
    /// Time from first to second token chunk (`None` like `ttft`).
    pub time_to_second_token: Option<Dist>,
    /// Time to first output (answer) token (`None` like `ttft`).
    pub ttfo: Option<Dist>,
    /// Request latency (completed requests only).
    pub request_latency: Dist,
    /// Per-token inter-token latency.
    pub inter_token_latency: Dist,
    /// Per-user output tok/s (1 / ITL).
    pub output_tps_per_user: Dist,
    /// Per-user end-to-end tok/s (completed requests only).
    pub e2e_output_tps_per_user: Dist,
    /// Mean gap between content chunks.
    pub chunk_inter_token_latency: Dist,
    /// Mean input sequence length.
    pub input_seq_len_avg: f64,
    /// Output sequence length distribution.
    pub output_seq_len: Dist,
    /// Samples with at least one output token.
    pub request_count: u64,
    /// Of those, samples that completed.
    pub completed_request_count: u64,
}

/// One decode cell (sustained, request-count or burst).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellResult {
    /// Requested concurrency.
    pub concurrency: u32,
    /// Nominal context in tokens.
    pub context_tokens: u64,
    /// `duration`, `request-count` or `burst-e2e`.
    pub benchmark_mode: String,
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
    pub aggregate_source: String,
    /// Headline tok/s (`null` in JSON for skipped and failed cells).
    pub aggregate_tps: Option<f64>,
    /// `aggregate_tps` divided by the effective concurrency.
    pub per_request_avg_tps: Option<f64>,
    /// Latency statistics over requests that produced tokens in the window.
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
    pub spec: SpecFields,
    /// Scheduler.
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
    pub hardware_summary: Value,
    /// New keys (see docs/result-json.md).
    pub ext: CellExtras,
}

/// Speculative-decoding fields of a cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecFields {
    /// Accepted / drafted tokens over the window.
    pub accept_rate: f64,
    /// Tokens per drafted step, 1 + accepted / drafts.
    pub accept_length: f64,
    /// Drafts (drafted engine steps) in the window.
    pub drafts: u64,
    /// Draft tokens proposed in the window.
    pub draft_tokens: u64,
    /// Draft tokens accepted in the window.
    pub accepted_tokens: u64,
    /// Acceptance probability of each draft position.
    pub pos_accept: Vec<f64>,
    /// Engine (target-model) steps in the window.
    pub engine_steps: f64,
    /// Engine steps per second over the scrape interval of the counters.
    pub steps_per_s: f64,
    /// Output tokens per engine step.
    pub accept_len_effective: f64,
    /// steps/s × a reference acceptance length (0 unless configured).
    pub accept_norm_tps: f64,
    /// The reference acceptance length used (0 unless configured).
    pub accept_norm_ref_len: f64,
}

/// Scheduler state over the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerFields {
    /// Mean running requests (1 decimal).
    pub avg_running_reqs: f64,
    /// Max running requests.
    pub max_running_reqs: u64,
    /// Concurrency the server really ran: mean running from the window's
    /// scrapes; without metrics, the mean number of producing streams (≤ C).
    pub effective_concurrency: f64,
    /// Mean waiting requests (1 decimal).
    pub avg_queue_reqs: f64,
    /// Max waiting requests.
    pub max_queue_reqs: u64,
    /// Share of scrapes with a non-empty queue (3 decimals).
    pub queue_fraction: f64,
    /// C > 1 and mean running < 0.98·C.
    pub underfilled: bool,
    /// The server did not run the requested concurrency.
    pub capacity_limited: bool,
}

/// Keys this tool adds to each cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    pub usage_mode: String,
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
    /// Window tokens on the reasoning channel.
    pub reasoning_tokens: u64,
    /// Window tokens on the answer channel (`total_tokens − reasoning_tokens`).
    pub content_tokens: u64,
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
    /// Client and server generation rates over the window differ by more than 5 %.
    pub server_client_mismatch: Option<ServerClientMismatch>,
    /// Where `server_output_tokens` came from (the counter name), empty when none.
    pub server_tokens_source: String,
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

impl Serialize for CellResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

fn put_dist(m: &mut Map<String, Value>, name: &str, d: &Dist) {
    put_opt_dist(m, name, Some(d));
}

fn put_opt_dist(m: &mut Map<String, Value>, name: &str, d: Option<&Dist>) {
    let v = |f: fn(&Dist) -> f64| d.map_or(Value::Null, |d| f(d).into());
    m.insert(format!("{name}_avg"), v(|d| d.avg));
    m.insert(format!("{name}_p50"), v(|d| d.p50));
    m.insert(format!("{name}_p90"), v(|d| d.p90));
    m.insert(format!("{name}_p99"), v(|d| d.p99));
}

fn opt_f64(v: Option<f64>) -> Value {
    v.map_or(Value::Null, Value::from)
}

impl LatencyStats {
    /// Flat map of `<metric>_<stat>` keys, in the reference order.
    pub fn to_flat(&self, m: &mut Map<String, Value>) {
        put_opt_dist(m, "ttft", self.ttft.as_ref());
        put_opt_dist(
            m,
            "time_to_second_token",
            self.time_to_second_token.as_ref(),
        );
        put_dist(m, "request_latency", &self.request_latency);
        put_dist(m, "inter_token_latency", &self.inter_token_latency);
        put_dist(m, "output_tps_per_user", &self.output_tps_per_user);
        put_dist(m, "e2e_output_tps_per_user", &self.e2e_output_tps_per_user);
        put_dist(
            m,
            "chunk_inter_token_latency",
            &self.chunk_inter_token_latency,
        );
        put_opt_dist(m, "ttfo", self.ttfo.as_ref());
        m.insert("input_seq_len_avg".into(), self.input_seq_len_avg.into());
        m.insert("output_seq_len_avg".into(), self.output_seq_len.avg.into());
        m.insert("output_seq_len_p50".into(), self.output_seq_len.p50.into());
        m.insert("output_seq_len_p90".into(), self.output_seq_len.p90.into());
        m.insert("output_seq_len_p99".into(), self.output_seq_len.p99.into());
        m.insert("request_count".into(), self.request_count.into());
        m.insert(
            "completed_request_count".into(),
            self.completed_request_count.into(),
        );
    }
}

impl CellResult {
    /// The JSON object of this cell, keys in the reference order, new keys last.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("concurrency".into(), self.concurrency.into());
        m.insert("context_tokens".into(), self.context_tokens.into());
        m.insert("benchmark_mode".into(), self.benchmark_mode.clone().into());
        m.insert(
            "request_count_target".into(),
            self.request_count_target.into(),
        );
        m.insert(
            "warmup_request_count".into(),
            self.warmup_request_count.into(),
        );
        m.insert(
            "measurement_seconds".into(),
            round(self.measurement_seconds, 6).into(),
        );
        m.insert(
            "measurement_wall_seconds".into(),
            round(self.measurement_wall_seconds, 6).into(),
        );
        m.insert(
            "client_output_tokens".into(),
            self.client_output_tokens.into(),
        );
        m.insert(
            "server_output_tokens".into(),
            self.server_output_tokens.into(),
        );
        m.insert(
            "aggregate_source".into(),
            self.aggregate_source.clone().into(),
        );
        m.insert("aggregate_tps".into(), opt_f64(self.aggregate_tps));
        m.insert(
            "per_request_avg_tps".into(),
            opt_f64(self.per_request_avg_tps),
        );
        let mut lat = Map::new();
        self.latency.to_flat(&mut lat);
        let (counts, dists): (Vec<_>, Vec<_>) = lat
            .into_iter()
            .partition(|(k, _)| k == "request_count" || k == "completed_request_count");
        m.extend(dists);
        m.extend(counts);
        m.insert(
            "request_samples".into(),
            serde_json::to_value(&self.request_samples).unwrap_or(Value::Array(vec![])),
        );
        m.insert("total_tokens".into(), self.total_tokens.into());
        m.insert("wall_time".into(), self.wall_time.into());
        m.insert("num_completed".into(), self.num_completed.into());
        m.insert("num_errors".into(), self.num_errors.into());
        m.insert(
            "server_gen_throughput".into(),
            self.server_gen_throughput.into(),
        );
        m.insert("server_utilization".into(), self.server_utilization.into());
        let sp = &self.spec;
        m.insert("server_spec_accept_rate".into(), sp.accept_rate.into());
        m.insert("server_spec_accept_length".into(), sp.accept_length.into());
        m.insert("server_spec_drafts".into(), sp.drafts.into());
        m.insert("server_spec_draft_tokens".into(), sp.draft_tokens.into());
        m.insert(
            "server_spec_accepted_tokens".into(),
            sp.accepted_tokens.into(),
        );
        m.insert(
            "server_spec_pos_accept".into(),
            sp.pos_accept
                .iter()
                .map(|p| round(*p, 4))
                .collect::<Vec<_>>()
                .into(),
        );
        m.insert("server_engine_steps".into(), sp.engine_steps.into());
        m.insert("server_steps_per_s".into(), sp.steps_per_s.into());
        m.insert(
            "server_accept_len_effective".into(),
            sp.accept_len_effective.into(),
        );
        m.insert("accept_norm_tps".into(), sp.accept_norm_tps.into());
        m.insert("accept_norm_ref_len".into(), sp.accept_norm_ref_len.into());
        let sc = &self.sched;
        m.insert(
            "avg_running_reqs".into(),
            round(sc.avg_running_reqs, 1).into(),
        );
        m.insert("max_running_reqs".into(), sc.max_running_reqs.into());
        m.insert(
            "effective_concurrency".into(),
            round(sc.effective_concurrency, 1).into(),
        );
        m.insert("avg_queue_reqs".into(), round(sc.avg_queue_reqs, 1).into());
        m.insert("max_queue_reqs".into(), sc.max_queue_reqs.into());
        m.insert("queue_fraction".into(), round(sc.queue_fraction, 3).into());
        m.insert("underfilled".into(), sc.underfilled.into());
        m.insert("warmup_timed_out".into(), self.warmup_timed_out.into());
        m.insert(
            "warmup_duration".into(),
            round(self.warmup_duration, 3).into(),
        );
        m.insert("ready_reason".into(), self.ready_reason.clone().into());
        m.insert("timeout_reason".into(), self.timeout_reason.clone().into());
        m.insert("capacity_limited".into(), sc.capacity_limited.into());
        m.insert("hardware_summary".into(), self.hardware_summary.clone());
        if let Ok(Value::Object(ext)) = serde_json::to_value(&self.ext) {
            for (k, v) in ext {
                if k == "all_samples_latency" {
                    let mut flat = Map::new();
                    self.ext.all_samples_latency.to_flat(&mut flat);
                    m.insert(k, Value::Object(flat));
                } else {
                    m.insert(k, v);
                }
            }
        }
        Value::Object(m)
    }

    /// A cell that was not measured (skip of any kind).
    pub fn skipped(
        concurrency: u32,
        context_tokens: u64,
        mode: &str,
        status: CellStatus,
        reason: String,
    ) -> Self {
        CellResult {
            concurrency,
            context_tokens,
            benchmark_mode: mode.to_string(),
            aggregate_source: "none".into(),
            timeout_reason: reason.clone(),
            hardware_summary: Value::Object(Map::new()),
            ext: CellExtras {
                status,
                status_reason: reason,
                usage_mode: "none".into(),
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

/// Server-side validation of a prefill row (from Prometheus counters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerValidation {
    /// `""`, `prometheus`, or `prometheus:<token_source>`.
    pub method: String,
    /// Server tokens / server prefill seconds (integer-valued).
    pub tok_per_sec: f64,
    /// Server prefill seconds (3 dp).
    pub prefill_seconds: f64,
    /// Prompt tokens the server computed (its token source).
    pub prompt_tokens: u64,
    /// Prompt tokens of the request as the server counted them.
    pub request_prompt_tokens: u64,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u64,
    /// `kv_computed`, `local_compute`, `request_total`, or `llamacpp_timings`.
    pub token_source: String,
    /// Valid server samples.
    pub samples: u64,
    /// Why the server sample was rejected (raw deltas), empty when valid.
    pub invalid_reason: String,
}

/// One prefill row, keyed in JSON by its context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefillEntry {
    /// Client TTFT (median for standalone rows), seconds, 3 dp.
    pub ttft_seconds: f64,
    /// Prefill time behind the headline.
    pub prefill_seconds: f64,
    /// Headline prefill tok/s (integer-valued).
    pub tok_per_sec: f64,
    /// Client TTFT.
    pub client_ttft_seconds: f64,
    /// Client prompt_tokens / TTFT, whatever the headline is.
    pub client_tok_per_sec: f64,
    /// Prompt tokens of the request.
    pub prompt_tokens: u64,
    /// Samples behind the row.
    pub samples: u64,
    /// `integrated_scout`, `scout_only`, `client`, `prometheus`.
    pub method: String,
    /// Server-side validation.
    pub server_validation: ServerValidation,
    /// Hardware summary over the row's samples (`{}` for scout rows).
    pub hardware_summary: Value,
    /// The row was skipped (beyond the model context, or by the user).
    pub skipped: bool,
    /// Why it was skipped or failed.
    pub skip_reason: String,
    /// Client-visible prefill includes queueing, HTTP and the first decode step.
    pub label: String,
}

/// A matrix keyed `{context: {concurrency: value}}` with numeric-order keys.
pub fn matrix_table<T: Into<Value> + Clone>(
    cells: &[(u64, u32, T)],
    contexts: &[u64],
    concurrencies: &[u32],
) -> Value {
    let mut outer = Map::new();
    for ctx in contexts {
        let mut inner = Map::new();
        for c in concurrencies {
            if let Some((_, _, v)) = cells.iter().find(|(x, y, _)| x == ctx && y == c) {
                inner.insert(c.to_string(), v.clone().into());
            }
        }
        if !inner.is_empty() {
            outer.insert(ctx.to_string(), Value::Object(inner));
        }
    }
    Value::Object(outer)
}

/// `summary_table` (values, `null` when not reported) and its status twin.
pub fn summary_tables(cells: &[CellResult], contexts: &[u64], concs: &[u32]) -> (Value, Value) {
    let values: Vec<(u64, u32, Value)> = cells
        .iter()
        .map(|c| (c.context_tokens, c.concurrency, opt_f64(c.aggregate_tps)))
        .collect();
    let statuses: Vec<(u64, u32, Value)> = cells
        .iter()
        .map(|c| {
            (
                c.context_tokens,
                c.concurrency,
                c.ext.status.as_str().into(),
            )
        })
        .collect();
    (
        matrix_table(&values, contexts, concs),
        matrix_table(&statuses, contexts, concs),
    )
}
