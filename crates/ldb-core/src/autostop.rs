//! When a sustained cell's rate is known (`--duration auto`): the 95 %
//! interval of the window's aggregate rate by batch means, a stationarity
//! check on the same batches, and the rule that closes the window.
//!
//! Definitions and assumptions: `docs/methodology.md`, section "Cells that
//! stop when their number is known". In short:
//!
//! * The window so far is cut into sub-windows of equal length, one per
//!   second (never shorter), up to [`MAX_BATCHES`] ([`batches_for`]; past
//!   thirty seconds they lengthen); each batch's rate is its token
//!   count over its length, read from the cumulative count the driver
//!   samples every tick (linear between samples). The batch rates' mean is
//!   exactly the window's rate.
//! * A decode rate is autocorrelated (a stream's restart and prefill make a
//!   dip that lasts a while), so single samples are not independent. Means
//!   over long, non-overlapping batches nearly are; what correlation is left
//!   between neighbouring batches is taken into account by treating the
//!   batch means as AR(1): the variance of their mean is inflated by
//!   (1 + ρ)/(1 − ρ), ρ the lag-1 autocorrelation of the batch rates with
//!   its small-sample bias (1 + 3ρ)/k added back, clamped to 0 …
//!   [`MAX_LAG1`] (a negative ρ, which quantisation of the count at the
//!   batch edges gives, is not allowed to narrow the interval).
//! * Stationarity: the least-squares slope of the batch rates, per second,
//!   times the longest window the cell could run (its maximum), over the
//!   mean: how far the rate would move across the full window, relative. A window whose rate moved more than the target does
//!   not close, however narrow its interval (a drifting server — thermal
//!   throttling, a growing KV cache — runs on to the maximum). Judged over
//!   the window so far, a slow trend would pass at the minimum.
//! * The rule is checked at every tick and stops at the first pass; its
//!   coverage under that repeated look is checked by simulation
//!   (`autostop/sequential.rs`, docs/performance.md §5).
//!
//! Pure: the cell driver (`ldb-runner/src/cell.rs`) feeds it samples.

use serde::{Deserialize, Serialize};

use crate::student::t_quantile;

/// The fewest batches a window is judged on: with fewer there is no slope
/// and spread to judge. A window shorter than this many batch lengths has
/// no estimate and cannot close early.
pub const MIN_BATCHES: usize = 3;

/// A batch is never shorter than this, seconds (four ticks): the length
/// the lag-1 correction was checked down to. A window is cut into one
/// batch per this many seconds (5 batches at the 5 s minimum), up to
/// [`MAX_BATCHES`]; the interval then stops paying for few batches
/// (Student's t with 9 degrees of freedom is 15 % wider than with 29, and
/// few batches estimate the lag-1 correlation so coarsely that its clamp at
/// 0 widens a window of independent noise further).
pub const MIN_BATCH_S: f64 = 1.0;

/// The most batches a window is cut into.
pub const MAX_BATCHES: usize = 30;

/// What the drift is measured over (`metadata.duration_auto.drift_over`):
/// the longest window the cell could have run, not the window so far — a
/// slow trend looks small over 5 s and large over 30 s.
pub const DRIFT_OVER: &str = "max_duration";

/// Batches of a window `elapsed` seconds long: one per [`MIN_BATCH_S`], up
/// to [`MAX_BATCHES`] (fewer than [`MIN_BATCHES`] give no estimate).
pub fn batches_for(elapsed: f64) -> usize {
    if !(elapsed.is_finite() && elapsed > 0.0) {
        return 0;
    }
    // The tick's clock may read a hair under a whole second.
    (((elapsed + 1e-6) / MIN_BATCH_S).floor() as usize).min(MAX_BATCHES)
}

/// The largest lag-1 autocorrelation the interval corrects for; above it
/// the batches are too short for the window's correlation and the
/// correction itself is unreliable, so it is held here (the interval stays
/// wide, the window runs on).
pub const MAX_LAG1: f64 = 0.9;

/// The method's name, as the result records it (`rate_ci_method`).
pub const METHOD: &str = "batch_means";

/// What closes a window early.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoStop {
    /// Target half width of the 95 % interval, relative to the mean (0.01 = ±1 %).
    pub target_rel: f64,
    /// The window never closes on the interval before this, seconds.
    pub min_s: f64,
}

