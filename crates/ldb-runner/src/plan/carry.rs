//! `--resume` in the plan: which cells and prefill rows of the file being
//! resumed are kept as they are, so the run (and `--dry-run --resume`) knows
//! what is left to measure. Pure, like the rest of the plan.

use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, CellStatus};

use super::{RunPlan, estimate_seconds};
use crate::config::RunConfig;

/// The first finished result for cell `(c, x)`, if any.
fn finished_record(cells: &[CellResult], c: u32, x: u64) -> Option<&CellResult> {
    cells
        .iter()
        .find(|r| r.concurrency == c && r.context_tokens == x && r.ext.status.is_finished())
}

/// The status of the first finished result for cell `(c, x)`, if any.
fn finished(cells: &[CellResult], c: u32, x: u64) -> Option<CellStatus> {
    finished_record(cells, c, x).map(|r| r.ext.status)
}

/// Mark what `doc` (the file being resumed) already holds: finished cells
/// (`ok`, `capacity_limited`, `skipped_*`) of both matrices, and prefill rows
/// that were measured or that the plan skips for the same reason. A failed
/// prefill row (a row skipped because its request failed) is measured again.
///
/// The warmups stay as planned while anything is left to measure, and are
/// dropped when nothing is; the estimate counts only what is left.
pub fn mark_carried(plan: &mut RunPlan, cfg: &RunConfig, doc: &ResultDocument) {
    let burst = cfg.burst.run_burst && cfg.matrix.request_count == 0;
    let wanted = cfg.matrix.repeat.max(1);
    for cell in &mut plan.cells {
        let (c, x) = (cell.concurrency, cell.context);
        cell.carried = finished(&doc.results, c, x);
        // With --repeat, a measured cell holding fewer repeats than asked is
        // measured again for the missing ones; its record is kept.
        let held = finished_record(&doc.results, c, x)
            .filter(|r| !r.ext.status.is_skip())
            .map_or(0, ldb_core::repeat::count);
        cell.carried_repeats = 0;
        if cell.carried.is_some() && held > 0 && held < wanted {
            cell.carried = None;
            cell.carried_repeats = held;
        }
        cell.burst_carried = if burst {
            finished(&doc.burst_results, c, x)
        } else {
            None
        };
    }
    let planned_skip = |x: u64| plan.prefill_skipped.iter().any(|s| s.context == x);
    plan.prefill_carried = doc
        .prefill
        .iter()
        .filter(|(x, row)| !row.skipped || planned_skip(**x))
        .map(|(x, _)| *x)
        .collect();

    let decode_left = plan.cells_to_measure().next().is_some()
        || (burst && plan.measured_cells().any(|c| c.burst_carried.is_none()));
    if !decode_left {
        plan.decode_warmup = None;
    }
    let carried = &plan.prefill_carried;
    let integrated_left = plan
        .integrated_prefill
        .iter()
        .any(|x| !carried.contains(x) && plan.cells_to_measure().any(|c| c.context == *x));
    let rows_left = plan
        .scout_only
        .iter()
        .chain(&plan.standalone)
        .any(|x| !carried.contains(x));
    if !(integrated_left || rows_left) {
        plan.prefill_warmup = None;
    }
    plan.estimated_seconds = estimate_seconds(cfg, plan);
}

#[cfg(test)]
mod tests {
    use ldb_core::result::PrefillEntry;

    use super::*;
    use crate::plan::{ServerLimits, plan};

    fn cfg() -> RunConfig {
        RunConfig {
            matrix: crate::config::MatrixConfig {
                concurrency: vec![1, 2],
                contexts: vec![0, 1024],
                max_tokens: 128,
                duration: 2.0,
                decode_warmup_seconds: 1.0,
                ..Default::default()
            },
            prefill: crate::config::PrefillConfig {
                prefill_contexts: vec![2048, 65_536],
                ..Default::default()
            },
            ..RunConfig::default()
        }
    }

    const LIMITS: ServerLimits = ServerLimits {
        model_context: 32_768,
        kv_budget: 0,
    };

    fn cell(c: u32, x: u64, status: CellStatus) -> CellResult {
        let mut r = CellResult {
            concurrency: c,
            context_tokens: x,
            ..CellResult::default()
        };
        r.ext.status = status;
        r
    }

    fn row(skipped: bool) -> PrefillEntry {
        PrefillEntry {
            skipped,
            ..PrefillEntry::default()
        }
    }

