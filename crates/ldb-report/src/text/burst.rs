//! Phase 3: the burst / end-to-end grid and p50 table, or the "not run" note.

use ldb_core::result::CellResult;

use super::Ctx;
use super::cells::{self, Grid};
use super::format::{context, ms_plain, rate};
use super::style::Tone;
use super::table::{Cell, Table, panel};

/// The Phase 3 section (empty when there are neither burst nor sustained cells).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let cells = &cx.doc.burst_results;
    if cells.is_empty() {
        if cx.doc.results.is_empty() || cx.request_mode() {
            return Vec::new();
        }
        let text = if cx.doc.metadata.run_burst {
            "Burst / E2E Decode — not reached: the run ended before Phase 3 started."
        } else {
            "Burst / E2E Decode — not run. Add --run-burst to also measure how fast a batch of \
             requests sent at once completes end to end (the number AIPerf and vllm bench serve \
             report)."
        };
        let mut out = panel("Phase 3", text, cx.text_width(), cx.color, true);
        out.push(String::new());
        return out;
    }
    let mut out = panel(
        "Phase 3",
        "Burst / E2E Decode — each cell sends its requests together and waits for all of them; \
         tok/s is completion tokens over the time from the first send to the last completion.",
        cx.text_width(),
        cx.color,
        false,
    );
    out.push(String::new());
    out.extend(grid_table(cx, cells).render(cx.color));
    for c in cells {
        if let Some(f) = cells::footnote(c) {
            out.extend(cx.para(&f, Tone::Dim));
        }
    }
    out.push(String::new());
    out.extend(p50_table(cells).render(cx.color));
    out.extend(cx.note(
        "Burst figures include queueing and prefill of every request, so they sit below the \
         sustained rate at the same C; Reqs = completed / requested. Times are medians in ms; \
         tok/s/user is the median of output tokens / request latency.",
    ));
    out.push(String::new());
    out
}

fn grid_table(cx: &Ctx<'_>, cells: &[CellResult]) -> Table {
    let m = &cx.doc.metadata;
    let g = Grid::new(&m.context_lengths, &m.concurrency_levels, cells);
    let mut headers = vec!["ctx \\ conc".to_string()];
    headers.extend(g.concs.iter().map(u32::to_string));
    let mut t = Table::with_headers("Burst/E2E tok/s", headers);
    for &ctx in &g.contexts {
        let mut row = vec![Cell::plain(context(ctx))];
        for &c in &g.concs {
            let text = match cells::find(cells, ctx, c) {
                None => "-".to_string(),
                Some(cell) => match cells::status_word(cell.ext.status) {
                    Some(word) => word.to_string(),
                    None => format!(
                        "{:.1} ({}/{})",
                        cell.aggregate_tps.unwrap_or(0.0),
                        cell.num_completed,
                        cell.request_count_target
                    ),
                },
            };
            row.push(Cell::plain(text));
        }
        t.push(row);
    }
    t
}

fn p50_table(cells: &[CellResult]) -> Table {
    let headers = [
        "ctx",
        "C",
        "Reqs",
        "TTFT ms",
        "ITL ms",
        "Latency ms",
        "tok/s/user",
    ];
    let mut t = Table::new("Burst/E2E p50", &headers).right(&[1, 2, 3, 4, 5, 6]);
    for c in cells {
        let l = &c.latency;
        let measured = cells::measured(c);
        let v = |s: String| if measured { s } else { "—".to_string() };
        t.push(vec![
            context(c.context_tokens).into(),
            c.concurrency.to_string().into(),
            format!("{}/{}", c.num_completed, c.request_count_target).into(),
            v(ms_plain(l.ttft.map_or(f64::NAN, |d| d.p50))).into(),
            v(ms_plain(l.inter_token_latency.p50)).into(),
            v(ms_plain(l.request_latency.p50)).into(),
            v(rate(l.e2e_output_tps_per_user.p50)).into(),
        ]);
    }
    t
}
