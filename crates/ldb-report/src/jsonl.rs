//! `--requests-jsonl FILE`: every request sample of a result, one JSON
//! object per line, for analysis outside this tool (pandas, jq, DuckDB).
//!
//! Each line starts with the identifiers of the cell the request belongs to
//! (`layer`, `cell_index`, `concurrency`, `context_tokens`, `repeat`,
//! `sample_index`), followed by the sample's own keys exactly as in the
//! cell's `request_samples` (docs/result-json.md defines them). Decode cells
//! (`results`) come first in run order, then burst cells (`burst_results`),
//! then the lines of trace replays and sessions (`jsonl/replay.rs`).

mod replay;

use std::io::{self, BufWriter, Write};
use std::path::Path;

use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, RequestSample};
use serde::Serialize;

use crate::error::Result;

/// One line: the cell's identifiers, then the sample's own keys.
#[derive(Serialize)]
struct Line<'a> {
    layer: &'static str,
    cell_index: usize,
    concurrency: u32,
    context_tokens: u64,
    repeat: usize,
    sample_index: usize,
    #[serde(flatten)]
    sample: &'a RequestSample,
}

/// The cells of `doc` with their layer name, in file order.
fn layers(doc: &ResultDocument) -> [(&'static str, &[CellResult]); 2] {
    [("decode", &doc.results), ("burst", &doc.burst_results)]
}

/// Writes one line per request sample of `doc` to `w`, then the replay
/// lines; returns the count.
pub fn write(doc: &ResultDocument, w: &mut impl Write) -> io::Result<u64> {
    let mut n = 0;
    for (layer, cells) in layers(doc) {
        for (index, cell) in cells.iter().enumerate() {
            // The how-many-th measurement of this (C, context) in the layer:
            // 0 unless the cell was measured again (a resumed run).
            let repeat = cells[..index]
                .iter()
                .filter(|c| {
                    c.concurrency == cell.concurrency && c.context_tokens == cell.context_tokens
                })
                .count();
            for (s, sample) in cell.request_samples.iter().enumerate() {
                let line = Line {
                    layer,
                    cell_index: index,
                    concurrency: cell.concurrency,
                    context_tokens: cell.context_tokens,
                    repeat,
                    sample_index: s,
                    sample,
                };
                serde_json::to_writer(&mut *w, &line)?;
                w.write_all(b"\n")?;
                n += 1;
            }
        }
    }
    Ok(n + replay::write(doc, w)?)
}

/// Writes the lines to `path`, replacing the file atomically; returns the
/// number of lines.
pub fn write_atomic(path: &Path, doc: &ResultDocument) -> Result<u64> {
    let mut count = 0;
    crate::json::write_bytes_atomic(path, |f| {
        let mut w = BufWriter::new(f);
        count = write(doc, &mut w)?;
        w.flush()
    })?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn cell(c: u32, ctx: u64, samples: usize) -> CellResult {
        CellResult {
            concurrency: c,
            context_tokens: ctx,
            request_samples: (0..samples)
                .map(|i| RequestSample {
                    ttft: 0.1 * (i as f64 + 1.0),
                    output_tokens: 10 + i as u64,
                    error: if i == 1 {
                        "HTTP 500 \"x\"\n".into()
                    } else {
                        String::new()
                    },
                    ..RequestSample::default()
                })
                .collect(),
            ..CellResult::default()
        }
    }

    #[test]
    fn one_object_per_sample_with_its_cell_identifiers_first()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let doc = ResultDocument {
            results: vec![cell(1, 0, 2), cell(4, 8192, 0), cell(1, 0, 1)],
            burst_results: vec![cell(2, 0, 1)],
            ..ResultDocument::default()
        };
        let mut buf = Vec::new();
        assert_eq!(write(&doc, &mut buf)?, 4);
        let text = String::from_utf8(buf)?;
        let lines: Vec<Value> = text
            .lines()
            .map(serde_json::from_str)
            .collect::<std::result::Result<_, _>>()?;
        assert_eq!(lines.len(), 4);
        let first = lines[0].as_object().ok_or("not an object")?;
        let keys: Vec<&str> = first.keys().map(String::as_str).take(7).collect();
        assert_eq!(
            keys,
            [
                "layer",
                "cell_index",
                "concurrency",
                "context_tokens",
                "repeat",
                "sample_index",
                "ttft"
            ]
        );
        assert_eq!(lines[1]["error"], "HTTP 500 \"x\"\n");
        assert_eq!(lines[1]["sample_index"], 1);
        // The third cell measured C=1 ctx=0 again.
        assert_eq!(
            (lines[2]["cell_index"].as_u64(), lines[2]["repeat"].as_u64()),
            (Some(2), Some(1))
        );
        assert_eq!(lines[3]["layer"], "burst");
        assert_eq!(lines[3]["repeat"], 0);
        // Every sample key is there, read back as a sample.
        let back: RequestSample = serde_json::from_value(lines[0].clone())?;
        assert_eq!(back.output_tokens, 10);
        Ok(())
    }

    #[test]
    fn a_result_without_samples_writes_an_empty_file()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r.jsonl");
        assert_eq!(write_atomic(&path, &ResultDocument::default())?, 0);
        assert_eq!(std::fs::read_to_string(&path)?, "");
        Ok(())
    }
}
