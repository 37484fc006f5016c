//! The metrics a comparison looks at, which way is better for each, and the
//! change of one metric between two runs.

use ldb_core::result::CellResult;
use ldb_core::student::{MeanCi, welch};

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

/// One run's value of a metric, with the spread of repeated measurements
/// when the cell carries them (`--repeat N`).
///
/// With repeats, `value` is their mean and `repeats` their summary, and a
/// change between two such estimates is tested with Welch's t-test.
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

    /// The estimate of `key` in a cell: the mean and spread of its repeats
    /// when it has two or more with a value, else the cell's own value.
    pub fn of_cell(c: &CellResult, key: &str, value: Option<f64>) -> Option<Estimate> {
        match c.ext.repeat_stats.get(key) {
            Some(m) if m.n >= 2 => Some(Estimate {
                value: m.mean,
                repeats: m.std_dev.map(|std_dev| RepeatSummary { n: m.n, std_dev }),
            }),
            _ => value.map(Estimate::single),
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

/// Significance level of the test: a change is significant when the
/// two-sided p-value is below it.
pub const ALPHA: f64 = 0.05;

/// Whether a change is statistically significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Significance {
    /// Not tested: at least one side is a single measurement, so a change of
    /// any size may be run-to-run noise.
    NotTestedSingleRun,
    /// Both sides carry repeats and Welch's t-test gives p < 0.05.
    Significant,
    /// Both sides carry repeats and Welch's t-test gives p ≥ 0.05: the
    /// change may be run-to-run noise.
    NotSignificant,
}

impl Significance {
    /// Judges two estimates.
    pub fn assess(base: &Estimate, new: &Estimate) -> Significance {
        Self::test(base, new).0
    }

    /// Welch's t-test (two-sided) when both sides carry repeats: the
    /// verdict and the p-value. Two sides without any spread have no t;
    /// equal means are then not significant (p = 1), different ones are
    /// (p = 0).
    pub fn test(base: &Estimate, new: &Estimate) -> (Significance, Option<f64>) {
        let (Some(b), Some(n)) = (base.repeats, new.repeats) else {
            return (Significance::NotTestedSingleRun, None);
        };
        let side = |e: &Estimate, r: RepeatSummary| MeanCi {
            n: r.n,
            mean: e.value,
            std_dev: Some(r.std_dev),
            ci95: None,
        };
        let p = match welch(&side(base, b), &side(new, n)) {
            Some(w) => w.p_value,
            None if b.n < 2 || n.n < 2 => return (Significance::NotTestedSingleRun, None),
            None if base.value == new.value => 1.0,
            None => 0.0,
        };
        let s = if p < ALPHA {
            Significance::Significant
        } else {
            Significance::NotSignificant
        };
        (s, Some(p))
    }

    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Significance::NotTestedSingleRun => "not_tested_single_run",
            Significance::Significant => "significant",
            Significance::NotSignificant => "not_significant",
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
    /// The two-sided p-value of Welch's t-test, when both sides carry repeats.
    pub p_value: Option<f64>,
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
        let (significance, p_value) = match (&base, &new) {
            (Some(b), Some(n)) => Significance::test(b, n),
            _ => (Significance::NotTestedSingleRun, None),
        };
        Change {
            base,
            new,
            change_pct,
            direction,
            verdict,
            significance,
            p_value,
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

    fn repeated(values: &[f64]) -> Estimate {
        let m = MeanCi::of(values).unwrap();
        Estimate {
            value: m.mean,
            repeats: Some(RepeatSummary {
                n: m.n,
                std_dev: m.std_dev.unwrap(),
            }),
        }
    }

    #[test]
    fn repeats_on_both_sides_are_tested_with_welch() {
        // Independent check (python3, the t density integrated numerically,
        // see docs/methodology.md): t = -4.4996604, df = 3.3534671,
        // p = 0.0161005.
        let base = repeated(&[100.0, 102.0, 98.0, 101.0]);
        let new = repeated(&[90.0, 95.0, 93.0]);
        let c = Change::between(Some(base), Some(new), Direction::HigherIsBetter, 5.0);
        assert_eq!(c.significance, Significance::Significant);
        assert!((c.p_value.unwrap() - 0.016_100_5).abs() < 1e-6, "{c:?}");
        assert_eq!(c.verdict, Verdict::Regression);
        // Beyond the threshold but within the noise: not significant.
        let noisy = repeated(&[80.0, 120.0, 100.0]);
        let wide = repeated(&[70.0, 130.0, 90.0]);
        let c = Change::between(Some(noisy), Some(wide), Direction::HigherIsBetter, 5.0);
        assert_eq!(c.significance, Significance::NotSignificant);
        assert!(c.p_value.unwrap() > 0.5);
        // One side single: not tested, no p-value.
        let c = Change::between(
            Some(base),
            Some(Estimate::single(90.0)),
            Direction::HigherIsBetter,
            5.0,
        );
        assert_eq!(
            (c.significance, c.p_value),
            (Significance::NotTestedSingleRun, None)
        );
    }

    #[test]
    fn single_runs_are_never_tested_for_significance() {
        let c = change(100.0, 50.0, Direction::HigherIsBetter);
        assert_eq!(c.significance, Significance::NotTestedSingleRun);
    }
}
