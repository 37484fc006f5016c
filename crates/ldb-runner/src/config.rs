//! The validated configuration of one run (built by the binary from its flags).

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

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    /// Label for reports (`host:port` or the URL as given).
    pub server_label: String,
    /// Bearer key (never written anywhere).
    pub api_key: Option<String>,
    /// Model name; None = first served model.
    pub model: Option<String>,
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
    /// Readiness limit override, seconds (0 = automatic).
    pub cell_warmup_timeout: f64,
    /// Extra scout-only prefill contexts.
    pub prefill_contexts: Vec<u64>,
    /// Prefill headline metric.
    pub prefill_metric: PrefillMetric,
    /// No prefill rows.
    pub skip_prefill: bool,
    /// Manual KV budget (0 = detect).
    pub kv_budget: u64,
    /// Legacy budget flag (0 = detect).
    pub max_total_tokens: u64,
    /// Context-parallel multiplier (0 = detect).
    pub dcp_size: u64,
    /// Sampling temperature for decode requests.
    pub temperature: Option<f64>,
    /// Do not send `ignore_eos`.
    pub respect_eos: bool,
    /// Largest share of failed requests that leaves a cell valid (`--max-error-rate`).
    pub max_error_rate: f64,
    /// Seconds to wait for a server that is still starting (`--wait-for-server`, 0 = none).
    pub wait_for_server: f64,
    /// Result file.
    pub output: PathBuf,
    /// Render capacity-limited values in the report.
    pub show_capacity_limited_values: bool,
    /// Reference acceptance length for `accept_norm_tps` (0 = off).
    pub accept_len_ref: f64,
    /// Calibration context for servers without a tokenizer route.
    pub calibration_context: u64,
    /// Calibration cache file (None = no cache).
    pub calibration_cache: Option<PathBuf>,
    /// `--token-targeting estimate`: size every context from the calibration
    /// fit alone, without counting each prompt (faster start, sizes off by a
    /// few tokens); otherwise contexts are counted exactly where the server can.
    pub estimate_only: bool,
    /// `--stream-idle-timeout`: a request whose tokens stop this long after
    /// its first one fails as stalled (seconds; 0 = off).
    pub stream_idle_timeout: f64,
    /// `--server-down-grace`: how long a server that stopped answering
    /// mid-run is waited for before the cells left are labelled and the run
    /// ends (seconds).
    pub server_down_grace: f64,
    /// Readiness must hold this long.
    pub ready_stable_seconds: f64,
    /// A capacity plateau must hold this long.
    pub plateau_seconds: f64,
    /// Pause between cells after the server drained, seconds.
    pub cell_pause_seconds: f64,
    /// Seconds between background `/metrics` reads while nothing is
    /// measured (ramp-up readiness, idle and drain waits).
    pub scrape_interval: f64,
    /// `--metrics-interval`: seconds between background `/metrics` reads
    /// while a window, a burst batch, an open-loop cell or a prefill probe
    /// is measured; 0 = none (the measurement's edge scrapes only).
    pub metrics_interval: f64,
    /// `--metrics-url`: replicas behind a router whose `/metrics` are read
    /// and combined instead of the server's own (empty: the server's).
    pub metrics_urls: Vec<String>,
    /// Measured requests per cell; > 0 replaces the sustained matrix by
    /// request-count cells (`--request-count`).
    pub request_count: u64,
    /// Discarded warmup requests per request-count cell.
    pub warmup_request_count: u64,
    /// Run the Burst / E2E matrix after the sustained one.
    pub run_burst: bool,
    /// Measured requests per burst cell (0 = max(C, C × per-concurrency)).
    pub burst_request_count: u64,
    /// Warmup requests per burst cell (0 = C).
    pub burst_warmup_request_count: u64,
    /// Multiplier for the automatic burst request count (≥ 1).
    pub burst_requests_per_concurrency: u64,
    /// Standalone cold-prefill profile over `prefill_contexts` before decode.
    pub standalone_prefill: bool,
    /// Seconds of sampling per standalone prefill context.
    pub prefill_duration: f64,
    /// Standalone prefill, then stop (no decode).
    pub prefill_only: bool,
    /// Open-loop rates, requests per second (`--request-rate`); non-empty
    /// replaces the sustained matrix by rate × context cells.
    pub request_rates: Vec<f64>,
    /// Arrival process of the open-loop cells (`--arrival`).
    pub arrival: ldb_core::arrivals::Arrival,
    /// Seed of the arrival schedules (`--seed`).
    pub seed: u64,
    /// Requests per open-loop cell (0 = rate × `duration`).
    pub rate_request_count: u64,
    /// Most requests in flight in an open-loop cell (0 = no cap).
    pub max_in_flight: u64,
    /// Open-loop cells: the least time past the last due time before the
    /// cell's limit (the limit is that or 3 × the schedule's span, whichever
    /// is longer). Not a flag; tests shorten it.
    pub open_loop_grace: f64,
    /// `--trace` or `--sessions`: a replay instead of the matrix
    /// (docs/workloads.md).
    pub replay: Option<crate::replay::ReplayConfig>,
    /// Stop raising the rate at a context after two saturated cells.
    pub stop_at_saturation: bool,
    /// Shared prefixes, cache granularity override and resets (`prefix.rs`).
    pub prefix_cache: crate::prefix::PrefixCacheSettings,
    /// `--repeat N`: each cell of the primary matrix is measured N times,
    /// pass after pass over the matrix (≥ 1).
    pub repeat: u32,
    /// `--slo` (with any `--slo-preset`), when the run itself acts on it:
    /// `--slo-search` and `--slo-bisect` judge cells as they finish.
    pub slo: Option<ldb_core::slo::SloSpec>,
    /// `--slo-search`: stop raising concurrency at a context after two
    /// consecutive levels failed the SLO.
    pub slo_search: bool,
    /// `--slo-bisect`: measure the levels between the last passing and the
    /// first failing concurrency of each context (bisection).
    pub slo_bisect: bool,
    /// Simulator scenario name when `--sim` was used.
    pub sim_scenario: String,
    /// Command-line arguments as given (redacted later) for diagnostics.
    pub argv: Vec<String>,
    /// The effective configuration, every flag by long name, secrets
    /// removed: recorded as `metadata.config` for `rerun` (empty: not known).
    pub effective_config: serde_json::Map<String, serde_json::Value>,
}

