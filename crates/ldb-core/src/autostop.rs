//! When a sustained cell's rate is known (`--duration auto`): the 95 %
//! interval of the window's aggregate rate by batch means, a stationarity
//! check on the same batches, and the rule that closes the window.
//!
//! Definitions and assumptions: `docs/methodology.md`, section "Cells that
//! stop when their number is known". In short:
//!
//! * The window so far is cut into [`BATCHES`] sub-windows of equal length
//!   (they lengthen as the window grows; past ten seconds one per second, up
//!   to [`MAX_BATCHES`]: [`batches_for`]); each batch's rate is its token
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
//! * Stationarity: the least-squares slope of the batch rates, times the
//!   window's length, over the mean: how far the rate moved across the
//!   window, relative. A window whose rate moved more than the target does
//!   not close, however narrow its interval (a drifting server — thermal
//!   throttling, a growing KV cache — runs on to the maximum).
//!
//! Pure: the cell driver (`ldb-runner/src/cell.rs`) feeds it samples.

use serde::{Deserialize, Serialize};

use crate::student::t_quantile;

/// Batches a window of up to ten seconds is cut into (10–30 is the usual
/// advice for batch means; 10 keeps each batch long — half a second at a
/// 5 s minimum).
pub const BATCHES: usize = 10;

/// Longer windows get one batch per this many seconds, up to
/// [`MAX_BATCHES`]: a batch never gets shorter than one second (four
/// ticks), the length the lag-1 correction was checked down to, while the
/// interval stops paying for few batches (Student's t with 9 degrees of
/// freedom is 15 % wider than with 29, and ten batches estimate the lag-1
/// correlation so coarsely that its clamp at 0 widens a window of
/// independent noise by another 10 % on average).
pub const MIN_BATCH_S: f64 = 1.0;

/// The most batches a window is cut into.
pub const MAX_BATCHES: usize = 30;

/// Batches of a window `elapsed` seconds long: [`BATCHES`] up to ten
/// seconds, then one per [`MIN_BATCH_S`] up to [`MAX_BATCHES`].
pub fn batches_for(elapsed: f64) -> usize {
    if !(elapsed.is_finite() && elapsed > 0.0) {
        return BATCHES;
    }
    ((elapsed / MIN_BATCH_S).floor() as usize).clamp(BATCHES, MAX_BATCHES)
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
    /// Batches of a window up to ten seconds ([`BATCHES`]).
    pub batches: u32,
    /// Longer windows: one batch per this many seconds ([`MIN_BATCH_S`]);
    /// 0 in files from before longer windows got more batches.
    pub min_batch_s: f64,
    /// … up to this many ([`MAX_BATCHES`]; 0 in those files).
    pub max_batches: u32,
}

impl DurationAuto {
    /// The metadata of `rule`.
    pub fn of(rule: &AutoStop) -> DurationAuto {
        DurationAuto {
            target_ci_pct: rule.target_rel * 100.0,
            min_duration: rule.min_s,
            method: METHOD.to_string(),
            batches: BATCHES as u32,
            min_batch_s: MIN_BATCH_S,
            max_batches: MAX_BATCHES as u32,
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
    /// Change of the rate across the window (slope × length) over the mean.
    pub drift_rel: f64,
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

    /// Whether the interval and the stationarity check both meet `target_rel`.
    pub fn settled(&self, target_rel: f64) -> bool {
        self.mean > 0.0 && self.rel_half_width() <= target_rel && self.drift_rel.abs() <= target_rel
    }
}

/// Cumulative count at time `t` (seconds from the window's start) from
/// samples `(t, count)` sorted by time, linear between samples; before the
/// first sample the count rises from 0 at 0, after the last it stays.
fn count_at(samples: &[(f64, u64)], t: f64) -> f64 {
    let mut prev = (0.0, 0.0);
    for &(st, c) in samples {
        let c = c as f64;
        if st >= t {
            let span = st - prev.0;
            if span <= 0.0 {
                return c;
            }
            return prev.1 + (c - prev.1) * (t - prev.0) / span;
        }
        prev = (st, c);
    }
    prev.1
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

/// The interval and the drift of batch rates; `None` for fewer than 3
/// batches (no slope and spread to judge) or a mean that is not positive.
pub fn estimate(rates: &[f64]) -> Option<RateEstimate> {
    let k = rates.len();
    if k < 3 || rates.iter().any(|r| !r.is_finite()) {
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
    Some(RateEstimate {
        mean,
        half_width,
        lag1,
        drift_rel: slope_per_batch * n / mean,
        batches: k,
    })
}

/// The estimate of a window `elapsed` seconds long from its samples.
pub fn estimate_window(samples: &[(f64, u64)], elapsed: f64) -> Option<RateEstimate> {
    estimate(&batch_rates(samples, elapsed, batches_for(elapsed)))
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