/// `metadata.duration_auto`: the rule a run's windows closed by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DurationAuto {
    /// `--target-ci`, percent.
    pub target_ci_pct: f64,
    /// `--min-duration`, seconds.
    pub min_duration: f64,
    /// How the interval is computed ([`METHOD`]).
    pub method: String,
    /// The fewest batches a window is judged on ([`MIN_BATCHES`]); 10 in
    /// files from before 7 Dec 2026, when a window up to ten seconds was
    /// cut into ten batches (shorter than a second at the minimum).
    pub batches: u32,
    /// One batch per this many seconds ([`MIN_BATCH_S`]); 0 in files from
    /// before longer windows got more batches.
    pub min_batch_s: f64,
    /// … up to this many ([`MAX_BATCHES`]; 0 in those files).
    pub max_batches: u32,
    /// What the drift is measured over ([`DRIFT_OVER`]); empty in files
    /// from before 7 Dec 2026, whose drift was over the window so far.
    pub drift_over: String,
}

impl DurationAuto {
    /// The metadata of `rule`.
    pub fn of(rule: &AutoStop) -> DurationAuto {
        DurationAuto {
            target_ci_pct: rule.target_rel * 100.0,
            min_duration: rule.min_s,
            method: METHOD.to_string(),
            batches: MIN_BATCHES as u32,
            min_batch_s: MIN_BATCH_S,
            max_batches: MAX_BATCHES as u32,
            drift_over: DRIFT_OVER.to_string(),
        }
    }
}

/// Why a window closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    /// The interval was within the target and the rate did not trend.
    Ci,
    /// The window reached its maximum (`--duration`).
    MaxDuration,
}

impl StoppedBy {
    /// The word in the result.
    pub fn as_str(self) -> &'static str {
        match self {
            StoppedBy::Ci => "ci",
            StoppedBy::MaxDuration => "max_duration",
        }
    }
}

/// The window's rate so far and how sure it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateEstimate {
    /// Mean of the batch rates = the window's rate, tokens per second.
    pub mean: f64,
    /// Half width of the 95 % interval, tokens per second.
    pub half_width: f64,
    /// Lag-1 autocorrelation of the batch rates (before clamping).
    pub lag1: f64,
    /// Change of the rate across the longest window the cell could run
    /// (slope per second × that length) over the mean; from [`estimate`]
    /// alone, across the batches given.
    pub drift_rel: f64,
    /// Half width of the 95 % interval of `drift_rel` (same scale).
    pub drift_half_width: f64,
    /// Number of batches.
    pub batches: usize,
}

impl RateEstimate {
    /// Half width over the mean.
    pub fn rel_half_width(&self) -> f64 {
        if self.mean > 0.0 {
            self.half_width / self.mean
        } else {
            f64::INFINITY
        }
    }

    /// Lower end of the interval.
    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }

    /// Upper end of the interval.
    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }

    /// Whether the interval and the stationarity check both meet
    /// `target_rel`: the drift within the target, and its interval inside
    /// [`DRIFT_BOUND`] × the target (the data rule out a larger trend).
    pub fn settled(&self, target_rel: f64) -> bool {
        self.mean > 0.0
            && self.rel_half_width() <= target_rel
            && self.drift_rel.abs() <= target_rel
            && self.drift_rel.abs() + self.drift_half_width <= DRIFT_BOUND * target_rel
    }
}

/// The drift's 95 % interval must lie within this many targets. A point
/// estimate of the drift within the target is not enough: over the few
/// batches of a short window the slope is so uncertain (scaled to the
/// maximum, six times the rate's own uncertainty at 5 s of 30) that a rule
/// looking every tick finds a small one by chance on a rate that trends.
pub const DRIFT_BOUND: f64 = 3.0;

/// Cumulative count at time `t` (seconds from the window's start) from
/// samples `(t, count)` sorted by time, linear between samples; before the
/// first sample the count rises from 0 at 0, after the last it stays.
fn count_at(samples: &[(f64, u64)], t: f64) -> f64 {
    // Binary search: the rule reads every edge at every tick, and the
    // sequential Monte Carlo (tests) does that thousands of times.
    let i = samples.partition_point(|s| s.0 < t);
    let prev = match i {
        0 => (0.0, 0.0),
        _ => (samples[i - 1].0, samples[i - 1].1 as f64),
    };
    let Some(&(st, c)) = samples.get(i) else {
        return prev.1;
    };
    let c = c as f64;
    let span = st - prev.0;
    if span <= 0.0 {
        return c;
    }
    prev.1 + (c - prev.1) * (t - prev.0) / span
}