    #[test]
    fn finished_cells_are_carried_and_failed_ones_measured_again() {
        let cfg = cfg();
        let mut p = plan(&cfg, LIMITS);
        let fresh = p.clone();
        let doc = ResultDocument {
            results: vec![
                cell(1, 0, CellStatus::Ok),
                cell(1, 1024, CellStatus::Error),
                cell(2, 0, CellStatus::CapacityLimited),
                cell(2, 1024, CellStatus::NoTokens),
            ],
            ..ResultDocument::default()
        };
        mark_carried(&mut p, &cfg, &doc);
        let carried: Vec<Option<CellStatus>> = p.cells.iter().map(|c| c.carried).collect();
        assert_eq!(
            carried,
            [
                Some(CellStatus::Ok),
                None,
                Some(CellStatus::CapacityLimited),
                None
            ]
        );
        assert_eq!(p.cells_to_measure().count(), 2);
        // Warmups stay: there is something left to measure.
        assert_eq!(p.decode_warmup, fresh.decode_warmup);
        assert_eq!(p.prefill_warmup, fresh.prefill_warmup);
        assert!(p.estimated_seconds < fresh.estimated_seconds);
        let shown = ldb_report::text::plan::PlanText(&p).to_string();
        assert!(shown.contains("1. C=1 ctx=0  carried over (ok)"), "{shown}");
        assert!(shown.contains("2. C=1 ctx=1k  measure"), "{shown}");
        assert!(shown.contains(", 2 carried over from the file"), "{shown}");
    }

    #[test]
    fn measured_and_planned_skip_prefill_rows_are_carried_failed_rows_are_not() {
        let cfg = cfg();
        let mut p = plan(&cfg, LIMITS);
        let mut doc = ResultDocument::default();
        doc.prefill.insert(1024, row(false));
        // Beyond the model: the plan skips it for the same reason.
        doc.prefill.insert(65_536, row(true));
        // The scout-only request failed: measure it again.
        doc.prefill.insert(2048, row(true));
        mark_carried(&mut p, &cfg, &doc);
        assert_eq!(p.prefill_carried, vec![1024, 65_536]);
        assert!(p.prefill_warmup.is_some(), "2048 is left to measure");
    }

    #[test]
    fn nothing_left_drops_the_warmups() {
        let cfg = cfg();
        let mut p = plan(&cfg, LIMITS);
        let mut doc = ResultDocument::default();
        for c in [1, 2] {
            for x in [0, 1024] {
                doc.results.push(cell(c, x, CellStatus::Ok));
            }
        }
        doc.prefill.insert(1024, row(false));
        doc.prefill.insert(2048, row(false));
        doc.prefill.insert(65_536, row(true));
        mark_carried(&mut p, &cfg, &doc);
        assert_eq!(p.cells_to_measure().count(), 0);
        assert_eq!((p.decode_warmup, p.prefill_warmup), (None, None));
        assert_eq!(p.estimated_seconds, 0.0);
    }

    #[test]
    fn cells_with_fewer_repeats_than_asked_are_measured_for_the_rest() {
        let mut cfg = cfg();
        cfg.matrix.repeat = 3;
        let mut p = plan(&cfg, LIMITS);
        let fresh = p.clone();
        let mut two = cell(1, 0, CellStatus::Ok);
        ldb_core::repeat::add(&mut two, cell(1, 0, CellStatus::Ok), 2);
        let mut three = cell(2, 0, CellStatus::Ok);
        ldb_core::repeat::add(&mut three, cell(2, 0, CellStatus::Ok), 2);
        ldb_core::repeat::add(&mut three, cell(2, 0, CellStatus::Ok), 3);
        let doc = ResultDocument {
            // One repeat (a file of a single run), two, three, a skip.
            results: vec![
                cell(1, 1024, CellStatus::Ok),
                two,
                three,
                cell(2, 1024, CellStatus::SkippedUser),
            ],
            ..ResultDocument::default()
        };
        mark_carried(&mut p, &cfg, &doc);
        let got: Vec<(bool, u32)> = p
            .cells
            .iter()
            .map(|c| (c.carried.is_some(), c.carried_repeats))
            .collect();
        assert_eq!(got, [(false, 2), (false, 1), (true, 0), (true, 0)]);
        // 1 + 2 repeats left instead of 4 × 3.
        assert!(p.estimated_seconds < fresh.estimated_seconds);
        assert!(
            ldb_report::text::plan::PlanText(&p)
                .to_string()
                .contains("measure the repeats after 2 carried over")
        );
    }

    #[test]
    fn burst_cells_are_carried_on_their_own() {
        let mut cfg = cfg();
        cfg.burst.run_burst = true;
        let mut p = plan(&cfg, LIMITS);
        let mut doc = ResultDocument::default();
        for c in [1, 2] {
            for x in [0, 1024] {
                doc.results.push(cell(c, x, CellStatus::Ok));
            }
        }
        doc.burst_results.push(cell(1, 0, CellStatus::Ok));
        doc.burst_results.push(cell(1, 1024, CellStatus::Error));
        mark_carried(&mut p, &cfg, &doc);
        let burst: Vec<bool> = p.cells.iter().map(|c| c.burst_carried.is_some()).collect();
        assert_eq!(burst, [true, false, false, false]);
        assert!(p.decode_warmup.is_some(), "burst cells are left to run");
        assert!(
            ldb_report::text::plan::PlanText(&p)
                .to_string()
                .contains("; burst carried over (ok)")
        );
    }
}
