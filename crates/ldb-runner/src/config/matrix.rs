//! The closed-loop decode matrix: which cells, how long, what each request asks for.

/// The sustained (or request-count) matrix and the decode requests it sends
/// (read by plan building, the cell runner and the matrix driver).
#[derive(Debug, Clone)]
pub struct MatrixConfig {
    /// Concurrency levels.
    pub concurrency: Vec<u32>,
    /// Context lengths.
    pub contexts: Vec<u64>,
    /// `max_tokens` per decode request.
    pub max_tokens: u64,
    /// Measured window per cell, seconds; with `auto_stop`, its maximum.
    pub duration: f64,
    /// `--duration auto`: a sustained cell's window may close once its rate
    /// is known (see `ldb_core::autostop`); None = every window is `duration`.
    pub auto_stop: Option<ldb_core::autostop::AutoStop>,
    /// Hidden C=1 warmup window, seconds (0 = off).
    pub decode_warmup_seconds: f64,
    /// Sampling temperature for decode requests.
    pub temperature: Option<f64>,
    /// Do not send `ignore_eos`.
    pub respect_eos: bool,
    /// Measured requests per cell; > 0 replaces the sustained matrix by
    /// request-count cells (`--request-count`).
    pub request_count: u64,
    /// Discarded warmup requests per request-count cell.
    pub warmup_request_count: u64,
    /// Stop raising the rate at a context after two saturated cells.
    pub stop_at_saturation: bool,
    /// `--repeat N`: each cell of the primary matrix is measured N times,
    /// pass after pass over the matrix (≥ 1).
    pub repeat: u32,
    /// `--mixed-prefill-contexts`: prompt lengths injected, one at a time,
    /// after each sustained cell's window (`interference.rs`); empty = off.
    pub mixed_prefill_contexts: Vec<u64>,
    /// `--tools FILE` with `--tool-choice`: tool definitions every decode
    /// and session request carries (None = no `tools` key).
    pub tools: Option<std::sync::Arc<ldb_core::tools::ToolSet>>,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            concurrency: vec![1, 2, 4, 8, 16, 32, 64, 128],
            contexts: vec![0, 16384, 32768, 65536, 131072],
            max_tokens: 8192,
            duration: 30.0,
            auto_stop: None,
            decode_warmup_seconds: 3.0,
            temperature: None,
            respect_eos: false,
            request_count: 0,
            warmup_request_count: 0,
            stop_at_saturation: false,
            repeat: 1,
            mixed_prefill_contexts: Vec::new(),
            tools: None,
        }
    }
}
