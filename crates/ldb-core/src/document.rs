//! The whole result file: metadata, diagnostics, prefill rows, decode cells.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::hardware::HardwareSummary;
use crate::hardware::p2p::P2pOverride;
use crate::result::wire::{empty_as_none, zero_as_none};
use crate::result::{
    CellResult, DecodeMode, PrefillEntry, PrefillMode, RunStatus, UsageMode, summary_tables,
};
use crate::slo::SloSummary;
use diagnostics::empty_object_as_none;

mod diagnostics;
mod fabric;
mod faults;
mod load;
mod methodology;
mod methodology_notes;
mod resumed;

pub use diagnostics::{CommandRecord, StartupDiagnostics};

/// Reads `null` or `{}` as `None` and anything else as the typed block: for
/// other documents that hold this document's blocks (e.g. completion stats'
/// `nvidia_p2p_override`) and must read files where an empty block was `{}`.
pub fn none_if_empty<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
where
    T: serde::de::DeserializeOwned,
    D: serde::Deserializer<'de>,
{
    empty_object_as_none::deserialize(d)
}
pub use fabric::{FabricBlock, FabricStatus};
pub use faults::{MetricsLost, ServerOutage, ServerRestart};
pub use load::LoadError;
pub use methodology::{Methodology, MethodologyNote};
pub use methodology_notes::{MethodologyFacts, coding_peak_note};
pub use resumed::{CellKey, ResumeEntry, Resumed};

/// Run configuration and outcome, first block of the result file.
///
/// Every key defaults on read: files of the reference tool lack the ones this
/// tool added (and `schema_version`, which then reads as 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// `duration` or `request-count` (`""` in JSON when not known).
    #[serde(with = "empty_as_none")]
    pub decode_mode: Option<DecodeMode>,
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
    /// `integrated_decode_scout`, `standalone_cold` or `skipped` (`""` when not known).
    #[serde(with = "empty_as_none")]
    pub prefill_mode: Option<PrefillMode>,
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
    /// Effective KV budget in tokens (written 0 when unknown).
    #[serde(with = "zero_as_none")]
    pub max_total_tokens: Option<u64>,
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
    /// `complete`, `in_progress` (written mid-run) or `interrupted` (`""`
    /// when not known, e.g. a reference file, which has no such key).
    #[serde(with = "empty_as_none")]
    pub run_status: Option<RunStatus>,
    /// Engine version reported by the server.
    pub engine_version: String,
    /// Model context length reported by the server (written 0 when unknown).
    #[serde(with = "zero_as_none")]
    pub model_context_length: Option<u64>,
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
    /// How output tokens are counted: `continuous`, `final_only` or `none`
    /// (`""` until a cell has measured it).
    #[serde(with = "empty_as_none")]
    pub usage_mode: Option<UsageMode>,
    /// The built-in simulator scenario when `--sim` was used.
    pub sim_scenario: String,
    /// `--api`: the request API the run's generation requests spoke
    /// (absent in files written before the key existed: those spoke chat).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<crate::api::Api>,
    /// The request APIs discovery found the server serving (absent when
    /// not probed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apis_served: Vec<crate::api::Api>,
    /// Streamed events of a type the API's parser does not know, counted
    /// over the run and ignored (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub api_unknown_events: u64,
    /// `--prefill-contexts` as run (omitted when empty, as in files written
    /// before the key existed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prefill_contexts: Vec<u64>,
    /// `--prefill-metric`, normalized: `client`, `auto` or `prometheus`
    /// (omitted when not known).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prefill_metric: String,
    /// The `--resume` history of this file (absent for a run never resumed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<Resumed>,
    /// Times the server stopped answering mid-run (absent when it never did).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_outages: Vec<ServerOutage>,
    /// Server restarts seen between cells (absent when none was).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_restarts: Vec<ServerRestart>,
    /// `/metrics` lost after discovery (absent when it kept answering).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_lost: Option<MetricsLost>,
    /// Shared prefixes, cache granularity and reset (absent when unused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<crate::result::RunPrefixCache>,
    /// The open-loop settings (absent for closed-loop runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopSettings>,
    /// `--repeat N`: measurements asked per cell of the primary matrix
    /// (absent for 1, as in files written before the key existed).
    #[serde(skip_serializing_if = "is_single")]
    pub repeat: u32,
    /// `--slo-search` / `--slo-bisect` as run (absent when neither was on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_search: Option<SloSearchSettings>,
    /// `--metrics-interval`: seconds between the background `/metrics`
    /// reads while something is measured (0 = only the measurement's own
    /// start and end reads). Absent in files written before the option,
    /// whose runs read every 0.5 s throughout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_interval: Option<f64>,
    /// Why the warmup (the JIT request, the hidden decode warmup cell)
    /// stopped at its limit or failed, while the run went on (absent when
    /// it ended normally).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub warmup_timeout: String,
    /// `--duration auto`: the rule that closes a sustained window early
    /// (`duration_per_test` is then its maximum). Absent for fixed windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_auto: Option<crate::autostop::DurationAuto>,
    /// `merge` of offline shards: each host's clock-sync state while its
    /// shard ran, and whether they were synchronised to within the windows'
    /// tolerance. Absent in every other run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_clocks: Option<crate::host_clock::MergeClocks>,
    /// The effective configuration: every flag by long name after
    /// defaults, presets and `--config`, secrets removed (`rerun` reads it).
    /// Absent in files written before the key existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, Value>>,
}

