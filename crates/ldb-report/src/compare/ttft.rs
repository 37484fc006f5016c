//! The TTFT breakdowns of two runs side by side (docs/compare.md): per cell
//! that either run took apart, the client's and the engine's mean TTFT, the
//! engine's mean queue and prefill time and the front end's share, each
//! base → new with the difference. Shown, not judged: no verdict, no effect
//! on the exit code (the engine's parts explain a TTFT change; the TTFT
//! columns of the cell table judge it).

use ldb_core::document::ResultDocument;
use ldb_core::ttft_breakdown::TtftBreakdown;

use super::cells::{CellKey, keyed};

/// What a figure reads from a breakdown.
pub type Reader = fn(&TtftBreakdown) -> Option<f64>;

/// The figures compared, in column order: (key, what it reads).
pub const FIGURES: [(&str, Reader); 5] = [
    ("client_ttft_mean", |b| b.client_ttft_mean_s),
    ("engine_ttft_mean", |b| {
        b.engine_ttft().and_then(|e| e.mean_s)
    }),
    ("queue_time_mean", |b| b.mean_of("queue")),
    ("prefill_time_mean", |b| b.mean_of("prefill")),
    ("frontend_overhead_mean", |b| b.frontend_overhead_mean_s),
];

/// One figure in both runs, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftFigure {
    /// Its key ([`FIGURES`]).
    pub key: &'static str,
    /// The base run's value.
    pub base: Option<f64>,
    /// The new run's value.
    pub new: Option<f64>,
}

impl TtftFigure {
    /// new − base, seconds (`None` without both).
    pub fn delta(&self) -> Option<f64> {
        Some(self.new? - self.base?)
    }
}

/// One cell's breakdown in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TtftComparison {
    /// Layer, context, concurrency.
    pub key: CellKey,
    /// One per [`FIGURES`], in that order.
    pub figures: Vec<TtftFigure>,
}

/// Every cell of either run with a breakdown, in key order.
pub fn compare_ttft(base: &ResultDocument, new: &ResultDocument) -> Vec<TtftComparison> {
    let (b, n) = (keyed(base), keyed(new));
    let mut keys: Vec<CellKey> = b.keys().chain(n.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let get = |m: &std::collections::BTreeMap<CellKey, &ldb_core::result::CellResult>| {
                m.get(&key).and_then(|c| c.ext.ttft_breakdown.clone())
            };
            let (bb, nb) = (get(&b), get(&n));
            if bb.is_none() && nb.is_none() {
                return None;
            }
            let figures = FIGURES
                .iter()
                .map(|(k, f)| TtftFigure {
                    key: k,
                    base: bb.as_ref().and_then(f),
                    new: nb.as_ref().and_then(f),
                })
                .collect();
            Some(TtftComparison { key, figures })
        })
        .collect()
}
