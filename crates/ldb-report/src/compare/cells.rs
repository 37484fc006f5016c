//! Matching the cells (and prefill rows) of two runs and comparing each pair.

use std::collections::BTreeMap;

use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, CellStatus, PrefillEntry};

use super::metric::{CellMetric, Change, Direction, Estimate, Verdict};

/// Which list of the result file a cell comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// `results`: the primary decode matrix (sustained or request-count).
    Decode,
    /// `burst_results`: the Burst / E2E matrix.
    Burst,
}

impl Layer {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Decode => "decode",
            Layer::Burst => "burst",
        }
    }
}

/// What identifies a cell across runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellKey {
    /// Decode or burst.
    pub layer: Layer,
    /// Context in tokens (sorted before concurrency, like the report's rows).
    pub context_tokens: u64,
    /// Concurrency.
    pub concurrency: u32,
}

/// How a pair of cells (or prefill rows) compares as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Valid in both runs: the metrics were compared.
    Compared,
    /// Only the base run has it.
    OnlyInBase,
    /// Only the new run has it.
    OnlyInNew,
    /// Valid in the base run, not valid in the new one (failed, no tokens, skipped).
    BecameInvalid,
    /// Not valid in the base run, valid in the new one.
    BecameValid,
    /// Present in both, valid in neither.
    InvalidInBoth,
}

impl Outcome {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Compared => "compared",
            Outcome::OnlyInBase => "only_in_base",
            Outcome::OnlyInNew => "only_in_new",
            Outcome::BecameInvalid => "became_invalid",
            Outcome::BecameValid => "became_valid",
            Outcome::InvalidInBoth => "invalid_in_both",
        }
    }

    pub(crate) fn of(base: Option<bool>, new: Option<bool>) -> Outcome {
        match (base, new) {
            (Some(true), Some(true)) => Outcome::Compared,
            (Some(true), Some(false)) => Outcome::BecameInvalid,
            (Some(false), Some(true)) => Outcome::BecameValid,
            (Some(false), Some(false)) => Outcome::InvalidInBoth,
            (Some(_), None) => Outcome::OnlyInBase,
            // (None, None) cannot happen: a key comes from one of the runs.
            (None, _) => Outcome::OnlyInNew,
        }
    }
}

/// The whole verdict of a pair: the worst thing that happened to it.
///
/// A cell that was valid and no longer is counts as a regression (a server
/// that now fails a cell is worse by any threshold); one that became valid
/// counts as an improvement. Cells present in one run only are listed but
/// judged neither way: the matrices differ, which the settings check reports.
fn overall(outcome: Outcome, changes: &[Change]) -> Verdict {
    match outcome {
        Outcome::BecameInvalid => Verdict::Regression,
        Outcome::BecameValid => Verdict::Improvement,
        Outcome::Compared => {
            let any = |v| changes.iter().any(|c| c.verdict == v);
            if any(Verdict::Regression) {
                Verdict::Regression
            } else if any(Verdict::Improvement) {
                Verdict::Improvement
            } else {
                Verdict::Unchanged
            }
        }
        _ => Verdict::NotComparable,
    }
}

/// One cell of the matrix, in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CellComparison {
    /// Layer, context, concurrency.
    pub key: CellKey,
    /// The base cell's status (`None`: no such cell in the base run).
    pub base_status: Option<CellStatus>,
    /// The new cell's status.
    pub new_status: Option<CellStatus>,
    /// How the pair compares as a whole.
    pub outcome: Outcome,
    /// One change per [`CellMetric::ALL`], in that order (all `NotComparable`
    /// unless the outcome is `Compared`).
    pub changes: Vec<(CellMetric, Change)>,
    /// Regression if any metric regressed (or the cell became invalid),
    /// else improvement if any improved, else unchanged.
    pub verdict: Verdict,
}

