//! Prefill measurement and prompt sizing: scout contexts, the standalone
//! profile, the headline metric and the token calibration.

use std::path::PathBuf;

/// How the prefill headline is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrefillMetric {
    /// Client prompt_tokens / TTFT.
    #[default]
    Client,
    /// Client headline, server counters kept as validation.
    Auto,
    /// Server counters are the headline when valid.
    Prometheus,
}

impl PrefillMetric {
    /// The normalized word recorded in `metadata.prefill_metric`.
    pub fn as_str(self) -> &'static str {
        match self {
            PrefillMetric::Client => "client",
            PrefillMetric::Auto => "auto",
            PrefillMetric::Prometheus => "prometheus",
        }
    }
}

/// Prefill rows, the standalone prefill profile and how prompts are sized
/// (read by plan building, the prefill phases and startup's calibration).
#[derive(Debug, Clone)]
pub struct PrefillConfig {
    /// Extra scout-only prefill contexts.
    pub prefill_contexts: Vec<u64>,
    /// Prefill headline metric.
    pub prefill_metric: PrefillMetric,
    /// No prefill rows.
    pub skip_prefill: bool,
    /// Standalone cold-prefill profile over `prefill_contexts` before decode.
    pub standalone_prefill: bool,
    /// Seconds of sampling per standalone prefill context.
    pub prefill_duration: f64,
    /// Standalone prefill, then stop (no decode).
    pub prefill_only: bool,
    /// Calibration context for servers without a tokenizer route.
    pub calibration_context: u64,
    /// Calibration cache file (None = no cache).
    pub calibration_cache: Option<PathBuf>,
    /// `--token-targeting estimate`: size every context from the calibration
    /// fit alone, without counting each prompt (faster start, sizes off by a
    /// few tokens); otherwise contexts are counted exactly where the server can.
    pub estimate_only: bool,
}

impl Default for PrefillConfig {
    fn default() -> Self {
        PrefillConfig {
            prefill_contexts: vec![8192, 65536, 131072],
            prefill_metric: PrefillMetric::Client,
            skip_prefill: false,
            standalone_prefill: false,
            prefill_duration: 10.0,
            prefill_only: false,
            calibration_context: 8192,
            calibration_cache: None,
            estimate_only: false,
        }
    }
}
