//! The whole result file: metadata, diagnostics, prefill rows, decode cells.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::result::{CellResult, PrefillEntry, summary_tables};

/// Run configuration and outcome, first block of the result file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// Tool version.
    pub version: String,
    /// `vllm`, `sglang`, `llamacpp` or `openai_proxy`.
    pub engine: String,
    /// Model name used in requests.
    pub model: String,
    /// Server label: the URL as given, or `host:port`.
    pub server: String,
    /// Local time of the last save (ISO 8601).
    pub timestamp: String,
    /// `duration` or `request-count`.
    pub decode_mode: String,
    /// `sustained_decode` or `burst_e2e_decode`.
    pub primary_decode_layer: String,
    /// `--duration`.
    pub duration_per_test: f64,
    /// `--request-count`.
    pub request_count: u64,
    /// `--warmup-request-count`.
    pub warmup_request_count: u64,
    /// `--run-burst`.
    pub run_burst: bool,
    /// `integrated_decode_scout`, `standalone_cold` or `skipped`.
    pub prefill_mode: String,
    /// `--standalone-prefill`.
    pub standalone_prefill: bool,
    /// `--prefill-only`.
    pub prefill_only: bool,
    /// `--skip-prefill`.
    pub skip_prefill: bool,
    /// `not_run_use_--run-burst` or `enabled`.
    pub burst_e2e_status: String,
    /// `--burst-request-count`.
    pub burst_request_count: u64,
    /// `--burst-warmup-request-count`.
    pub burst_warmup_request_count: u64,
    /// `--burst-requests-per-concurrency`.
    pub burst_requests_per_concurrency: u64,
    /// `--decode-warmup-seconds`.
    pub decode_warmup_seconds: f64,
    /// Context of the hidden decode warmup cell.
    pub decode_warmup_context: u64,
    /// 1 when the hidden warmup ran, else 0.
    pub decode_warmup_concurrency: u32,
    /// `--cell-warmup-timeout-seconds` (0 = automatic).
    pub cell_warmup_timeout_seconds: f64,
    /// How the automatic readiness timeout is chosen.
    pub cell_warmup_timeout_policy: String,
    /// `--show-capacity-limited-values`.
    pub show_capacity_limited_values: bool,
    /// `--max-tokens`.
    pub max_tokens: u64,
    /// `--temperature` (null when unset).
    pub temperature: Option<f64>,
    /// Requests carry `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Effective KV budget in tokens (0 = unknown).
    pub max_total_tokens: u64,
    /// `--dcp-size` as given.
    pub dcp_size: u64,
    /// Prometheus `/metrics` was usable.
    pub metrics_available: bool,
    /// Why metrics are not used, if so.
    pub metrics_warning: String,
    /// Concurrency levels as requested.
    pub concurrency_levels: Vec<u32>,
    /// Context lengths as requested.
    pub context_lengths: Vec<u64>,
    /// Startup diagnostics were collected.
    pub startup_diagnostics_available: bool,
    /// The NVIDIA P2P override is in effect.
    pub nvidia_p2p_override_effective: bool,
    /// Fabric benchmark status (not run by this tool).
    pub p2pmark_status: String,
    /// AMD fabric status (not run by this tool).
    pub amd_fabric_status: String,
    /// Layout version of this file.
    pub schema_version: u32,
    /// Always `llm-decode-bench`.
    pub tool: String,
    /// Local time the run started (ISO 8601).
    pub started_at: String,
    /// `complete`, `in_progress` (written mid-run) or `interrupted`.
    pub run_status: String,
    /// Engine version reported by the server.
    pub engine_version: String,
    /// Model context length reported by the server (0 = unknown).
    pub model_context_length: u64,
    /// Where `max_total_tokens` came from.
    pub kv_budget_source: String,
    /// The KV budget in tokens the matrix was checked against (`max_total_tokens`,
    /// null when unknown).
    pub kv_budget_tokens: Option<u64>,
    /// `--max-error-rate`: the failed share of a cell's requests that leaves it valid.
    pub max_error_rate: f64,
    /// Context-parallel multiplier applied to the local KV size.
    pub cp_size: u64,
    /// Where `cp_size` came from.
    pub cp_source: String,
    /// Concurrency levels run. Levels above an engine's cap are run and
    /// flagged, not dropped, so this equals `concurrency_levels`.
    pub concurrency_levels_run: Vec<u32>,
    /// `exact` (server tokenizer) or `estimate` (two-point calibration).
    pub token_targeting: String,
    /// Padding characters per token used to size prompts.
    pub chars_per_token: f64,
    /// Fixed prompt overhead in tokens (chat template and framing).
    pub prompt_overhead_tokens: f64,
    /// Actual prompt tokens per context (as the server counted them).
    pub prompt_tokens_by_context: BTreeMap<String, u64>,
    /// Prompt tokens the server reported (`usage.prompt_tokens`) for each
    /// context's first measured cell: the check of `prompt_tokens_by_context`.
    pub prompt_tokens_served_by_context: BTreeMap<String, u64>,
    /// How output tokens are counted: `continuous`, `final_only` or `none`.
    pub usage_mode: String,
    /// The built-in simulator scenario when `--sim` was used.
    pub sim_scenario: String,
}

