//! Open-loop rate cells (`rate_results`) of two runs, matched by context and
//! offered request rate and compared metric by metric, with the same
//! threshold and verdict rules as the decode cells.

use std::collections::BTreeMap;

use ldb_core::document::ResultDocument;
use ldb_core::open_loop::RateResult;
use ldb_core::result::CellStatus;

use super::cells::Outcome;
use super::metric::{Change, Direction, Estimate, Verdict};

/// A metric of a rate cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateMetric {
    /// `output_tps`: output tokens per second of the cell.
    OutputTps,
    /// `achieved_rate`: completed requests per second (first send → last
    /// completion).
    AchievedRate,
    /// `ttft_p50`, from the scheduled send time.
    TtftP50,
    /// `ttft_p99`.
    TtftP99,
    /// `e2e_p99`, from the scheduled send time.
    E2eP99,
    /// `token_gap_p99`.
    TokenGapP99,
}

impl RateMetric {
    /// Every rate metric, in table order.
    pub const ALL: [RateMetric; 6] = [
        RateMetric::OutputTps,
        RateMetric::AchievedRate,
        RateMetric::TtftP50,
        RateMetric::TtftP99,
        RateMetric::E2eP99,
        RateMetric::TokenGapP99,
    ];

    /// The result file's key (also the key in `compare --format json`).
    pub fn key(self) -> &'static str {
        match self {
            RateMetric::OutputTps => "output_tps",
            RateMetric::AchievedRate => "achieved_rate",
            RateMetric::TtftP50 => "ttft_p50",
            RateMetric::TtftP99 => "ttft_p99",
            RateMetric::E2eP99 => "e2e_p99",
            RateMetric::TokenGapP99 => "token_gap_p99",
        }
    }

    /// Column heading.
    pub fn label(self) -> &'static str {
        match self {
            RateMetric::OutputTps => "out tok/s",
            RateMetric::AchievedRate => "achieved req/s",
            RateMetric::TtftP50 => "TTFT p50",
            RateMetric::TtftP99 => "TTFT p99",
            RateMetric::E2eP99 => "e2e p99",
            RateMetric::TokenGapP99 => "gap p99",
        }
    }

    /// Which way is better.
    pub fn direction(self) -> Direction {
        match self {
            RateMetric::OutputTps | RateMetric::AchievedRate => Direction::HigherIsBetter,
            _ => Direction::LowerIsBetter,
        }
    }

    fn value(self, r: &RateResult) -> Option<f64> {
        let v = match self {
            RateMetric::OutputTps => Some(r.output_tps),
            // `None` for a file before schema 2: its `achieved_rate` was
            // the send rate and reads as `offered_rate_measured`.
            RateMetric::AchievedRate => r.achieved_rate,
            RateMetric::TtftP50 => r.ttft_p50,
            RateMetric::TtftP99 => r.ttft_p99,
            RateMetric::E2eP99 => r.e2e_p99,
            RateMetric::TokenGapP99 => r.token_gap_p99,
        };
        v.filter(|v| v.is_finite())
    }
}

/// One rate × context cell, in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RateComparison {
    /// Context in tokens.
    pub context_tokens: u64,
    /// Offered request rate, requests per second.
    pub request_rate: f64,
    /// The base cell's status (`None`: absent) and whether it saturated.
    pub base_status: Option<(CellStatus, bool)>,
    /// The same for the new cell.
    pub new_status: Option<(CellStatus, bool)>,
    /// How the pair compares as a whole.
    pub outcome: Outcome,
    /// One change per [`RateMetric::ALL`].
    pub changes: Vec<(RateMetric, Change)>,
    /// Regression if a metric regressed, the cell became invalid, or it
    /// saturated where the base did not; improvement for the opposite.
    pub verdict: Verdict,
}

fn valid(r: &RateResult) -> bool {
    matches!(r.status, CellStatus::Ok | CellStatus::CapacityLimited)
}

/// Sort key of a rate: rates are positive, so the bit pattern orders them.
fn keyed(doc: &ResultDocument) -> BTreeMap<(u64, u64), &RateResult> {
    doc.rate_results
        .iter()
        .map(|r| ((r.context_tokens, r.request_rate.to_bits()), r))
        .collect()
}

/// Every rate cell of either run, by context, then rate.
pub fn compare_rates(
    base: &ResultDocument,
    new: &ResultDocument,
    threshold_pct: f64,
) -> Vec<RateComparison> {
    let (b, n) = (keyed(base), keyed(new));
    let mut keys: Vec<(u64, u64)> = b.keys().chain(n.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|key| {
            let (br, nr) = (b.get(&key).copied(), n.get(&key).copied());
            let outcome = Outcome::of(br.map(valid), nr.map(valid));
            let changes: Vec<(RateMetric, Change)> = RateMetric::ALL
                .iter()
                .map(|&m| {
                    let value = |r: Option<&RateResult>| {
                        r.filter(|_| outcome == Outcome::Compared)
                            .and_then(|r| m.value(r))
                            .map(Estimate::single)
                    };
                    (
                        m,
                        Change::between(value(br), value(nr), m.direction(), threshold_pct),
                    )
                })
                .collect();
            let saturated = |r: Option<&RateResult>| r.is_some_and(|r| r.saturated);
            let verdict = verdict(outcome, &changes, saturated(br), saturated(nr));
            RateComparison {
                context_tokens: key.0,
                request_rate: f64::from_bits(key.1),
                base_status: br.map(|r| (r.status, r.saturated)),
                new_status: nr.map(|r| (r.status, r.saturated)),
                outcome,
                changes,
                verdict,
            }
        })
        .collect()
}

