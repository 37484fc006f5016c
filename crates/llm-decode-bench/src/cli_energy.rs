//! The energy and cost flags (`--energy-baseline`, `--gpu-hour-price`,
//! `--gpu-count`): how a cell's GPU energy and time become joules and
//! dollars per token (docs/methodology.md §11, "Energy and cost").

use crate::config::{ConfigError, bad};
use clap::Args;
use ldb_core::energy_cost::{EnergyBaseline, RunEnergyCost};

/// Energy and cost flags.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Energy and cost (docs/methodology.md §11)")]
pub struct EnergyArgs {
    /// idle: subtract the idle GPU power (measured before the first request) from each cell's
    /// energy; none: board energy as measured (idle power still shown beside).
    #[arg(long, value_name = "idle|none", default_value = "none")]
    pub energy_baseline: String,
    /// Price of one GPU-hour in US dollars: adds $ per million output tokens to every cell,
    /// the SLO frontier and replays.
    #[arg(long, value_name = "USD", value_parser = crate::cli_float::number)]
    pub gpu_hour_price: Option<f64>,
    /// GPUs the price is paid for, where telemetry cannot see them [default: GPUs telemetry sees].
    #[arg(long, value_name = "N")]
    pub gpu_count: Option<u64>,
}

/// What clap gives when none of the flags is named (`BenchArgs::default()`
/// builds through here too).
impl Default for EnergyArgs {
    fn default() -> Self {
        EnergyArgs {
            energy_baseline: "none".into(),
            gpu_hour_price: None,
            gpu_count: None,
        }
    }
}

/// The run's energy settings (idle power is measured later, by the run).
pub fn settings(a: &EnergyArgs) -> Result<RunEnergyCost, ConfigError> {
    let baseline = EnergyBaseline::parse(&a.energy_baseline)
        .map_err(|_| bad("--energy-baseline", "must be idle or none"))?;
    if let Some(p) = a.gpu_hour_price.filter(|p| !(p.is_finite() && *p >= 0.0)) {
        return Err(bad(
            "--gpu-hour-price",
            format!("must be a finite price of 0 or more, not {p}"),
        ));
    }
    if a.gpu_count == Some(0) {
        return Err(bad("--gpu-count", "must be 1 or more"));
    }
    Ok(RunEnergyCost {
        energy_baseline: baseline,
        gpu_hour_price_usd: a.gpu_hour_price,
        gpu_count: a.gpu_count,
        gpu_count_source: if a.gpu_count.is_some() {
            "--gpu-count"
        } else {
            ""
        }
        .into(),
        ..RunEnergyCost::default()
    })
}
