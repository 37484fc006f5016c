//! Prefill–decode interference (`--mixed-prefill-contexts`): per cell and
//! injected length, the prompt's TTFT against the same prompt alone, the
//! streams' lost decode rate, their stall and how many stalled
//! (docs/methodology.md, "Prefill–decode interference"). The HTML and CSV
//! reports take their rows from [`rows`].

use ldb_core::interference::Injection;
use ldb_core::result::CellResult;

use super::Ctx;
use super::format::context;
use super::table::Table;

/// Every injection of the sustained cells, in cell order.
pub(crate) fn rows(doc: &ldb_core::document::ResultDocument) -> Vec<(&CellResult, &Injection)> {
    doc.results
        .iter()
        .filter_map(|c| Some((c, c.ext.interference.as_ref()?)))
        .flat_map(|(c, p)| p.injections.iter().map(move |i| (c, i)))
        .collect()
}

/// `—` for a number the injection does not have.
pub(crate) fn fig(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.digits$}"))
}

/// Milliseconds of a span in seconds.
pub(crate) fn ms(v: Option<f64>) -> String {
    fig(v.map(|s| s * 1000.0), 1)
}

/// The column headers, shared with the HTML table.
pub(crate) const HEADERS: [&str; 10] = [
    "ctx",
    "C",
    "L",
    "TTFT s",
    "alone s",
    "TTFT ×",
    "decode loss %",
    "stall p50 ms",
    "stall max ms",
    "stalled",
];

/// One row's cells as text, in [`HEADERS`] order.
pub(crate) fn cells(c: &CellResult, i: &Injection) -> [String; 10] {
    let stalled = if i.skipped.is_some() {
        "—".into()
    } else {
        format!("{}/{}", i.streams_stalled, i.streams)
    };
    [
        context(c.context_tokens),
        c.concurrency.to_string(),
        context(i.prompt_tokens),
        fig(i.ttft_s, 3),
        fig(i.solo_ttft_s, 3),
        fig(i.ttft_inflation, 2),
        fig(i.decode_loss_pct, 1),
        ms(i.stall_p50_s),
        ms(i.stall_max_s),
        stalled,
    ]
}

/// The table and the reasons of skipped injections (nothing without the probe).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = rows(cx.doc);
    if rows.is_empty() {
        return Vec::new();
    }
    let mut t =
        Table::new("Prefill–decode interference", &HEADERS).right(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let mut skipped = Vec::new();
    let mut factor = ldb_core::interference::STALL_FACTOR;
    for (c, i) in &rows {
        t.push(cells(c, i).into_iter().map(Into::into).collect());
        if let Some(why) = &i.skipped {
            skipped.push(format!(
                "C={} ctx={} L={}: {why}",
                c.concurrency,
                context(c.context_tokens),
                context(i.prompt_tokens)
            ));
        }
        if let Some(p) = &c.ext.interference {
            factor = p.stall_factor;
        }
    }
    let mut out = t.render(cx.color);
    let mut note = format!(
        "One fresh prompt of L tokens sent after the window closed, the C streams still \
         decoding. TTFT × = its TTFT ÷ the same length alone on the idle server; decode loss = \
         1 − the streams' tok/s from the injection to its first token ÷ their tok/s before; \
         stall = each stream's longest token gap meanwhile (median and longest over the \
         streams); stalled = streams whose stall exceeded {factor}× their median gap before."
    );
    if !skipped.is_empty() {
        note.push_str(&format!(" Not injected: {}.", skipped.join("; ")));
    }
    out.extend(cx.note(&note));
    out.push(String::new());
    out
}

#[cfg(test)]
mod tests {
    use ldb_core::document::ResultDocument;
    use ldb_core::interference::Interference;

    use super::*;

    /// A row per injection with its figures; a skipped one names its reason
    /// below; a run without the probe prints nothing.
    #[test]
    fn the_table_shows_each_injection_and_why_one_was_skipped() {
        let mut doc = ResultDocument::default();
        let mut c = CellResult {
            concurrency: 8,
            context_tokens: 16384,
            ..CellResult::default()
        };
        c.ext.interference = Some(Interference {
            stall_factor: 3.0,
            injections: vec![
                Injection {
                    prompt_tokens: 32768,
                    ttft_s: Some(2.5),
                    solo_ttft_s: Some(1.0),
                    ttft_inflation: Some(2.5),
                    decode_loss_pct: Some(40.0),
                    stall_p50_s: Some(0.12),
                    stall_max_s: Some(0.2),
                    streams_stalled: 7,
                    streams: 8,
                    ..Injection::default()
                },
                Injection::skipped(1_048_576, "beyond the model's context (131072 tokens)"),
            ],
            ..Interference::default()
        });
        doc.results.push(c);
        let text = crate::text::render_to_string(&doc, &crate::text::TextOptions::default());
        assert!(text.contains("Prefill–decode interference"), "{text}");
        assert!(text.contains("2.50"), "{text}");
        assert!(text.contains("120.0"), "{text}");
        assert!(text.contains("7/8"), "{text}");
        assert!(text.contains("beyond the model's context"), "{text}");
        let plain = crate::text::render_to_string(
            &ResultDocument::default(),
            &crate::text::TextOptions::default(),
        );
        assert!(!plain.contains("interference"));
    }
}
