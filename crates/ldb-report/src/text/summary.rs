//! Primary Summary: the prefill and aggregate decode tables repeated last,
//! side by side when the terminal is wide enough.

use ldb_core::result::RunStatus;

use super::Ctx;
use super::cells::Seen;
use super::decode;
use super::prefill;
use super::style::visible_width;
use super::table::panel;

/// Columns between the two side-by-side tables.
const GAP: usize = 4;

/// The Primary Summary panel and tables (empty when nothing was measured).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let cells = &cx.doc.results;
    let pre = prefill::summary_table(cx).map(|t| t.render(cx.color));
    let agg = (!cells.is_empty()).then(|| {
        let mut seen = Seen::default();
        decode::aggregate_table(cx, "Aggregate decode tok/s", cells, false, &mut seen)
            .render(cx.color)
    });
    if pre.is_none() && agg.is_none() {
        return Vec::new();
    }
    let mut out = panel(
        "Primary Summary",
        if cx.doc.metadata.run_status == Some(RunStatus::Interrupted) {
            "The headline tables once more. Partial results: the run was interrupted."
        } else {
            "The headline tables once more, so they are the last thing on screen."
        },
        cx.text_width(),
        cx.color,
        false,
    );
    out.push(String::new());
    let n_conc = decode::grid(cx, cells).concs.len();
    match (pre, agg) {
        (Some(p), Some(a)) if cx.width >= 44 + (14 + 12 * n_conc) + GAP => {
            out.extend(side_by_side(&p, &a));
        }
        (p, a) => {
            for block in [p, a].into_iter().flatten() {
                out.extend(block);
                out.push(String::new());
            }
            out.pop();
        }
    }
    out.push(String::new());
    out
}

/// Two blocks of lines next to each other, the left one padded to its width.
fn side_by_side(left: &[String], right: &[String]) -> Vec<String> {
    let lw = left.iter().map(|l| visible_width(l)).max().unwrap_or(0);
    (0..left.len().max(right.len()))
        .map(|i| {
            let l = left.get(i).map_or("", String::as_str);
            match right.get(i) {
                Some(r) => {
                    let pad = " ".repeat(lw - visible_width(l) + GAP);
                    format!("{l}{pad}{r}")
                }
                None => l.to_string(),
            }
        })
        .collect()
}
