//! `--slo-search` and `--slo-bisect`: the run judges its cells against the
//! SLO as they finish, to skip concurrency levels that cannot pass and to
//! find the true highest passing level between two measured ones.
//!
//! The decisions are pure functions of the cells recorded so far; the
//! matrix (`crate::matrix`) acts on them. Definitions: docs/methodology.md,
//! "SLO search and bisection".

use ldb_core::result::{CellResult, CellStatus};
use ldb_core::slo::{SloSpec, judge_cell};

/// The cell's SLO verdict as recorded so far (`None`: no record, or not judged).
fn verdict(spec: &SloSpec, cells: &[CellResult], c: u32, x: u64) -> Option<bool> {
    let cell = cells
        .iter()
        .find(|r| r.concurrency == c && r.context_tokens == x)?;
    if cell.ext.status == CellStatus::SkippedSlo {
        return Some(false);
    }
    judge_cell(spec, cell).met
}

/// `--slo-search`: why cell `(c, x)` is not measured, when the two
/// consecutive levels below `c` (in `levels`, ascending) at context `x`
/// both failed the SLO. A level skipped by the search counts as failed, so
/// once two levels failed every higher one is skipped.
pub(crate) fn search_skip(
    spec: &SloSpec,
    levels: &[u32],
    cells: &[CellResult],
    c: u32,
    x: u64,
) -> Option<String> {
    let mut below: Vec<u32> = levels.iter().copied().filter(|&l| l < c).collect();
    below.sort_unstable();
    below.dedup();
    let failed = |l: u32| verdict(spec, cells, l, x) == Some(false);
    below
        .windows(2)
        .rev()
        .find(|w| failed(w[0]) && failed(w[1]))
        .map(|w| {
            format!(
                "--slo-search: C={} and C={} failed the SLO at this context",
                w[0], w[1]
            )
        })
}

/// `--slo-bisect`: the open interval still to search at context `x`, as
/// (highest passing level, lowest failing level above it); the run
/// measures the midpoint until the two are adjacent. No passing level
/// counts as 0. `None` when there is nothing between them, or no failing
/// level above the highest passing one.
pub(crate) fn bisect_gap(spec: &SloSpec, cells: &[CellResult], x: u64) -> Option<(u32, u32)> {
    let mut judged: Vec<(u32, Option<bool>, CellStatus)> = cells
        .iter()
        .filter(|r| r.context_tokens == x)
        .map(|r| {
            (
                r.concurrency,
                verdict(spec, cells, r.concurrency, x),
                r.ext.status,
            )
        })
        .collect();
    judged.sort_by_key(|j| j.0);
    // A passing level stands for its concurrency only when the server ran
    // it (status ok), as in the frontier.
    let pass = judged
        .iter()
        .filter(|j| j.1 == Some(true) && j.2 == CellStatus::Ok)
        .map(|j| j.0)
        .max()
        .unwrap_or(0);
    // Only a measured failure bounds the search: a level the search
    // skipped was never measured.
    let fail = judged
        .iter()
        .filter(|j| j.0 > pass && j.1 == Some(false) && j.2 != CellStatus::SkippedSlo)
        .map(|j| j.0)
        .min()?;
    (fail > pass + 1).then_some((pass, fail))
}

#[cfg(test)]
mod tests {
    use ldb_core::result::Dist;

    use super::*;

    /// A measured cell whose TTFT p99 is `ttft` seconds.
    fn cell(c: u32, x: u64, ttft: f64) -> CellResult {
        let mut r = CellResult {
            concurrency: c,
            context_tokens: x,
            aggregate_tps: Some(10.0),
            ..CellResult::default()
        };
        r.latency.ttft = Some(Dist {
            avg: ttft,
            p50: ttft,
            p90: ttft,
            p99: ttft,
        });
        r
    }

    fn spec() -> SloSpec {
        SloSpec::parse("ttft_p99=1").unwrap()
    }

    const LEVELS: [u32; 5] = [1, 2, 4, 8, 16];

    #[test]
    fn two_consecutive_failures_stop_the_context() {
        let cells = [cell(1, 0, 0.5), cell(2, 0, 2.0), cell(4, 0, 3.0)];
        assert_eq!(search_skip(&spec(), &LEVELS, &cells, 2, 0), None);
        assert_eq!(search_skip(&spec(), &LEVELS, &cells, 4, 0), None);
        let why = search_skip(&spec(), &LEVELS, &cells, 8, 0).unwrap();
        assert!(why.contains("C=2 and C=4"), "{why}");
        // Another context is not affected.
        assert_eq!(search_skip(&spec(), &LEVELS, &cells, 8, 1024), None);
        // A level skipped by the search counts as failed for the next one.
        let mut skipped = CellResult::skipped(
            8,
            0,
            ldb_core::result::DecodeMode::Duration,
            CellStatus::SkippedSlo,
            why,
        );
        skipped.ext.status = CellStatus::SkippedSlo;
        let mut more = cells.to_vec();
        more.push(skipped);
        assert!(search_skip(&spec(), &LEVELS, &more, 16, 0).is_some());
    }

    #[test]
    fn one_failure_between_passes_does_not_stop_it() {
        let cells = [cell(1, 0, 0.5), cell(2, 0, 2.0), cell(4, 0, 0.5)];
        assert_eq!(search_skip(&spec(), &LEVELS, &cells, 8, 0), None);
    }

    #[test]
    fn the_gap_runs_from_the_highest_pass_to_the_next_failure() {
        let cells = [cell(1, 0, 0.5), cell(4, 0, 0.9), cell(8, 0, 1.5)];
        assert_eq!(bisect_gap(&spec(), &cells, 0), Some((4, 8)));
        let done = [cell(4, 0, 0.9), cell(5, 0, 1.5)];
        assert_eq!(bisect_gap(&spec(), &done, 0), None);
        // Nothing passes: search from 0.
        let none = [cell(4, 0, 2.0)];
        assert_eq!(bisect_gap(&spec(), &none, 0), Some((0, 4)));
        // Nothing fails above the pass: no gap.
        let all = [cell(1, 0, 0.1), cell(16, 0, 0.2)];
        assert_eq!(bisect_gap(&spec(), &all, 0), None);
    }
}