/// How the run searched for the SLO frontier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SloSearchSettings {
    /// `--slo-search`: levels above two consecutive failures were skipped.
    pub search: bool,
    /// `--slo-bisect`: levels between the last pass and the first failure were measured.
    pub bisect: bool,
    /// The targets the run judged with, `key=seconds,…`.
    pub spec: String,
}

/// 0 (files without the key) and 1 both mean one measurement per cell.
fn is_single(n: &u32) -> bool {
    *n <= 1
}

/// How an open-loop run (`--request-rate`) sent its requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenLoopSettings {
    /// `--request-rate`, requests per second, as given.
    pub request_rates: Vec<f64>,
    /// `--arrival`.
    pub arrival: crate::arrivals::Arrival,
    /// `--seed` of the arrival schedules (cell k uses seed + k).
    pub seed: u64,
    /// `--request-count` per cell (0 = rate × `duration_per_test`).
    pub request_count: u64,
    /// `--max-in-flight` (0 = no cap).
    pub max_in_flight: u64,
    /// `--stop-at-saturation`.
    pub stop_at_saturation: bool,
}

/// The complete result file.
///
/// Read with the derived `Deserialize`; the tables derived from the cells
/// (`summary_table*`) are not fields: they are ignored on read and rebuilt
/// on write (`DocumentOut`). The `p2pmark`/`amd_fabric` blocks are written
/// as `{"status": "not_run"}` while never filled in.
/// Use [`ResultDocument::from_json_str`] to read a file: it checks what the
/// derive cannot (that it is a result at all, and its schema version).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ResultDocument {
    /// Run configuration.
    pub metadata: Metadata,
    /// Host snapshot collected before contacting the server (`None` is
    /// written as `{}`, and `{}` reads as `None`).
    #[serde(with = "empty_object_as_none")]
    pub startup_diagnostics: Option<StartupDiagnostics>,
    /// NVIDIA P2P override check (`None` is written as `{}`, as above).
    #[serde(with = "empty_object_as_none")]
    pub nvidia_p2p_override: Option<P2pOverride>,
    /// GPU peer-to-peer diagnostic (`--p2pmark`; a block never filled in,
    /// or `null`, is written as `{"status": "not_run"}`). docs/fabric.md.
    pub p2pmark: FabricBlock,
    /// CPU/NUMA fabric diagnostic (`--amd-fabric`; as `p2pmark`).
    pub amd_fabric: FabricBlock,
    /// Whole-run hardware summary (`{}` when empty).
    pub hardware_run_summary: HardwareSummary,
    /// `HH:MM:SS message` lines (all of them).
    pub event_log: Vec<String>,
    /// Prefill rows by context.
    pub prefill: BTreeMap<u64, PrefillEntry>,
    /// Primary decode cells in execution order (skipped cells included with status).
    pub results: Vec<CellResult>,
    /// Burst cells.
    pub burst_results: Vec<CellResult>,
    /// Open-loop cells (`--request-rate`), in run order.
    pub rate_results: Vec<crate::open_loop::RateResult>,
    /// Trace replays (`--trace`; docs/workloads.md).
    pub trace_results: Vec<crate::replay::TraceResult>,
    /// Multi-turn session runs (`--sessions`; docs/workloads.md).
    pub session_results: Vec<crate::replay::session::SessionResult>,
    /// How each kind of number is made, in brief (empty is written as `{}`;
    /// `null` reads as empty).
    #[serde(deserialize_with = "methodology::null_as_default")]
    pub methodology: Methodology,
    /// `--slo` targets and frontier (absent without `--slo`).
    pub slo: Option<SloSummary>,
    /// The `--coding-peak` probe (absent without it).
    pub coding_peak: Option<crate::coding_peak::CodingPeak>,
    /// Energy and cost settings, idle power, frontier and replay costs
    /// (absent when the run stamped none; `energy_cost.rs`).
    pub energy_cost: Option<crate::energy_cost::RunEnergyCost>,
}

