//! The TTFT breakdown table of `compare`'s text and Markdown forms: per
//! cell, each figure of [`FIGURES`] as `base → new (Δ)` in milliseconds.

use super::super::ttft::{FIGURES, TtftComparison, TtftFigure};
use super::Grid;
use ldb_core::numfmt::context;

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}", v * 1e3))
}

fn cell(f: &TtftFigure) -> String {
    match f.delta() {
        Some(d) => format!("{} → {} ({:+.1})", ms(f.base), ms(f.new), d * 1e3),
        None => format!("{} → {}", ms(f.base), ms(f.new)),
    }
}

/// The grid (one row per cell with a breakdown in either run).
pub(super) fn grid(rows: &[TtftComparison]) -> Grid {
    let head = ["layer", "ctx", "C"]
        .into_iter()
        .map(String::from)
        .chain(
            FIGURES
                .iter()
                .map(|(k, _)| format!("{} ms", k.trim_end_matches("_mean").replace('_', " "))),
        )
        .collect();
    let rows = rows
        .iter()
        .map(|r| {
            [
                r.key.layer.as_str().to_string(),
                context(r.key.context_tokens),
                r.key.concurrency.to_string(),
            ]
            .into_iter()
            .chain(r.figures.iter().map(cell))
            .collect()
        })
        .collect();
    Grid {
        head,
        rows,
        left: 1,
    }
}