/// The complete result file.
#[derive(Debug, Clone, Default)]
pub struct ResultDocument {
    /// Run configuration.
    pub metadata: Metadata,
    /// Host snapshot collected before contacting the server.
    pub startup_diagnostics: Value,
    /// NVIDIA P2P override check.
    pub nvidia_p2p_override: Value,
    /// Whole-run hardware summary.
    pub hardware_run_summary: Value,
    /// `HH:MM:SS message` lines (all of them).
    pub event_log: Vec<String>,
    /// Prefill rows by context.
    pub prefill: BTreeMap<u64, PrefillEntry>,
    /// Primary decode cells in execution order (skipped cells included with status).
    pub results: Vec<CellResult>,
    /// Burst cells.
    pub burst_results: Vec<CellResult>,
    /// Static methodology texts.
    pub methodology: Value,
}

impl ResultDocument {
    /// The JSON value written to disk.
    pub fn to_json(&self) -> Value {
        let concs = &self.metadata.concurrency_levels;
        let ctxs = &self.metadata.context_lengths;
        let (summary, summary_status) = summary_tables(&self.results, ctxs, concs);
        let (burst, burst_status) = summary_tables(&self.burst_results, ctxs, concs);
        let mut prefill = Map::new();
        for (ctx, row) in &self.prefill {
            prefill.insert(
                ctx.to_string(),
                serde_json::to_value(row).unwrap_or(Value::Null),
            );
        }
        let not_run = || serde_json::json!({"status": "not_run"});
        let mut m = Map::new();
        m.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).unwrap_or(Value::Null),
        );
        m.insert(
            "startup_diagnostics".into(),
            or_empty(&self.startup_diagnostics),
        );
        m.insert(
            "nvidia_p2p_override".into(),
            or_empty(&self.nvidia_p2p_override),
        );
        m.insert("p2pmark".into(), not_run());
        m.insert("amd_fabric".into(), not_run());
        m.insert(
            "hardware_run_summary".into(),
            or_empty(&self.hardware_run_summary),
        );
        m.insert("event_log".into(), self.event_log.clone().into());
        m.insert("prefill".into(), Value::Object(prefill));
        m.insert("results".into(), cells_json(&self.results));
        m.insert("summary_table".into(), summary);
        m.insert("summary_table_status".into(), summary_status);
        m.insert("burst_results".into(), cells_json(&self.burst_results));
        m.insert("burst_summary_table".into(), burst);
        m.insert("burst_summary_table_status".into(), burst_status);
        m.insert("methodology".into(), or_empty(&self.methodology));
        Value::Object(m)
    }

    /// Pretty JSON text with a trailing newline.
    pub fn to_json_string(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.to_json()).unwrap_or_default();
        s.push('\n');
        s
    }
}

fn or_empty(v: &Value) -> Value {
    if v.is_null() {
        Value::Object(Map::new())
    } else {
        v.clone()
    }
}

fn cells_json(cells: &[CellResult]) -> Value {
    Value::Array(cells.iter().map(CellResult::to_json).collect())
}
