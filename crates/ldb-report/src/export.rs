//! The output formats behind one trait: each [`Exporter`] turns a document
//! into the bytes of its format, and writing them (atomically to a file, or
//! to stdout) is shared. Every file the program writes as a document goes
//! through [`write_atomic`], so a new format or a new document is one
//! implementation here.
//!
//! The documents: a result's runs (`[Run]`: the result JSON, the HTML page,
//! the only format that overlays several runs, CSV, Markdown, the request
//! samples as JSON lines, the text report); the completion-stats result
//! (JSON, text); the standalone paired comparison (JSON) and the paired
//! comparison's text; the fabric-only file (JSON); `compare`'s report
//! (JSON, text, Markdown) and its fabric-only comparison (JSON). Their
//! implementations are in [`documents`].

use std::io::{self, Write};
use std::path::Path;

use crate::html::{HtmlOptions, Input};
use crate::text::TextOptions;

#[cfg(test)]
mod atomic_tests;
mod documents;

/// One run in an export: its name (the HTML page's series) and document.
pub type Run<'a> = Input<'a>;

/// What every format says of itself, whatever the document: its name and
/// whether it overlays several runs. Apart from [`Exporter`] so that a
/// format that exports several documents has one name.
pub trait Format {
    /// The format's name in messages (`CSV`, `HTML report`, …).
    fn format(&self) -> &'static str;

    /// True when the format overlays several runs (the HTML page); the
    /// others render the first run alone.
    fn overlays_runs(&self) -> bool {
        false
    }
}

/// One output format of a document `D`: the document's bytes.
pub trait Exporter<D: ?Sized>: Format {
    /// The document in this format.
    fn serialize(&self, doc: &D) -> io::Result<Vec<u8>>;
}

/// A fixed number of runs exports as the same runs in a slice.
impl<'a, const N: usize, E: Exporter<[Run<'a>]> + ?Sized> Exporter<[Run<'a>; N]> for E {
    fn serialize(&self, runs: &[Run<'a>; N]) -> io::Result<Vec<u8>> {
        Exporter::<[Run<'a>]>::serialize(self, runs)
    }
}

/// The JSON of a document (pretty, as each file has always been written).
pub struct Json;

/// The self-contained HTML page.
pub struct Html(pub HtmlOptions);

impl Html {
    /// The page's exporter: the one place its options are built (the run's
    /// save hook, the coding peak and `report --html` all call this).
    pub fn new(show_capacity_limited_values: bool) -> Html {
        Html(HtmlOptions {
            show_capacity_limited_values,
        })
    }
}

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

impl Format for Json {
    fn format(&self) -> &'static str {
        "JSON"
    }
}

impl<'a> Exporter<[Run<'a>]> for Json {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        Ok(first(runs)?.doc.to_json_string().into_bytes())
    }
}

impl Format for Html {
    fn format(&self) -> &'static str {
        "HTML report"
    }

    fn overlays_runs(&self) -> bool {
        true
    }
}

impl<'a> Exporter<[Run<'a>]> for Html {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        Ok(crate::html::render(runs, &self.0).into_bytes())
    }
}

impl Format for Csv {
    fn format(&self) -> &'static str {
        "CSV"
    }
}

impl<'a> Exporter<[Run<'a>]> for Csv {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::csv::write(first(runs)?.doc, &mut buf).map_err(io::Error::other)?;
        Ok(buf)
    }
}

impl Format for Markdown {
    fn format(&self) -> &'static str {
        "Markdown"
    }
}

impl<'a> Exporter<[Run<'a>]> for Markdown {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        Ok(crate::markdown::render(first(runs)?.doc).into_bytes())
    }
}

impl Format for Jsonl {
    fn format(&self) -> &'static str {
        "request-samples JSONL"
    }
}

impl<'a> Exporter<[Run<'a>]> for Jsonl {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::jsonl::write(first(runs)?.doc, &mut buf)?;
        Ok(buf)
    }
}

impl Format for Text {
    fn format(&self) -> &'static str {
        "text report"
    }
}

impl<'a> Exporter<[Run<'a>]> for Text {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::text::render(first(runs)?.doc, &self.0, &mut buf)?;
        Ok(buf)
    }
}

/// Writes the export to `path`, replacing the file atomically (temporary
/// file and rename: `ldb_sys::atomic_file`), so a reader mid-run never sees
/// half a file, and a failed write (the format's or the disk's) leaves the
/// old file whole. Returns the number of lines written (the request
/// samples' count for JSONL).
pub fn write_atomic<D: ?Sized, E: Exporter<D> + ?Sized>(
    exporter: &E,
    doc: &D,
    path: &Path,
) -> crate::Result<u64> {
    let mut lines = 0;
    crate::json::write_bytes_atomic(path, |f| {
        let bytes = exporter.serialize(doc)?;
        lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        f.write_all(&bytes)
    })?;
    Ok(lines)
}

/// Writes the export to `w` (stdout for `-`); a closed pipe is the
/// caller's to ignore.
pub fn write_to<D: ?Sized, E: Exporter<D> + ?Sized>(
    exporter: &E,
    doc: &D,
    w: &mut impl Write,
) -> io::Result<()> {
    w.write_all(&exporter.serialize(doc)?)?;
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
