//! The metrics a comparison looks at, which way is better for each, and the
//! change of one metric between two runs.

use ldb_core::result::CellResult;

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Throughputs: more is better.
    HigherIsBetter,
    /// Latencies: less is better.
    LowerIsBetter,
}

impl Direction {
    /// `higher` or `lower` (the JSON word).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HigherIsBetter => "higher",
            Direction::LowerIsBetter => "lower",
        }
    }
}

/// A per-cell metric of a decode or burst cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellMetric {
    /// `aggregate_tps`, tok/s.
    AggregateTps,
    /// `per_request_avg_tps` (per-user tok/s), tok/s.
    PerUserTps,
    /// `ttft_p50`, seconds.
    TtftP50,
    /// `ttft_p99`, seconds.
    TtftP99,
    /// `ttfo_p50`, seconds (time to the first answer token).
    TtfoP50,
    /// `ttfo_p99`, seconds.
    TtfoP99,
    /// `token_gap_p99`, seconds.
    TokenGapP99,
}

impl CellMetric {
    /// Every cell metric, in table order.
    pub const ALL: [CellMetric; 7] = [
        CellMetric::AggregateTps,
        CellMetric::PerUserTps,
        CellMetric::TtftP50,
        CellMetric::TtftP99,
        CellMetric::TtfoP50,
        CellMetric::TtfoP99,
        CellMetric::TokenGapP99,
    ];

    /// The result file's key of the metric (also the key in `compare --format json`).
    pub fn key(self) -> &'static str {
        match self {
            CellMetric::AggregateTps => "aggregate_tps",
            CellMetric::PerUserTps => "per_request_avg_tps",
            CellMetric::TtftP50 => "ttft_p50",
            CellMetric::TtftP99 => "ttft_p99",
            CellMetric::TtfoP50 => "ttfo_p50",
            CellMetric::TtfoP99 => "ttfo_p99",
            CellMetric::TokenGapP99 => "token_gap_p99",
        }
    }

    /// Short column title of the text and Markdown tables.
    pub fn label(self) -> &'static str {
        match self {
            CellMetric::AggregateTps => "agg tok/s",
            CellMetric::PerUserTps => "per-user tok/s",
            CellMetric::TtftP50 => "TTFT p50",
            CellMetric::TtftP99 => "TTFT p99",
            CellMetric::TtfoP50 => "TTFO p50",
            CellMetric::TtfoP99 => "TTFO p99",
            CellMetric::TokenGapP99 => "gap p99",
        }
    }

    /// Which way is better.
    pub fn direction(self) -> Direction {
        match self {
            CellMetric::AggregateTps | CellMetric::PerUserTps => Direction::HigherIsBetter,
            _ => Direction::LowerIsBetter,
        }
    }

    /// The metric's value in a cell; `None` when the cell does not report it.
    pub fn value(self, c: &CellResult) -> Option<f64> {
        let l = &c.latency;
        let v = match self {
            CellMetric::AggregateTps => c.aggregate_tps,
            CellMetric::PerUserTps => c.per_request_avg_tps,
            CellMetric::TtftP50 => l.ttft.map(|d| d.p50),
            CellMetric::TtftP99 => l.ttft.map(|d| d.p99),
            CellMetric::TtfoP50 => l.ttfo.map(|d| d.p50),
            CellMetric::TtfoP99 => l.ttfo.map(|d| d.p99),
            CellMetric::TokenGapP99 => c.ext.token_gap_p99,
        };
        v.filter(|x| x.is_finite())
    }
}

/// One run's value of a metric, with room for the spread of repeated
/// measurements.
///
/// Runs carry one measurement per cell today, so `repeats` is always `None`
/// and no change is tested for significance. When a cell carries repeats,
/// `value` is their mean and `repeats` their summary; a significance test
/// (Welch's t-test on the two summaries) then needs nothing more than this.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The measured value (the mean of the repeats when there are some).
    pub value: f64,
    /// Summary of the repeats, when the cell was measured more than once.
    pub repeats: Option<RepeatSummary>,
}

impl Estimate {
    /// A single measurement.
    pub fn single(value: f64) -> Estimate {
        Estimate {
            value,
            repeats: None,
        }
    }
}

/// Mean, sample standard deviation and count of a cell's repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatSummary {
    /// Number of repeats (at least 2 for a spread).
    pub n: u32,
    /// Sample standard deviation (n − 1 in the denominator).
    pub std_dev: f64,
}

/// Whether a change is statistically significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Significance {
    /// Not tested: at least one side is a single measurement, so a change of
    /// any size may be run-to-run noise.
    NotTestedSingleRun,
}

