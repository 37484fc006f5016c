//! Where the result goes and what is recorded about how the run was asked for.

use std::path::PathBuf;

/// The result file and the run's own record (read by the save hook,
/// startup's metadata and the report options).
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// Result file.
    pub output: PathBuf,
    /// Render capacity-limited values in the report.
    pub show_capacity_limited_values: bool,
    /// Reference acceptance length for `accept_norm_tps` (0 = off).
    pub accept_len_ref: f64,
    /// Command-line arguments as given (redacted later) for diagnostics.
    pub argv: Vec<String>,
    /// The effective configuration, every flag by long name, secrets
    /// removed: recorded as `metadata.config` for `rerun` (empty: not known).
    pub effective_config: serde_json::Map<String, serde_json::Value>,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            output: PathBuf::from("benchmark_results.json"),
            show_capacity_limited_values: false,
            accept_len_ref: 0.0,
            argv: Vec::new(),
            effective_config: serde_json::Map::new(),
        }
    }
}
