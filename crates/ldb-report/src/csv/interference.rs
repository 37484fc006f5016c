//! The CSV rows of the prefill–decode interference probe (`kind`
//! `interference`, one per cell and injected length), after the replays.
//! They fill `concurrency`, `context_tokens` and `status` of the cell
//! columns and the columns appended after the replay ones
//! ([`INTERFERENCE_COLUMNS`]); docs/report.md lists them.

use ldb_core::document::ResultDocument;

use super::of;
use super::replay::Pairs;

/// Columns only interference rows fill, appended last in this order.
pub(super) const INTERFERENCE_COLUMNS: &[&str] = &[
    "mixed_prompt_tokens",
    "mixed_skipped",
    "mixed_injected_at_unix",
    "mixed_ttft",
    "mixed_solo_ttft",
    "mixed_ttft_inflation",
    "mixed_tps_before",
    "mixed_tps_during",
    "mixed_tps_after",
    "mixed_decode_loss_pct",
    "mixed_stall_p50",
    "mixed_stall_max",
    "mixed_baseline_gap",
    "mixed_streams_stalled",
    "mixed_streams",
];

/// One row per injection of every sustained cell, in cell order.
pub(super) fn rows(doc: &ResultDocument) -> Vec<(&'static str, Pairs)> {
    crate::text::interference::rows(doc)
        .into_iter()
        .map(|(c, i)| {
            let pairs: Pairs = vec![
                ("concurrency", c.concurrency.to_string()),
                ("context_tokens", c.context_tokens.to_string()),
                ("status", c.ext.status.as_str().to_string()),
                ("mixed_prompt_tokens", i.prompt_tokens.to_string()),
                ("mixed_skipped", i.skipped.clone().unwrap_or_default()),
                ("mixed_injected_at_unix", of(i.injected_at_unix)),
                ("mixed_ttft", of(i.ttft_s)),
                ("mixed_solo_ttft", of(i.solo_ttft_s)),
                ("mixed_ttft_inflation", of(i.ttft_inflation)),
                ("mixed_tps_before", of(i.tps_before)),
                ("mixed_tps_during", of(i.tps_during)),
                ("mixed_tps_after", of(i.tps_after)),
                ("mixed_decode_loss_pct", of(i.decode_loss_pct)),
                ("mixed_stall_p50", of(i.stall_p50_s)),
                ("mixed_stall_max", of(i.stall_max_s)),
                ("mixed_baseline_gap", of(i.baseline_gap_s)),
                ("mixed_streams_stalled", i.streams_stalled.to_string()),
                ("mixed_streams", i.streams.to_string()),
            ];
            ("interference", pairs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ldb_core::interference::{Injection, Interference};
    use ldb_core::result::CellResult;

    use super::super::{header, write};
    use super::*;

    /// A cell with two injections gives its own row and one per injection,
    /// every row as wide as the header.
    #[test]
    fn each_injection_is_a_row_after_the_cells() {
        let mut doc = ResultDocument::default();
        let mut c = CellResult {
            concurrency: 4,
            context_tokens: 1024,
            ..CellResult::default()
        };
        c.ext.interference = Some(Interference {
            injections: vec![
                Injection {
                    prompt_tokens: 4096,
                    ttft_s: Some(0.5),
                    ttft_inflation: Some(1.25),
                    stall_max_s: Some(0.06),
                    streams_stalled: 3,
                    streams: 4,
                    ..Injection::default()
                },
                Injection::skipped(1_000_000, "beyond the model's context, 65536"),
            ],
            ..Interference::default()
        });
        doc.results.push(c);
        let mut buf = Vec::new();
        write(&doc, &mut buf).expect("written");
        let mut r = ::csv::Reader::from_reader(buf.as_slice());
        let rows: Vec<_> = r.records().map(|x| x.expect("parses")).collect();
        let at = |n: &str| header().iter().position(|h| *h == n).expect("column");
        let kinds: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
        assert_eq!(kinds, ["decode", "interference", "interference"]);
        assert!(rows.iter().all(|r| r.len() == header().len()));
        assert_eq!(&rows[1][at("concurrency")], "4");
        assert_eq!(&rows[1][at("mixed_prompt_tokens")], "4096");
        assert_eq!(&rows[1][at("mixed_ttft_inflation")], "1.25");
        assert_eq!(&rows[1][at("mixed_streams_stalled")], "3");
        assert_eq!(&rows[2][at("mixed_ttft")], "");
        assert_eq!(
            &rows[2][at("mixed_skipped")],
            "beyond the model's context, 65536"
        );
        assert_eq!(&rows[0][at("mixed_prompt_tokens")], "");
    }
}
