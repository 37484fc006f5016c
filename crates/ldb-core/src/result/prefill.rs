//! Prefill rows (`prefill.<context>`) and their server-side validation.

use serde::{Deserialize, Serialize};

use super::PrefillMethod;
use super::wire::empty_as_none;
use crate::hardware::HardwareSummary;

/// Server-side validation of a prefill row (from Prometheus counters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
// The reference tool wrote no `skipped`, `skip_reason` or `label`.
#[serde(default)]
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
    /// How the row was measured (`""` in JSON when not known).
    #[serde(with = "empty_as_none")]
    pub method: Option<PrefillMethod>,
    /// Server-side validation.
    pub server_validation: ServerValidation,
    /// Hardware summary over the row's samples (`{}` for scout rows).
    pub hardware_summary: HardwareSummary,
    /// The row was skipped (beyond the model context, or by the user).
    pub skipped: bool,
    /// Why it was skipped or failed.
    pub skip_reason: String,
    /// Client-visible prefill includes queueing, HTTP and the first decode step.
    pub label: String,
    /// `warm_prefix` when the prompt opened with a `--shared-prefix-tokens`
    /// prefix the server had cached, so the row is the prefill of the rest
    /// (`prompt_tokens` − the shared tokens); absent for a cold prompt.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prefill_mode: String,
}
