//! Error type of the telemetry crate. Errors never leave the sampler thread
//! as panics: they become warnings and "unknown" values.

use thiserror::Error;

/// Why a telemetry source could not be used.
#[derive(Debug, Error)]
pub enum TelemetryError {
    /// NVML could not be loaded or initialized (no driver, no library).
    #[error("NVML unavailable: {0}")]
    Nvml(String),
    /// A command could not be started (not installed, not executable).
    #[error("{program} could not be started: {reason}")]
    Spawn {
        /// Program that was run.
        program: String,
        /// OS error text.
        reason: String,
    },
    /// A command ran past its time limit and was killed.
    #[error("{program} timed out after {seconds:.1} s")]
    Timeout {
        /// Program that was run.
        program: String,
        /// Limit that was exceeded.
        seconds: f64,
    },
    /// A command exited with a non-zero status.
    #[error("{program} exited with status {code}: {detail}")]
    Failed {
        /// Program that was run.
        program: String,
        /// Exit status (−1 when killed by a signal).
        code: i32,
        /// First line of stderr (or stdout).
        detail: String,
    },
    /// Output was readable but contained no usable GPU rows.
    #[error("no usable GPU rows: {0}")]
    NoGpus(String),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, TelemetryError>;