/// A server that now saturates at a rate it kept up with before is worse
/// whatever the percentages say (and better the other way round).
fn verdict(
    outcome: Outcome,
    changes: &[(RateMetric, Change)],
    base_sat: bool,
    new_sat: bool,
) -> Verdict {
    match outcome {
        Outcome::BecameInvalid => Verdict::Regression,
        Outcome::BecameValid => Verdict::Improvement,
        Outcome::Compared => {
            let any = |v| changes.iter().any(|(_, c)| c.verdict == v);
            if any(Verdict::Regression) || (new_sat && !base_sat) {
                Verdict::Regression
            } else if any(Verdict::Improvement) || (base_sat && !new_sat) {
                Verdict::Improvement
            } else {
                Verdict::Unchanged
            }
        }
        _ => Verdict::NotComparable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rate: f64, tps: f64, ttft99: f64, saturated: bool) -> RateResult {
        RateResult {
            request_rate: rate,
            context_tokens: 1024,
            status: CellStatus::Ok,
            output_tps: tps,
            achieved_rate: Some(rate),
            offered_rate_measured: Some(rate),
            ttft_p50: Some(ttft99 / 2.0),
            ttft_p99: Some(ttft99),
            e2e_p99: Some(2.0),
            token_gap_p99: Some(0.02),
            saturated,
            ..RateResult::default()
        }
    }

    fn doc(rows: Vec<RateResult>) -> ResultDocument {
        ResultDocument {
            rate_results: rows,
            ..ResultDocument::default()
        }
    }

    #[test]
    fn rate_cells_pair_by_context_and_rate_and_judge_each_metric() {
        let base = doc(vec![
            row(2.0, 400.0, 0.5, false),
            row(8.0, 1500.0, 1.0, false),
        ]);
        let new = doc(vec![
            row(2.0, 400.0, 0.5, false),
            // same throughput, TTFT p99 20 % worse, and now saturated
            row(8.0, 1500.0, 1.2, true),
            row(16.0, 1600.0, 3.0, true),
        ]);
        let c = compare_rates(&base, &new, 5.0);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].request_rate, 2.0);
        assert_eq!(c[0].verdict, Verdict::Unchanged);
        assert_eq!(c[1].verdict, Verdict::Regression);
        let ttft99 = c[1]
            .changes
            .iter()
            .find(|(m, _)| *m == RateMetric::TtftP99)
            .map(|(_, ch)| ch.change_pct);
        assert!(matches!(ttft99, Some(Some(p)) if (p - 20.0).abs() < 1e-9));
        assert_eq!(c[2].outcome, Outcome::OnlyInNew);
        assert_eq!(c[2].verdict, Verdict::NotComparable);
    }

    #[test]
    fn saturation_alone_decides_when_the_numbers_stay_within_the_threshold() {
        let base = doc(vec![row(8.0, 1500.0, 1.0, true)]);
        let new = doc(vec![row(8.0, 1510.0, 1.0, false)]);
        assert_eq!(
            compare_rates(&base, &new, 5.0)[0].verdict,
            Verdict::Improvement
        );
        let failed = doc(vec![RateResult {
            status: CellStatus::Error,
            ..row(8.0, 0.0, 1.0, false)
        }]);
        let c = compare_rates(&base, &failed, 5.0);
        assert_eq!(c[0].outcome, Outcome::BecameInvalid);
        assert_eq!(c[0].verdict, Verdict::Regression);
    }

    /// A schema-1 file's `achieved_rate` was the send rate: compare reads
    /// it as `offered_rate_measured` and does not set it against a newer
    /// file's completion rate.
    #[test]
    fn an_older_files_send_rate_is_not_compared_with_a_completion_rate() {
        let old = ResultDocument::from_json_str(
            r#"{"metadata": {"tool": "llm-decode-bench", "schema_version": 1}, "results": [],
            "rate_results": [{"request_rate": 8.0, "context_tokens": 1024, "status": "ok",
            "achieved_rate": 8.0, "output_tps": 1500.0, "ttft_p50": 0.5, "ttft_p99": 1.0,
            "e2e_p99": 2.0, "token_gap_p99": 0.02}]}"#,
        )
        .expect("schema 1 file");
        assert_eq!(old.rate_results[0].offered_rate_measured, Some(8.0));
        let new = doc(vec![RateResult {
            achieved_rate: Some(3.0),
            ..row(8.0, 1500.0, 1.0, false)
        }]);
        let c = compare_rates(&old, &new, 5.0);
        let achieved = c[0]
            .changes
            .iter()
            .find(|(m, _)| *m == RateMetric::AchievedRate)
            .map(|(_, ch)| *ch)
            .expect("achieved_rate row");
        assert_eq!(achieved.base, None);
        assert_eq!(achieved.change_pct, None);
        assert_eq!(c[0].verdict, Verdict::Unchanged);
    }
}