/// The file as written: the document's fields by reference, in file order,
/// with the derived tables and fixed blocks in their places.
#[derive(Serialize)]
struct DocumentOut<'a> {
    metadata: &'a Metadata,
    #[serde(serialize_with = "empty_object_as_none::serialize_ref")]
    startup_diagnostics: &'a Option<StartupDiagnostics>,
    #[serde(serialize_with = "empty_object_as_none::serialize_ref")]
    nvidia_p2p_override: &'a Option<P2pOverride>,
    p2pmark: &'a FabricBlock,
    amd_fabric: &'a FabricBlock,
    hardware_run_summary: &'a HardwareSummary,
    event_log: &'a [String],
    prefill: &'a BTreeMap<u64, PrefillEntry>,
    results: &'a [CellResult],
    summary_table: Value,
    summary_table_status: Value,
    burst_results: &'a [CellResult],
    burst_summary_table: Value,
    burst_summary_table_status: Value,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    rate_results: &'a [crate::open_loop::RateResult],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    trace_results: &'a [crate::replay::TraceResult],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    session_results: &'a [crate::replay::session::SessionResult],
    #[serde(skip_serializing_if = "Option::is_none")]
    slo: Option<&'a SloSummary>,
    methodology: &'a Methodology,
    #[serde(skip_serializing_if = "Option::is_none")]
    coding_peak: Option<&'a crate::coding_peak::CodingPeak>,
    #[serde(skip_serializing_if = "Option::is_none")]
    energy_cost: Option<&'a crate::energy_cost::RunEnergyCost>,
}

impl Serialize for ResultDocument {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let concs = &self.metadata.concurrency_levels;
        let ctxs = &self.metadata.context_lengths;
        let (summary_table, summary_table_status) = summary_tables(&self.results, ctxs, concs);
        let (burst_summary_table, burst_summary_table_status) =
            summary_tables(&self.burst_results, ctxs, concs);
        DocumentOut {
            metadata: &self.metadata,
            startup_diagnostics: &self.startup_diagnostics,
            nvidia_p2p_override: &self.nvidia_p2p_override,
            p2pmark: &self.p2pmark,
            amd_fabric: &self.amd_fabric,
            hardware_run_summary: &self.hardware_run_summary,
            event_log: &self.event_log,
            prefill: &self.prefill,
            results: &self.results,
            summary_table,
            summary_table_status,
            burst_results: &self.burst_results,
            burst_summary_table,
            burst_summary_table_status,
            rate_results: &self.rate_results,
            trace_results: &self.trace_results,
            session_results: &self.session_results,
            slo: self.slo.as_ref(),
            methodology: &self.methodology,
            coding_peak: self.coding_peak.as_ref(),
            energy_cost: self.energy_cost.as_ref(),
        }
        .serialize(s)
    }
}

impl ResultDocument {
    /// The JSON value written to disk.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Pretty JSON text with a trailing newline.
    pub fn to_json_string(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
