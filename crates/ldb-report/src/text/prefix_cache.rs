//! The prefix-cache section: per cell, the hit rate its prompts intended
//! (an unlimited cache at the engine's granularity) against the one the
//! server achieved; cells more than 10 points apart are flagged.

use super::Ctx;
use super::style::Tone;
use super::table::{Cell, Table};
use crate::prefix_flags::rows;

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// The section (empty when no cell has an intended rate).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = rows(cx.doc);
    if rows.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(
        "Prefix cache",
        &["cell", "intended", "achieved", "source", ""],
    )
    .right(&[1, 2]);
    for r in &rows {
        t.push(vec![
            Cell::plain(r.cell.clone()),
            Cell::plain(pct(r.intended)),
            Cell::plain(r.achieved.map_or_else(|| "—".into(), pct)),
            Cell::plain(if r.source.is_empty() {
                "—"
            } else {
                &r.source
            }),
            Cell::plain(if r.flagged { "GAP" } else { "" }),
        ]);
    }
    let mut out = vec![String::new()];
    out.extend(t.render(cx.color));
    for f in rows.iter().filter_map(|r| r.flag_text()) {
        out.extend(cx.para(&f, Tone::Warn));
    }
    let granularity = cx.doc.metadata.prefix_cache.as_ref().and_then(|p| {
        p.granularity
            .map(|g| (g.block_tokens(), p.granularity_source.clone()))
    });
    let unit = granularity.map_or_else(String::new, |(b, src)| {
        format!(" Counted in units of {b} token(s) ({src}).")
    });
    out.extend(cx.note(&format!(
        "Intended = tokens an unlimited prefix cache would serve for the prompts the cell sent, \
         ÷ their prompt tokens; achieved = what the server reported over the same requests. \
         GAP = more than 10 points apart.{unit}"
    )));
    out.push(String::new());
    out
}
