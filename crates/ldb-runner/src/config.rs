//! The validated configuration of one run (built by the binary from its
//! flags), in the parts each phase reads: one small file per part under
//! `config/`. Built once; nothing changes it after (docs/architecture.md).

mod burst;
mod kv;
mod matrix;
mod open_loop;
mod output;
mod prefill;
mod slo;
mod target;
mod timing;

pub use burst::BurstConfig;
pub use kv::KvConfig;
pub use matrix::MatrixConfig;
pub use open_loop::{DEFAULT_SEED, OpenLoopConfig, SESSION_LIMIT_S};
pub use output::OutputConfig;
pub use prefill::{PrefillConfig, PrefillMetric};
pub use slo::SloConfig;
pub use target::TargetConfig;
pub use timing::{DEFAULT_METRICS_INTERVAL, TimingConfig, WARMUP_LIMIT_S};

/// Everything a run needs, validated, grouped by the phase that reads it.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    /// The server: URL, label, key, model, metrics endpoints.
    pub target: TargetConfig,
    /// The closed-loop decode matrix and its requests.
    pub matrix: MatrixConfig,
    /// Prefill rows, the standalone profile and prompt sizing.
    pub prefill: PrefillConfig,
    /// KV budget overrides.
    pub kv: KvConfig,
    /// The Burst / E2E matrix.
    pub burst: BurstConfig,
    /// Open-loop (request-rate) cells.
    pub open_loop: OpenLoopConfig,
    /// The SLO the run acts on.
    pub slo: SloConfig,
    /// Readiness, timeouts, pacing, error budget.
    pub timing: TimingConfig,
    /// Result file and the run's own record.
    pub output: OutputConfig,
    /// `--trace` or `--sessions`: a replay instead of the matrix
    /// (docs/workloads.md).
    pub replay: Option<crate::replay::ReplayConfig>,
    /// Shared prefixes, cache granularity override and resets (`prefix.rs`).
    pub prefix_cache: crate::prefix::PrefixCacheSettings,
    /// `--energy-baseline`, `--gpu-hour-price`, `--gpu-count` (the idle
    /// power is measured by the run; `energy.rs`).
    pub energy: ldb_core::energy_cost::RunEnergyCost,
}