/// `--seed` when not given: fixed, so two runs send the same schedule.
pub const DEFAULT_SEED: u64 = 42;

/// `--metrics-interval` when not given, seconds. vLLM and SGLang render
/// `/metrics` in Python on the CPU that feeds their engine: on the CPU-bound
/// vLLM of docs/performance.md §3 each read cost it about 30 ms of decoding
/// (29 ± 28 ms at C = 1). One read every 10 s costs about 0.3 %, which with
/// the client's own CPU keeps the benchmark's whole cost under 1 % there; the
/// window's counters come from its own edge reads, so the slower pace only
/// thins the gauge samples (three in a 30 s window).
pub const DEFAULT_METRICS_INTERVAL: f64 = 10.0;

/// The bound of the warmup's waits when `--cell-warmup-timeout-seconds` is
/// not given (methodology §5): the JIT warmup request's wait for its first
/// token, and the hidden decode warmup cell's scout and ramp-up. Fixed,
/// since the automatic readiness limit comes from the prefill speed that
/// the warmup itself measures; long enough for a first request that
/// compiles kernels or captures graphs.
pub const WARMUP_LIMIT_S: f64 = 300.0;

impl RunConfig {
    /// The bound of every warmup wait: `--cell-warmup-timeout-seconds`
    /// when given, else [`WARMUP_LIMIT_S`].
    pub fn warmup_limit(&self) -> std::time::Duration {
        let s = if self.cell_warmup_timeout > 0.0 && self.cell_warmup_timeout.is_finite() {
            self.cell_warmup_timeout
        } else {
            WARMUP_LIMIT_S
        };
        std::time::Duration::from_secs_f64(s)
    }

    /// True for an open-loop run (`--request-rate`).
    pub fn open_loop(&self) -> bool {
        !self.request_rates.is_empty()
    }

    /// The idle limit of a decode stream, when on.
    pub fn idle_timeout(&self) -> Option<std::time::Duration> {
        (self.stream_idle_timeout.is_finite() && self.stream_idle_timeout > 0.0)
            .then(|| std::time::Duration::from_secs_f64(self.stream_idle_timeout))
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            base_url: "http://localhost:5000".into(),
            server_label: "localhost:5000".into(),
            api_key: None,
            model: None,
            concurrency: vec![1, 2, 4, 8, 16, 32, 64, 128],
            contexts: vec![0, 16384, 32768, 65536, 131072],
            max_tokens: 8192,
            duration: 30.0,
            auto_stop: None,
            decode_warmup_seconds: 3.0,
            cell_warmup_timeout: 0.0,
            prefill_contexts: vec![8192, 65536, 131072],
            prefill_metric: PrefillMetric::Client,
            skip_prefill: false,
            kv_budget: 0,
            max_total_tokens: 0,
            dcp_size: 0,
            temperature: None,
            respect_eos: false,
            max_error_rate: 0.02,
            wait_for_server: 0.0,
            output: PathBuf::from("benchmark_results.json"),
            show_capacity_limited_values: false,
            accept_len_ref: 0.0,
            calibration_context: 8192,
            calibration_cache: None,
            estimate_only: false,
            stream_idle_timeout: 60.0,
            server_down_grace: 30.0,
            ready_stable_seconds: 3.0,
            plateau_seconds: 5.0,
            cell_pause_seconds: 1.0,
            scrape_interval: 0.5,
            metrics_interval: DEFAULT_METRICS_INTERVAL,
            metrics_urls: Vec::new(),
            request_count: 0,
            warmup_request_count: 0,
            run_burst: false,
            burst_request_count: 0,
            burst_warmup_request_count: 0,
            burst_requests_per_concurrency: 5,
            standalone_prefill: false,
            prefill_duration: 10.0,
            prefill_only: false,
            request_rates: Vec::new(),
            arrival: ldb_core::arrivals::Arrival::Poisson,
            seed: DEFAULT_SEED,
            rate_request_count: 0,
            max_in_flight: 0,
            open_loop_grace: 120.0,
            replay: None,
            stop_at_saturation: false,
            prefix_cache: Default::default(),
            repeat: 1,
            slo: None,
            slo_search: false,
            slo_bisect: false,
            sim_scenario: String::new(),
            argv: Vec::new(),
            effective_config: serde_json::Map::new(),
        }
    }
}
