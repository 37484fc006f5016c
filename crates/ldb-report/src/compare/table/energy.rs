//! The Energy and cost table of `compare`'s text and Markdown forms: per
//! cell, each figure base → new with its change (✗/✓ in the figure's
//! direction, for reading only: energy never sets the exit code), then the
//! distinct reasons a side has no figure.

use ldb_core::numfmt::context;

use super::super::energy::{EnergyChange, EnergyComparison, EnergyMetric};
use super::{Grid, pct};

/// A figure's value at a precision that suits its size.
fn val(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// `0.0123 → 0.0110 (-10.6% ✓)`, `— → 0.0110` when a side has none.
fn cell(f: &EnergyChange) -> String {
    let side = |e: Option<super::super::metric::Estimate>| e.map_or("—".into(), |e| val(e.value));
    let (b, n) = (side(f.change.base), side(f.change.new));
    match f.change.change_pct {
        Some(_) => format!("{b} → {n} ({})", pct(&f.change)),
        None => format!("{b} → {n}"),
    }
}

/// One row per cell.
pub(super) fn grid(rows: &[EnergyComparison]) -> Grid {
    let mut head = vec!["ctx".to_string(), "C".into()];
    head.extend(EnergyMetric::ALL.iter().map(|m| {
        let better = match m.direction() {
            super::super::metric::Direction::LowerIsBetter => "lower better",
            super::super::metric::Direction::HigherIsBetter => "higher better",
        };
        format!("{} ({better})", m.label())
    }));
    let rows = rows
        .iter()
        .map(|r| {
            let mut row = vec![context(r.key.context_tokens), r.key.concurrency.to_string()];
            row.extend(r.figures.iter().map(cell));
            row
        })
        .collect();
    Grid {
        head,
        rows,
        left: 2,
    }
}

/// `base: J/out tok: no GPU energy counters … (3 cells)`, one line per
/// distinct (side, figure, reason).
pub(super) fn reasons(rows: &[EnergyComparison]) -> Vec<String> {
    let mut seen: Vec<(&str, &str, &str, usize)> = Vec::new();
    for r in rows {
        for f in &r.figures {
            for (side, why) in [("base", &f.base_reason), ("new", &f.new_reason)] {
                let Some(why) = why else { continue };
                match seen
                    .iter_mut()
                    .find(|s| s.0 == side && s.1 == f.metric.label() && s.2 == why)
                {
                    Some(s) => s.3 += 1,
                    None => seen.push((side, f.metric.label(), why, 1)),
                }
            }
        }
    }
    seen.into_iter()
        .map(|(side, label, why, n)| {
            let cells = if n == 1 { "cell" } else { "cells" };
            format!("{side}: {label}: {why} ({n} {cells})")
        })
        .collect()
}
