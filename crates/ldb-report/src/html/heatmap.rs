//! The sustained-decode matrix as a heatmap: aggregate tok/s per context
//! (rows) × concurrency (columns), each value cell shaded by its value
//! within the file (light = lowest, dark = highest). Cells read exactly as
//! in the text report (`129.5 (2e)`, `∅`, `ERROR`, `skip KV`, …), with the
//! TTFT/ITL p50 detail below the value, and the text report's legend follows.

use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, CellStatus};

use super::Page;
use super::escape::escape;
use crate::text::cells::{self, Grid, Seen};
use crate::text::decode::legend;
use crate::text::format::context;

/// The value a cell is shaded by: shown (not hidden) measured tok/s.
pub(crate) fn shown_value(cell: &CellResult, show_hidden: bool) -> Option<f64> {
    plotted(cell, show_hidden)
        .then_some(cell.aggregate_tps)
        .flatten()
        .filter(|v| v.is_finite())
}

/// Measured, and not a capacity-limited value the text report would hide.
pub(crate) fn plotted(cell: &CellResult, show_hidden: bool) -> bool {
    cells::measured(cell) && (show_hidden || !cells::capacity_limited(cell))
}

/// Background and text colour for a position `t` in 0..=1 of the value range.
fn shade(t: f64) -> String {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    let (r, g, b) = (lerp(239.0, 24.0), lerp(246.0, 84.0), lerp(255.0, 160.0));
    let fg = if t > 0.55 { "#fff" } else { "#111" };
    format!("background:#{r:02x}{g:02x}{b:02x};color:{fg}")
}

/// `<section id="heatmap">` with one matrix per file.
pub(crate) fn section(page: &Page<'_>) -> String {
    let mut out = String::from(
        "<section id=\"heatmap\">\n<h2>Sustained decode: aggregate tok/s</h2>\n\
         <p class=\"note\">Rows are contexts, columns concurrencies; the shade of a value runs \
         from light (lowest of the file) to dark (highest). Small print: TTFT/ITL p50 in compact \
         ms.</p>\n",
    );
    for (n, i) in page.inputs.iter().enumerate() {
        if page.multi() {
            out.push_str(&format!("<h3>{}</h3>\n", escape(i.name)));
        }
        if i.doc.results.is_empty() {
            out.push_str("<p class=\"no-data\">no data</p>\n");
            continue;
        }
        out.push_str(&matrix(i.doc, n, page.show_hidden(i.doc)));
    }
    if page.inputs.is_empty() {
        out.push_str("<p class=\"no-data\">no data</p>\n");
    }
    out.push_str("</section>\n");
    out
}

/// One file's matrix and its legend.
fn matrix(doc: &ResultDocument, n: usize, show_hidden: bool) -> String {
    let cellv = &doc.results;
    let m = &doc.metadata;
    let g = Grid::new(&m.context_lengths, &m.concurrency_levels, cellv);
    let values: Vec<f64> = cellv
        .iter()
        .filter_map(|c| shown_value(c, show_hidden))
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut seen = Seen::default();
    let mut out = format!("<table class=\"heatmap\" id=\"heatmap-{n}\">\n<tr><th>ctx \\ conc</th>");
    for c in &g.concs {
        out.push_str(&format!("<th>{c}</th>"));
    }
    out.push_str("</tr>\n");
    for &ctx in &g.contexts {
        out.push_str(&format!("<tr><th>{}</th>", escape(&context(ctx))));
        for &c in &g.concs {
            let Some(cell) = cells::find(cellv, ctx, c) else {
                out.push_str("<td class=\"skip\">-</td>");
                continue;
            };
            let text = cells::value_text(cell, cell.aggregate_tps, show_hidden, false, &mut seen);
            let detail = cells::ttft_itl(cell)
                .map(|d| format!("<span class=\"detail\">{}</span>", escape(&d)))
                .unwrap_or_default();
            let attr = match (cell.ext.status, shown_value(cell, show_hidden)) {
                (CellStatus::Error, _) => " class=\"err\"".to_string(),
                (s, _) if cells::status_word(s).is_some() => " class=\"skip\"".to_string(),
                (_, Some(v)) => {
                    let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
                    format!(" style=\"{}\"", shade(t))
                }
                _ => String::new(),
            };
            out.push_str(&format!("<td{attr}>{}{detail}</td>", escape(&text)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for l in legend(&seen) {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(&l)));
    }
    out
}
