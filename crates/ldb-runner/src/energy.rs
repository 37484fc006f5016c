//! The run's energy and cost settings with its idle power, measured here:
//! the mean GPU board power over the hardware samples taken from the start
//! of the run up to its first measured request (the server loaded, only
//! discovery and prompt sizing sent). docs/methodology.md §11.

use crate::ctx::RunCtx;
use ldb_core::energy_cost::RunEnergyCost;

/// The configured settings plus the idle power measured so far.
pub(crate) fn settings(rc: &RunCtx) -> RunEnergyCost {
    let mut run = rc.cfg.energy.clone();
    let idle = rc.hardware.as_ref().map(|h| h.summary_since(0));
    let (watts, basis) = match idle {
        None => (None, "hardware sampling is off".to_string()),
        Some(s) => match s.power_total_avg_w {
            Some(w) => (
                Some(w),
                format!(
                    "mean GPU board power of {} sample(s) over {:.1} s before the first measured request",
                    s.samples, s.duration_seconds
                ),
            ),
            None if s.samples == 0 => (
                None,
                "no hardware sample was taken before the first measured request".into(),
            ),
            None => (None, "the GPUs report no power reading".into()),
        },
    };
    run.idle_power_w = watts;
    run.idle_power_basis = basis;
    run
}