impl Significance {
    /// Judges two estimates. Every run is a single measurement per cell
    /// today, so nothing is tested yet; once cells carry repeats on both
    /// sides, this is where Welch's t-test over their summaries decides.
    pub fn assess(_base: &Estimate, _new: &Estimate) -> Significance {
        Significance::NotTestedSingleRun
    }

    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Significance::NotTestedSingleRun => "not_tested_single_run",
        }
    }
}

/// How one metric changed, judged against the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Worse by more than the threshold.
    Regression,
    /// Better by more than the threshold.
    Improvement,
    /// Within the threshold either way.
    Unchanged,
    /// A value is missing on one side (or the base is 0): no percentage.
    NotComparable,
}

impl Verdict {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::Unchanged => "unchanged",
            Verdict::NotComparable => "not_comparable",
        }
    }
}

/// The change of one metric from the base run to the new run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// Base value.
    pub base: Option<Estimate>,
    /// New value.
    pub new: Option<Estimate>,
    /// (new − base) / base × 100; `None` without both values or with a base
    /// of 0 (0 when both are 0).
    pub change_pct: Option<f64>,
    /// Which way is better.
    pub direction: Direction,
    /// Judged against the threshold.
    pub verdict: Verdict,
    /// Whether the change is significant.
    pub significance: Significance,
}

impl Change {
    /// Compares two values of a metric with the given direction: a change is
    /// a regression or an improvement only when it is *beyond* the threshold
    /// (strictly more than `threshold_pct` percent of the base).
    pub fn between(
        base: Option<Estimate>,
        new: Option<Estimate>,
        direction: Direction,
        threshold_pct: f64,
    ) -> Change {
        let change_pct = match (base, new) {
            (Some(b), Some(n)) if b.value == n.value => Some(0.0),
            (Some(b), Some(n)) if b.value != 0.0 => {
                Some((n.value - b.value) / b.value.abs() * 100.0)
            }
            _ => None,
        };
        let verdict = match change_pct {
            None => Verdict::NotComparable,
            Some(p) => {
                // Positive `gain` means better, whatever the direction.
                let gain = match direction {
                    Direction::HigherIsBetter => p,
                    Direction::LowerIsBetter => -p,
                };
                if gain < -threshold_pct {
                    Verdict::Regression
                } else if gain > threshold_pct {
                    Verdict::Improvement
                } else {
                    Verdict::Unchanged
                }
            }
        };
        let significance = match (&base, &new) {
            (Some(b), Some(n)) => Significance::assess(b, n),
            _ => Significance::NotTestedSingleRun,
        };
        Change {
            base,
            new,
            change_pct,
            direction,
            verdict,
            significance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(b: f64, n: f64, d: Direction) -> Change {
        Change::between(Some(Estimate::single(b)), Some(Estimate::single(n)), d, 5.0)
    }

    #[test]
    fn the_direction_decides_which_way_is_a_regression() {
        let slower = change(100.0, 80.0, Direction::HigherIsBetter);
        assert_eq!(slower.change_pct, Some(-20.0));
        assert_eq!(slower.verdict, Verdict::Regression);
        let quicker_ttft = change(0.100, 0.080, Direction::LowerIsBetter);
        assert!((quicker_ttft.change_pct.unwrap_or(0.0) + 20.0).abs() < 1e-9);
        assert_eq!(quicker_ttft.verdict, Verdict::Improvement);
        assert_eq!(
            change(0.1, 0.2, Direction::LowerIsBetter).verdict,
            Verdict::Regression
        );
    }

    #[test]
    fn the_threshold_is_exclusive() {
        assert_eq!(
            change(100.0, 95.0, Direction::HigherIsBetter).verdict,
            Verdict::Unchanged
        );
        assert_eq!(
            change(100.0, 94.9, Direction::HigherIsBetter).verdict,
            Verdict::Regression
        );
        assert_eq!(
            change(100.0, 105.1, Direction::HigherIsBetter).verdict,
            Verdict::Improvement
        );
    }

    #[test]
    fn missing_values_and_a_zero_base_have_no_percentage() {
        let c = Change::between(
            Some(Estimate::single(1.0)),
            None,
            Direction::HigherIsBetter,
            5.0,
        );
        assert_eq!((c.change_pct, c.verdict), (None, Verdict::NotComparable));
        let z = change(0.0, 3.0, Direction::LowerIsBetter);
        assert_eq!((z.change_pct, z.verdict), (None, Verdict::NotComparable));
        assert_eq!(
            change(0.0, 0.0, Direction::LowerIsBetter).change_pct,
            Some(0.0)
        );
    }

    #[test]
    fn single_runs_are_never_tested_for_significance() {
        let c = change(100.0, 50.0, Direction::HigherIsBetter);
        assert_eq!(c.significance, Significance::NotTestedSingleRun);
    }
}
