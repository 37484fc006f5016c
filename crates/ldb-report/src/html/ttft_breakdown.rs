//! `<section id="ttft-breakdown">`: one table of every cell with a TTFT
//! breakdown (docs/methodology.md §9.4): client and engine TTFT, the
//! engine's parts, the front end's share and preemptions. Nothing at all
//! when no file has one, so older pages stay as they were.

use super::Page;
use super::escape::escape;
use crate::text::format::context;
use crate::text::ttft_breakdown::{ms, quantile_ms, rows};

/// The section (empty without a breakdown).
pub(crate) fn section(page: &Page<'_>) -> String {
    let mut body = String::new();
    let mut notes: Vec<String> = Vec::new();
    for i in page.inputs {
        let file = if page.multi() {
            format!("{} ", i.name)
        } else {
            String::new()
        };
        for (c, b) in rows(i.doc.results.iter().chain(&i.doc.burst_results)) {
            let cell = format!("{file}{} C={}", context(c.context_tokens), c.concurrency);
            let engine = b.engine_ttft();
            let cells = [
                ms(b.client_ttft_mean_s),
                ms(engine.and_then(|e| e.mean_s)),
                quantile_ms(engine.and_then(|e| e.p50)),
                ms(b.mean_of("queue")),
                ms(b.mean_of("prefill")),
                ms(b.mean_of("decode")),
                ms(b.frontend_overhead_mean_s),
                b.preemptions.map_or_else(|| "—".into(), |p| p.to_string()),
            ];
            body.push_str(&format!("<tr><th>{}</th>", escape(&cell)));
            for v in cells {
                body.push_str(&format!("<td>{}</td>", escape(&v)));
            }
            body.push_str("</tr>\n");
            if let Some(n) = &b.note {
                notes.push(format!("{cell}: {n}."));
            }
        }
    }
    if body.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"ttft-breakdown\">\n<h2>TTFT breakdown</h2>\n<p class=\"note\">Means in ms \
         from the engine's own histograms over each window (exact from _sum/_count) or llama.cpp's \
         per-request timings; the engine p50 is interpolated inside its bucket, ± the bucket's \
         width. Overhead = client TTFT − engine TTFT: the HTTP front end, tokenization, the \
         network and the client.</p>\n<table class=\"heatmap\" id=\"ttft-breakdown-table\">\n\
         <tr><th>cell</th><th>client</th><th>engine</th><th>engine p50</th><th>queue</th>\
         <th>prefill</th><th>decode</th><th>overhead</th><th>preemptions</th></tr>\n",
    );
    out.push_str(&body);
    out.push_str("</table>\n");
    for n in notes {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(&n)));
    }
    out.push_str("</section>\n");
    out
}
