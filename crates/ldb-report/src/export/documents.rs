//! The exporters of the documents other than a result's runs: each keeps
//! the bytes its file or output always had (pretty JSON, with or without
//! the final newline as it was; the text and Markdown of their renderers).

use std::io;

use ldb_eval::cstats::CsDocument;
use ldb_eval::paired::Comparison;
use serde::Serialize;

use super::{Exporter, Json, Markdown, Text};
use crate::compare::CompareReport;
use crate::compare::fabric::FabricCompareOutput;
use crate::fabric_only::FabricOnlyDocument;
use crate::paired::PairedDocument;

/// Pretty JSON of `doc`, ended by a newline when `newline`.
fn pretty(doc: &impl Serialize, newline: bool) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(doc).map_err(io::Error::other)?;
    if newline {
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// The completion-stats result file (no final newline, as always written).
impl Exporter<CsDocument> for Json {
    fn serialize(&self, doc: &CsDocument) -> io::Result<Vec<u8>> {
        pretty(doc, false)
    }
}

/// The completion-stats report printed after a run.
impl Exporter<CsDocument> for Text {
    fn serialize(&self, doc: &CsDocument) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        crate::cstats::render(doc, &self.0, &mut buf)?;
        Ok(buf)
    }
}

/// The standalone paired comparison's file (`--compare-candidate … --output`).
impl Exporter<PairedDocument> for Json {
    fn serialize(&self, doc: &PairedDocument) -> io::Result<Vec<u8>> {
        pretty(doc, true)
    }
}

/// The paired comparison's text (standalone, or after a completion-stats run).
impl Exporter<Comparison> for Text {
    fn serialize(&self, c: &Comparison) -> io::Result<Vec<u8>> {
        Ok(crate::text::render_paired(c, &self.0).into_bytes())
    }
}

/// The fabric-only file (`--p2pmark-only`, `--amd-fabric-only`).
impl Exporter<FabricOnlyDocument> for Json {
    fn serialize(&self, doc: &FabricOnlyDocument) -> io::Result<Vec<u8>> {
        pretty(doc, true)
    }
}

/// `compare --format json`: the typed `CompareOutput`, written through its
/// JSON value as it always was (the key order of its ordered maps kept).
impl Exporter<CompareReport> for Json {
    fn serialize(&self, r: &CompareReport) -> io::Result<Vec<u8>> {
        pretty(&crate::compare::to_json(r), true)
    }
}

/// `compare`'s text tables (the comparison takes no text options).
impl Exporter<CompareReport> for Text {
    fn serialize(&self, r: &CompareReport) -> io::Result<Vec<u8>> {
        Ok(crate::compare::render_text(r).into_bytes())
    }
}

/// `compare --format markdown`.
impl Exporter<CompareReport> for Markdown {
    fn serialize(&self, r: &CompareReport) -> io::Result<Vec<u8>> {
        Ok(crate::compare::render_markdown(r).into_bytes())
    }
}

/// `compare --format json` of fabric-only files.
impl Exporter<FabricCompareOutput> for Json {
    fn serialize(&self, doc: &FabricCompareOutput) -> io::Result<Vec<u8>> {
        pretty(doc, true)
    }
}
