//! The output formats of a result behind one trait: each [`Exporter`]
//! turns runs into the bytes of its format, and writing them (atomically
//! to a file, or to stdout) is shared. The run's save hook and the
//! `report` subcommand both go through it, so a new format is one
//! implementation here.
//!
//! Six formats: the result JSON, the HTML page (the only one that overlays
//! several runs), CSV, Markdown, the request samples as JSON lines, and
//! the text report.

use std::io::{self, Write};
use std::path::Path;

use crate::html::{HtmlOptions, Input};
use crate::text::TextOptions;

/// One run in an export: its name (the HTML page's series) and document.
pub type Run<'a> = Input<'a>;

/// One output format of a result.
pub trait Exporter {
    /// The format's name in messages (`CSV`, `HTML report`, …).
    fn format(&self) -> &'static str;

    /// True when the format overlays several runs (the HTML page); the
    /// others render the first run alone.
    fn overlays_runs(&self) -> bool {
        false
    }

    /// The runs in this format.
    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>>;
}

/// The result JSON (pretty, as the result file is saved).
pub struct Json;

/// The self-contained HTML page.
pub struct Html(pub HtmlOptions);

/// One CSV row per cell.
pub struct Csv;

/// The Markdown tables.
pub struct Markdown;

/// The request samples, one JSON line each.
pub struct Jsonl;

/// The text report (as printed at the end of a run).
pub struct Text(pub TextOptions);

fn first<'r, 'a>(runs: &'r [Run<'a>]) -> io::Result<&'r Run<'a>> {
    runs.first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no result to export"))
}

impl Exporter for Json {
    fn format(&self) -> &'static str {
        "JSON"
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        Ok(first(runs)?.doc.to_json_string().into_bytes())
    }
}

impl Exporter for Html {
    fn format(&self) -> &'static str {
        "HTML report"
    }

    fn overlays_runs(&self) -> bool {
        true
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        Ok(crate::html::render(runs, &self.0).into_bytes())
    }
}

impl Exporter for Csv {
    fn format(&self) -> &'static str {
        "CSV"
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::csv::write(first(runs)?.doc, &mut buf).map_err(io::Error::other)?;
        Ok(buf)
    }
}

impl Exporter for Markdown {
    fn format(&self) -> &'static str {
        "Markdown"
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        Ok(crate::markdown::render(first(runs)?.doc).into_bytes())
    }
}

impl Exporter for Jsonl {
    fn format(&self) -> &'static str {
        "request-samples JSONL"
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::jsonl::write(first(runs)?.doc, &mut buf)?;
        Ok(buf)
    }
}

impl Exporter for Text {
    fn format(&self) -> &'static str {
        "text report"
    }

    fn serialize(&self, runs: &[Run<'_>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::text::render(first(runs)?.doc, &self.0, &mut buf)?;
        Ok(buf)
    }
}

/// Writes the export to `path`, replacing the file atomically (temporary
/// file and rename), so a reader mid-run never sees half a file. Returns
/// the number of lines written (the request samples' count for JSONL).
pub fn write_atomic(exporter: &dyn Exporter, runs: &[Run<'_>], path: &Path) -> crate::Result<u64> {
    let mut lines = 0;
    crate::json::write_bytes_atomic(path, |f| {
        let bytes = exporter.serialize(runs)?;
        lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        f.write_all(&bytes)
    })?;
    Ok(lines)
}

/// Writes the export to `w` (stdout for `-`); a closed pipe is the
/// caller's to ignore.
pub fn write_to(exporter: &dyn Exporter, runs: &[Run<'_>], w: &mut impl Write) -> io::Result<()> {
    w.write_all(&exporter.serialize(runs)?)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_gives_the_bytes_of_its_own_writer() {
        let doc = crate::html::synthetic_result(2, 2, 3);
        let runs = [Run {
            name: "run",
            doc: &doc,
        }];
        assert_eq!(
            Json.serialize(&runs).unwrap(),
            doc.to_json_string().into_bytes()
        );
        assert_eq!(
            Markdown.serialize(&runs).unwrap(),
            crate::markdown::render(&doc).into_bytes()
        );
        let mut csv = Vec::new();
        crate::csv::write(&doc, &mut csv).unwrap();
        assert_eq!(Csv.serialize(&runs).unwrap(), csv);
        let mut jsonl = Vec::new();
        let n = crate::jsonl::write(&doc, &mut jsonl).unwrap();
        assert_eq!(Jsonl.serialize(&runs).unwrap(), jsonl);
        let opts = TextOptions::default();
        assert_eq!(
            Text(opts).serialize(&runs).unwrap(),
            crate::text::render_to_string(&doc, &opts).into_bytes()
        );
        let html = HtmlOptions::default();
        assert_eq!(
            Html(html).serialize(&runs).unwrap(),
            crate::html::render(&runs, &html).into_bytes()
        );
        assert!(Html(html).overlays_runs() && !Csv.overlays_runs());
        assert!(Json.serialize(&[]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        assert_eq!(write_atomic(&Jsonl, &runs, &path).unwrap(), n);
        assert_eq!(std::fs::read(&path).unwrap(), jsonl);
    }
}