/// The rates of `k` equal batches over `[0, elapsed]`, from cumulative
/// token counts sampled at times since the window's start.
pub fn batch_rates(samples: &[(f64, u64)], elapsed: f64, k: usize) -> Vec<f64> {
    if k == 0 || !(elapsed.is_finite() && elapsed > 0.0) {
        return Vec::new();
    }
    let len = elapsed / k as f64;
    let edges: Vec<f64> = (0..=k).map(|j| count_at(samples, len * j as f64)).collect();
    edges.windows(2).map(|w| (w[1] - w[0]) / len).collect()
}

/// The interval and the drift of batch rates; `None` for fewer than
/// [`MIN_BATCHES`] batches (no slope and spread to judge) or a mean that is not positive.
pub fn estimate(rates: &[f64]) -> Option<RateEstimate> {
    let k = rates.len();
    if k < MIN_BATCHES || rates.iter().any(|r| !r.is_finite()) {
        return None;
    }
    let n = k as f64;
    let mean = rates.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let ss: f64 = rates.iter().map(|r| (r - mean).powi(2)).sum();
    let lag1 = if ss > 0.0 {
        rates
            .windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / ss
    } else {
        0.0
    };
    // The lag-1 estimate of a short series with an estimated mean is biased
    // low by about (1 + 3ρ)/k (Kendall); add it back before inflating.
    let rho = (lag1 + (1.0 + 3.0 * lag1) / n).clamp(0.0, MAX_LAG1);
    let var_mean = ss / (n - 1.0) / n * (1.0 + rho) / (1.0 - rho);
    let half_width = t_quantile(0.975, n - 1.0) * var_mean.sqrt();
    let mid = (n - 1.0) / 2.0;
    let sxx: f64 = (0..k).map(|i| (i as f64 - mid).powi(2)).sum();
    let sxy: f64 = rates
        .iter()
        .enumerate()
        .map(|(i, r)| (i as f64 - mid) * (r - mean))
        .sum();
    let slope_per_batch = sxy / sxx;
    // The slope's standard error from the residuals about the line, with
    // the same AR(1) inflation as the mean (a trend also raises ρ: wider).
    let resid = (ss - sxy * sxy / sxx).max(0.0) / (n - 2.0);
    let slope_se = (resid / sxx * (1.0 + rho) / (1.0 - rho)).sqrt();
    Some(RateEstimate {
        mean,
        half_width,
        lag1,
        drift_rel: slope_per_batch * n / mean,
        drift_half_width: t_quantile(0.975, n - 2.0) * slope_se * n / mean,
        batches: k,
    })
}

/// The estimate of a window `elapsed` seconds long from its samples, its
/// drift scaled to `horizon_s`, the longest the window could run (its
/// maximum): a trend of 5 % per 30 s moves the rate 0.8 % over the first
/// 5 s, yet a window closed there sits 2 % from what the full window would
/// report, so the trend is judged over the length it would have had.
pub fn estimate_window(
    samples: &[(f64, u64)],
    elapsed: f64,
    horizon_s: f64,
) -> Option<RateEstimate> {
    let mut e = estimate(&batch_rates(samples, elapsed, batches_for(elapsed)))?;
    if horizon_s.is_finite() && horizon_s > elapsed {
        e.drift_rel *= horizon_s / elapsed;
        e.drift_half_width *= horizon_s / elapsed;
    }
    Some(e)
}

/// Whether the window closes now: at the maximum always, on the interval
/// only after the minimum and when the estimate is settled.
pub fn decide(
    rule: Option<&AutoStop>,
    elapsed: f64,
    max_s: f64,
    est: Option<&RateEstimate>,
) -> Option<StoppedBy> {
    if elapsed >= max_s {
        return Some(StoppedBy::MaxDuration);
    }
    let rule = rule?;
    let est = est?;
    (elapsed >= rule.min_s && est.settled(rule.target_rel)).then_some(StoppedBy::Ci)
}

#[cfg(test)]
#[path = "autostop/tests.rs"]
mod tests;

#[cfg(test)]
#[path = "autostop/sequential.rs"]
mod sequential;
