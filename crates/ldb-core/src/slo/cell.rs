//! One cell against the SLO, judged on the percentiles the cell already
//! carries (the same numbers the report prints).

use super::goodput::goodput;
use super::spec::{Metric, Percentile, SloSpec, Target};
use crate::result::{CellResult, CellStatus, Dist};

/// The verdict of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellVerdict {
    /// `Some(true)`: every target met; `Some(false)`: some target failed;
    /// `None`: none failed but some could not be judged, or the cell was not
    /// judged at all (skipped, failed, no tokens).
    pub met: Option<bool>,
    /// Keys whose percentile is above its target.
    pub failed: Vec<String>,
    /// Keys the cell has no value for.
    pub unknown: Vec<String>,
    /// Tok/s of requests that met every per-request target (`None`: not judged).
    pub goodput: Option<f64>,
}

impl CellVerdict {
    /// Writes the verdict into the cell's SLO keys.
    pub fn write_into(self, c: &mut CellResult) {
        c.ext.slo_met = Some(self.met);
        c.ext.slo_failed = Some(self.failed);
        c.ext.slo_unknown = Some(self.unknown);
        c.ext.goodput = Some(self.goodput);
    }
}

fn pick(d: &Dist, p: Percentile) -> f64 {
    match p {
        Percentile::P50 => d.p50,
        Percentile::P90 => d.p90,
        Percentile::P99 => d.p99,
    }
}

/// The cell's value for a target's key, `None` when it has none.
fn value(c: &CellResult, t: &Target) -> Option<f64> {
    let v = match t.metric {
        Metric::Ttft => c.latency.ttft.map(|d| pick(&d, t.percentile)),
        Metric::Ttfo => c.latency.ttfo.map(|d| pick(&d, t.percentile)),
        Metric::TokenGap => match t.percentile {
            Percentile::P50 => c.ext.token_gap_p50,
            Percentile::P90 => c.ext.token_gap_p90,
            Percentile::P99 => c.ext.token_gap_p99,
        },
        // The distribution is over completed requests only; without one, its
        // zeros are placeholders, not latencies.
        Metric::E2e => (c.latency.completed_request_count > 0)
            .then(|| pick(&c.latency.request_latency, t.percentile)),
        // Zeros are placeholders: no request had two tokens.
        Metric::Tpot => {
            Some(pick(&c.latency.inter_token_latency, t.percentile)).filter(|v| *v > 0.0)
        }
    };
    v.filter(|v| v.is_finite())
}

/// Cells whose numbers are judged: measured, valid ones. A capacity-limited
/// cell is judged on what it measured (it stays out of the frontier).
fn judged(status: CellStatus) -> bool {
    matches!(status, CellStatus::Ok | CellStatus::CapacityLimited)
}

/// Judges `c` against every target of `spec` (a value equal to its target meets it).
pub fn judge_cell(spec: &SloSpec, c: &CellResult) -> CellVerdict {
    let keys = || spec.targets().iter().map(Target::key);
    if !judged(c.ext.status) {
        return CellVerdict {
            met: None,
            failed: Vec::new(),
            unknown: keys().collect(),
            goodput: None,
        };
    }
    let mut failed = Vec::new();
    let mut unknown = Vec::new();
    for t in spec.targets() {
        match value(c, t) {
            Some(v) if v <= t.seconds => {}
            Some(_) => failed.push(t.key()),
            None => unknown.push(t.key()),
        }
    }
    let met = if !failed.is_empty() {
        Some(false)
    } else if !unknown.is_empty() {
        None
    } else {
        Some(true)
    };
    CellVerdict {
        met,
        failed,
        unknown,
        goodput: goodput(spec, c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::LatencyStats;

    fn cell() -> CellResult {
        let d = |p50: f64, p90: f64, p99: f64| Dist {
            avg: p50,
            p50,
            p90,
            p99,
        };
        let mut c = CellResult {
            concurrency: 4,
            aggregate_tps: Some(100.0),
            latency: LatencyStats {
                ttft: Some(d(0.5, 1.0, 2.0)),
                ttfo: Some(d(0.5, 1.0, 2.0)),
                request_latency: d(10.0, 12.0, 15.0),
                completed_request_count: 3,
                ..LatencyStats::default()
            },
            ..CellResult::default()
        };
        c.ext.token_gap_p99 = Some(0.05);
        c
    }

    fn spec(s: &str) -> SloSpec {
        SloSpec::parse(s).unwrap()
    }

    #[test]
    fn a_value_exactly_at_its_target_meets_it() {
        let v = judge_cell(
            &spec("ttft_p99=2,ttfo_p90=1,token_gap_p99=0.05,e2e_p50=10"),
            &cell(),
        );
        assert_eq!(v.met, Some(true));
        assert!(v.failed.is_empty() && v.unknown.is_empty());
    }

    #[test]
    fn a_value_above_its_target_fails_and_is_named() {
        let v = judge_cell(&spec("ttft_p99=1.999,e2e_p99=20"), &cell());
        assert_eq!(v.met, Some(false));
        assert_eq!(v.failed, ["ttft_p99"]);
    }

    #[test]
    fn missing_statistics_are_unknown_not_met() {
        let mut c = cell();
        c.latency.completed_request_count = 0;
        c.ext.token_gap_p99 = None;
        let v = judge_cell(&spec("ttft_p99=2,token_gap_p99=1,e2e_p99=100"), &c);
        assert_eq!(v.met, None);
        assert_eq!(v.unknown, ["token_gap_p99", "e2e_p99"]);
        // A failure outweighs an unknown.
        let v = judge_cell(&spec("ttft_p99=1,e2e_p99=100"), &c);
        assert_eq!(
            (v.met, v.failed.len(), v.unknown.len()),
            (Some(false), 1, 1)
        );
    }

    #[test]
    fn skipped_and_failed_cells_are_not_judged() {
        for status in [
            CellStatus::SkippedKv,
            CellStatus::Error,
            CellStatus::NoTokens,
        ] {
            let mut c = cell();
            c.ext.status = status;
            let v = judge_cell(&spec("ttft_p99=100"), &c);
            assert_eq!((v.met, v.goodput), (None, None), "{status:?}");
            assert_eq!(v.unknown, ["ttft_p99"]);
        }
    }
}
