//! Window means of server gauges read by a few scrapes.
//!
//! With `--metrics-interval 10` a window of 8–30 s holds two to four reads
//! of `/metrics`. An unweighted mean of them gives the start scrape (taken
//! while the KV cache still fills) as much say as a read that stands for
//! ten seconds, and leaves out the end scrape. Here every reading stands
//! for the part of the window closer to it than to any other reading (a
//! step function through the readings), the end scrape included: it is sent
//! at the window's end while the streams still run. The record of what a
//! mean rests on ([`GaugeBasis`]) goes into the cell: how many readings and
//! the longest stretch of the window a single reading had to stand for, and
//! the confirming read taken when one reading alone saw a queue.

use serde::{Deserialize, Serialize};

/// What a cell's gauge means (`server_utilization`, the running and queued
/// means behind the capacity verdict) rest on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GaugeBasis {
    /// `time_weighted_scrapes`: each reading weighted by the share of the
    /// window it stands for.
    pub method: String,
    /// Readings inside the window (start scrape, periodic ones, end scrape).
    pub scrapes: u64,
    /// The longest part of the window one reading stood for, seconds.
    pub max_gap_s: f64,
    /// Readings that saw a non-empty queue.
    pub queue_scrapes: u64,
    /// Extra `/metrics` reads sent after the end scrape, while the streams
    /// still ran, because exactly one reading saw a queue and the verdict
    /// would rest on it (0 or 1). They enter no mean.
    pub confirm_scrapes: u64,
    /// Of those, the ones that saw a queue too: only then does the lone
    /// reading's queue count towards the capacity verdict.
    pub confirm_queue_scrapes: u64,
}

/// Method name of [`GaugeBasis::method`].
pub const TIME_WEIGHTED: &str = "time_weighted_scrapes";

/// Weight of each reading time in `[start, end]`: the length of the window
/// closer to it than to the neighbouring readings (in time order; times
/// outside the window are clipped to it). The weights sum to `end − start`.
pub fn reading_weights(times: &[f64], start: f64, end: f64) -> Vec<f64> {
    let span = (end - start).max(0.0);
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
    let at = |k: usize| times[order[k]].clamp(start, end);
    let mut w = vec![0.0; times.len()];
    for k in 0..order.len() {
        let lo = if k == 0 {
            start
        } else {
            (at(k - 1) + at(k)) / 2.0
        };
        let hi = if k + 1 == order.len() {
            end
        } else {
            (at(k) + at(k + 1)) / 2.0
        };
        w[order[k]] = (hi - lo).max(0.0);
    }
    if span == 0.0 && !w.is_empty() {
        w.iter_mut().for_each(|x| *x = 1.0);
    }
    w
}

/// The longest stretch of the window a reading stands for (0 without any).
pub fn max_weight(weights: &[f64]) -> f64 {
    weights.iter().copied().fold(0.0, f64::max)
}

/// Σ wᵢvᵢ / Σ wᵢ; 0 when the weights sum to nothing.
pub fn weighted_mean(values: &[f64], weights: &[f64]) -> f64 {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    values.iter().zip(weights).map(|(v, w)| v * w).sum::<f64>() / total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reading_stands_for_the_window_nearest_to_it() {
        // Window 0–30 s, reads at 0, 10 and 30 (the end scrape).
        let w = reading_weights(&[0.0, 10.0, 30.0], 0.0, 30.0);
        assert_eq!(w, vec![5.0, 15.0, 10.0]);
        // Order does not matter; reads past the window are clipped to it.
        let w = reading_weights(&[30.4, 0.2, 10.0], 0.0, 30.0);
        assert!((w.iter().sum::<f64>() - 30.0).abs() < 1e-9);
        assert!((w[0] - 10.0).abs() < 1e-9 && (w[1] - 5.1).abs() < 1e-9);
        assert_eq!(max_weight(&[5.0, 15.0, 10.0]), 15.0);
        assert!(reading_weights(&[], 0.0, 1.0).is_empty());
    }

    /// Issue 24 item 8: KV usage climbs from 0.2 at the window's start to 0.8
    /// and stays there; the unweighted mean of the start scrape and one
    /// periodic read at 10 s, without the end scrape, said 0.5.
    #[test]
    fn a_filling_cache_is_weighted_by_time_not_by_reads() {
        let (t, v) = ([0.0, 10.0, 30.0], [0.2, 0.8, 0.8]);
        let w = reading_weights(&t, 0.0, 30.0);
        let m = weighted_mean(&v, &w);
        assert!((m - (0.2 * 5.0 + 0.8 * 25.0) / 30.0).abs() < 1e-9, "{m}");
        assert_eq!(weighted_mean(&[1.0], &[0.0]), 0.0);
    }
}