/// One prefill row (by context), in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillComparison {
    /// Context in tokens.
    pub context_tokens: u64,
    /// Whether the base run has the row, and whether it was measured.
    pub base_measured: Option<bool>,
    /// The same for the new run.
    pub new_measured: Option<bool>,
    /// How the pair compares as a whole.
    pub outcome: Outcome,
    /// The headline prefill rate, `prefill.<ctx>.tok_per_sec` (higher is better).
    pub tok_per_sec: Change,
    /// Same as the change's verdict, or regression/improvement for rows that
    /// stopped or started being measured.
    pub verdict: Verdict,
}

/// Measured, with a value the report trusts enough to show: `ok` or
/// `capacity_limited` (the same rule as exit code 4 of a run).
pub fn cell_valid(c: &CellResult) -> bool {
    matches!(c.ext.status, CellStatus::Ok | CellStatus::CapacityLimited)
}

pub(crate) fn keyed(doc: &ResultDocument) -> BTreeMap<CellKey, &CellResult> {
    let mut m = BTreeMap::new();
    for (layer, cells) in [
        (Layer::Decode, &doc.results),
        (Layer::Burst, &doc.burst_results),
    ] {
        for c in cells {
            let key = CellKey {
                layer,
                context_tokens: c.context_tokens,
                concurrency: c.concurrency,
            };
            // A key seen twice: the later cell counts, as in the report.
            m.insert(key, c);
        }
    }
    m
}

/// Every cell of either run, in key order (decode before burst, then
/// context, then concurrency).
pub fn compare_cells(
    base: &ResultDocument,
    new: &ResultDocument,
    threshold_pct: f64,
) -> Vec<CellComparison> {
    let (b, n) = (keyed(base), keyed(new));
    let mut keys: Vec<CellKey> = b.keys().chain(n.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|key| {
            let (bc, nc) = (b.get(&key).copied(), n.get(&key).copied());
            let outcome = Outcome::of(bc.map(cell_valid), nc.map(cell_valid));
            let changes: Vec<(CellMetric, Change)> = CellMetric::ALL
                .iter()
                .map(|&m| {
                    let value = |c: Option<&CellResult>| {
                        c.filter(|_| outcome == Outcome::Compared)
                            .and_then(|c| Estimate::of_cell(c, m.key(), m.value(c)))
                    };
                    (
                        m,
                        Change::between(value(bc), value(nc), m.direction(), threshold_pct),
                    )
                })
                .collect();
            let plain: Vec<Change> = changes.iter().map(|(_, c)| *c).collect();
            CellComparison {
                key,
                base_status: bc.map(|c| c.ext.status),
                new_status: nc.map(|c| c.ext.status),
                outcome,
                verdict: overall(outcome, &plain),
                changes,
            }
        })
        .collect()
}

/// A prefill row with a measured rate.
fn prefill_measured(p: &PrefillEntry) -> bool {
    !p.skipped && p.tok_per_sec > 0.0 && p.tok_per_sec.is_finite()
}

/// Every prefill context of either run, in context order.
pub fn compare_prefill(
    base: &ResultDocument,
    new: &ResultDocument,
    threshold_pct: f64,
) -> Vec<PrefillComparison> {
    let mut contexts: Vec<u64> = base
        .prefill
        .keys()
        .chain(new.prefill.keys())
        .copied()
        .collect();
    contexts.sort_unstable();
    contexts.dedup();
    contexts
        .into_iter()
        .map(|ctx| {
            let (bp, np) = (base.prefill.get(&ctx), new.prefill.get(&ctx));
            let (bm, nm) = (bp.map(prefill_measured), np.map(prefill_measured));
            let outcome = Outcome::of(bm, nm);
            let value = |p: Option<&PrefillEntry>| {
                p.filter(|_| outcome == Outcome::Compared)
                    .map(|p| Estimate::single(p.tok_per_sec))
            };
            let tok_per_sec = Change::between(
                value(bp),
                value(np),
                Direction::HigherIsBetter,
                threshold_pct,
            );
            PrefillComparison {
                context_tokens: ctx,
                base_measured: bm,
                new_measured: nm,
                outcome,
                verdict: overall(outcome, &[tok_per_sec]),
                tok_per_sec,
            }
        })
        .collect()
}
