//! Service-level objectives (`--slo`): latency targets, the verdict of each
//! cell against them, goodput, and the SLO frontier per context.
//!
//! Everything is a pure function of a finished [`ResultDocument`], so a live
//! run and `report --slo` on a saved file give the same verdicts.
//! Definitions: `docs/methodology.md`, section "SLO verdicts and goodput".
//!
//! - `spec`: the targets and their command-line form (`key=seconds,…`);
//! - `cell`: one cell judged on the percentiles it already carries;
//! - `goodput`: the tokens of requests that met every per-request target;
//! - `frontier`: the highest passing concurrency of each context.

mod cell;
mod frontier;
mod goodput;
mod presets;
mod spec;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::document::ResultDocument;

pub use cell::{CellVerdict, judge_cell};
pub use frontier::{FrontierPoint, frontier};
pub use goodput::{goodput, request_meets};
pub use presets::{preset, preset_names};
pub use spec::{Metric, Percentile, SloError, SloSpec, Target};

/// The run-level SLO block of the result file (key `slo`; absent without `--slo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SloSummary {
    /// The targets, `key: seconds`.
    pub spec: SloSpec,
    /// Decode matrix: context → highest concurrency meeting the SLO (`null`: none).
    pub frontier: BTreeMap<u64, Option<FrontierPoint>>,
    /// Burst matrix, the same way (`{}` when no burst cell was run).
    pub burst_frontier: BTreeMap<u64, Option<FrontierPoint>>,
}

/// Judges every cell of the document against `spec`, writes the verdicts
/// into the cells and the frontier into `doc.slo`. Running it again with
/// another spec replaces the previous verdicts.
pub fn evaluate(spec: &SloSpec, doc: &mut ResultDocument) {
    for c in doc.results.iter_mut().chain(doc.burst_results.iter_mut()) {
        judge_cell(spec, c).write_into(c);
    }
    doc.slo = Some(SloSummary {
        spec: spec.clone(),
        frontier: frontier(&doc.results),
        burst_frontier: frontier(&doc.burst_results),
    });
}

/// Removes every verdict and the frontier, as if no `--slo` had been given
/// (a resumed run is judged only by its own `--slo`).
pub fn clear(doc: &mut ResultDocument) {
    for c in doc.results.iter_mut().chain(doc.burst_results.iter_mut()) {
        c.ext.slo_met = None;
        c.ext.slo_failed = None;
        c.ext.slo_unknown = None;
        c.ext.goodput = None;
    }
    doc.slo = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clearing_gives_back_the_file_without_slo() {
        let plain = golden().to_json_string();
        let mut doc = golden();
        evaluate(&SloSpec::parse("ttft_p99=1").unwrap(), &mut doc);
        assert_ne!(doc.to_json_string(), plain);
        clear(&mut doc);
        assert_eq!(doc.to_json_string(), plain);
    }

    const GOLDEN: &str = include_str!("../../ldb-report/tests/golden/problems.json");

    fn golden() -> ResultDocument {
        ResultDocument::from_json_str(GOLDEN).expect("golden result")
    }

    #[test]
    fn without_slo_the_file_has_no_slo_keys() {
        let text = golden().to_json_string();
        assert!(!text.contains("\"slo"), "an SLO key without --slo");
        assert!(!text.contains("\"goodput\""));
    }

    #[test]
    fn verdicts_survive_a_write_and_read_back() {
        let mut doc = golden();
        let spec = SloSpec::parse("ttft_p99=100,e2e_p99=1000").unwrap();
        evaluate(&spec, &mut doc);
        let text = doc.to_json_string();
        let back = ResultDocument::from_json_str(&text).expect("reads back");
        assert_eq!(back.slo, doc.slo);
        for (a, b) in back.results.iter().zip(&doc.results) {
            assert_eq!(a.ext, b.ext);
        }
        assert_eq!(
            back.to_json_string(),
            text,
            "bytes change on a second write"
        );
        // Judging the read-back file again gives the same verdicts.
        let mut again = back.clone();
        evaluate(&spec, &mut again);
        assert_eq!(again.to_json_string(), text);
    }

    #[test]
    fn a_loose_slo_on_the_golden_run_puts_each_frontier_at_its_highest_ok_cell() {
        let mut doc = golden();
        evaluate(&SloSpec::parse("ttft_p99=1000").unwrap(), &mut doc);
        let slo = doc.slo.as_ref().expect("slo block");
        assert!(!slo.frontier.is_empty());
        assert!(slo.frontier.values().any(Option::is_some));
        for (ctx, point) in &slo.frontier {
            let best = doc
                .results
                .iter()
                .filter(|c| {
                    c.context_tokens == *ctx && c.ext.status == crate::result::CellStatus::Ok
                })
                .filter(|c| c.latency.ttft.is_some())
                .map(|c| c.concurrency)
                .max();
            assert_eq!(point.map(|p| p.concurrency), best, "ctx {ctx}");
        }
        // A second evaluation replaces the first.
        evaluate(&SloSpec::parse("ttft_p99=0.0000001").unwrap(), &mut doc);
        let slo = doc.slo.as_ref().expect("slo block");
        assert!(slo.frontier.values().all(Option::is_none));
    }
}
