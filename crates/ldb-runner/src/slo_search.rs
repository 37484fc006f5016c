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
/// (highest passing level, lowest non-passing level above it); the run
/// measures the midpoint until the two are adjacent. No passing level
/// counts as 0. `None` when there is nothing between them, or no measured
/// level above the highest passing one.
///
/// One rule (methodology §7.7): a level passes when its cell is `ok` and
/// meets the SLO; every other *measured* level — one that fails the SLO,
/// `capacity_limited` while meeting it, `error`, `no_tokens`, or no verdict
/// at all — is a failing bound. Anything else would leave the gap unchanged
/// and the same midpoint measured again and again.
pub(crate) fn bisect_gap(spec: &SloSpec, cells: &[CellResult], x: u64) -> Option<(u32, u32)> {
    let mut judged: Vec<(u32, bool)> = cells
        .iter()
        .filter(|r| r.context_tokens == x && !r.ext.status.is_skip())
        .map(|r| {
            let passes = r.ext.status == CellStatus::Ok
                && verdict(spec, cells, r.concurrency, x) == Some(true);
            (r.concurrency, passes)
        })
        .collect();
    judged.sort_by_key(|j| j.0);
    let pass = judged
        .iter()
        .filter(|j| j.1)
        .map(|j| j.0)
        .max()
        .unwrap_or(0);
    // Only a measured level bounds the search: a level some rule skipped
    // was never measured.
    let fail = judged
        .iter()
        .filter(|j| j.0 > pass && !j.1)
        .map(|j| j.0)
        .min()?;
    (fail > pass + 1).then_some((pass, fail))
}

/// `--slo-bisect`: the next level to measure at context `x`, with the
/// bounds it splits, as (pass, fail, mid). `tried` holds the levels the
/// bisection already measured at this context: a midpoint among them (its
/// cell was not recorded, e.g. skipped by the user) ends the bisection, so
/// no level is measured twice and the bisection takes at most
/// ⌈log2(fail − pass)⌉ steps.
pub(crate) fn bisect_next(
    spec: &SloSpec,
    cells: &[CellResult],
    x: u64,
    tried: &[u32],
) -> Option<(u32, u32, u32)> {
    let (pass, fail) = bisect_gap(spec, cells, x)?;
    let mid = pass + (fail - pass) / 2;
    (!tried.contains(&mid)).then_some((pass, fail, mid))
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

    /// Drives [`bisect_next`] as the matrix does, every measured level
    /// getting the cell `measure` gives it; returns the levels measured.
    fn drive(start: Vec<CellResult>, measure: impl Fn(u32) -> Option<CellResult>) -> Vec<u32> {
        let mut cells = start;
        let mut tried = Vec::new();
        while let Some((_, _, mid)) = bisect_next(&spec(), &cells, 0, &tried) {
            tried.push(mid);
            cells.extend(measure(mid));
            assert!(tried.len() <= 64, "bisection does not end: {tried:?}");
        }
        tried
    }

    #[test]
    fn anything_that_does_not_pass_is_the_new_failing_bound() {
        let start = || vec![cell(4, 0, 0.5), cell(64, 0, 2.0)];
        // ⌈log2(64 − 4)⌉ = 6 steps at most, whatever the middle levels give.
        let not_passing: [fn(u32) -> CellResult; 4] = [
            // capacity_limited, yet meets the SLO
            |c| {
                let mut r = cell(c, 0, 0.5);
                r.ext.status = CellStatus::CapacityLimited;
                r
            },
            |c| {
                let mut r = cell(c, 0, 0.5);
                r.ext.status = CellStatus::Error;
                r
            },
            |c| {
                let mut r = cell(c, 0, 0.5);
                r.ext.status = CellStatus::NoTokens;
                r
            },
            // no verdict: the SLO's metric is missing
            |c| {
                let mut r = cell(c, 0, 0.5);
                r.latency.ttft = None;
                r
            },
        ];
        for make in not_passing {
            let levels = drive(start(), |c| Some(make(c)));
            assert_eq!(levels, vec![34, 19, 11, 7, 5], "{levels:?}");
            let mut sorted = levels.clone();
            sorted.dedup();
            assert_eq!(sorted.len(), levels.len());
        }
    }

    #[test]
    fn a_level_left_unrecorded_is_not_measured_again() {
        let levels = drive(vec![cell(4, 0, 0.5), cell(64, 0, 2.0)], |_| None);
        assert_eq!(levels, vec![34]);
        // A level recorded as skipped (the user pressed `s`) neither.
        let levels = drive(vec![cell(4, 0, 0.5), cell(64, 0, 2.0)], |c| {
            let mut r = cell(c, 0, 0.5);
            r.ext.status = CellStatus::SkippedUser;
            Some(r)
        });
        assert_eq!(levels, vec![34]);
    }

    #[test]
    fn passing_levels_close_the_gap_from_below_within_the_bound() {
        // True frontier at 40: every level ≤ 40 passes.
        let levels = drive(vec![cell(4, 0, 0.5), cell(64, 0, 2.0)], |c| {
            Some(cell(c, 0, if c <= 40 { 0.5 } else { 2.0 }))
        });
        assert!(levels.len() <= 6, "{levels:?}");
        let cells: Vec<CellResult> = levels
            .iter()
            .map(|&c| cell(c, 0, if c <= 40 { 0.5 } else { 2.0 }))
            .collect();
        let mut all = vec![cell(4, 0, 0.5), cell(64, 0, 2.0)];
        all.extend(cells);
        assert_eq!(bisect_gap(&spec(), &all, 0), None);
        assert!(levels.contains(&40) && levels.contains(&41), "{levels:?}");
    }
}
