//! Readiness, timeouts, pacing and the error budget shared by every phase.

use std::time::Duration;

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

/// How long phases wait, how often they read `/metrics`, and how many
/// failures a cell tolerates (read by every phase).
#[derive(Debug, Clone)]
pub struct TimingConfig {
    /// Readiness limit override, seconds (0 = automatic).
    pub cell_warmup_timeout: f64,
    /// Largest share of failed requests that leaves a cell valid (`--max-error-rate`).
    pub max_error_rate: f64,
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
}

impl TimingConfig {
    /// The bound of every warmup wait: `--cell-warmup-timeout-seconds`
    /// when given, else [`WARMUP_LIMIT_S`].
    pub fn warmup_limit(&self) -> Duration {
        let s = if self.cell_warmup_timeout > 0.0 && self.cell_warmup_timeout.is_finite() {
            self.cell_warmup_timeout
        } else {
            WARMUP_LIMIT_S
        };
        Duration::from_secs_f64(s)
    }

    /// The idle limit of a decode stream, when on.
    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.stream_idle_timeout.is_finite() && self.stream_idle_timeout > 0.0)
            .then(|| Duration::from_secs_f64(self.stream_idle_timeout))
    }
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            cell_warmup_timeout: 0.0,
            max_error_rate: 0.02,
            stream_idle_timeout: 60.0,
            server_down_grace: 30.0,
            ready_stable_seconds: 3.0,
            plateau_seconds: 5.0,
            cell_pause_seconds: 1.0,
            scrape_interval: 0.5,
            metrics_interval: DEFAULT_METRICS_INTERVAL,
        }
    }
}
