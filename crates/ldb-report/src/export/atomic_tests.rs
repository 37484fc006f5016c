//! Every exporter's file is written atomically: a write that fails part
//! way (here: the format's bytes made, then an injected failure, as a full
//! disk would give) leaves the old file whole and no temporary file; a
//! write that succeeds leaves exactly the format's bytes.

use std::io;
use std::path::Path;

use ldb_eval::cstats::CsDocument;
use ldb_eval::paired::Comparison;

use super::{Csv, Exporter, Format, Html, Json, Jsonl, Markdown, Run, Text, write_atomic};
use crate::compare::CompareReport;
use crate::compare::fabric::FabricCompareOutput;
use crate::fabric_only::FabricOnlyDocument;
use crate::paired::PairedDocument;
use crate::text::TextOptions;

/// An exporter that makes its format's bytes and then fails.
struct Failing<'e, E>(&'e E);

impl<E: Format> Format for Failing<'_, E> {
    fn format(&self) -> &'static str {
        self.0.format()
    }
}

fn injected() -> io::Error {
    io::Error::other("no space left on the device (injected)")
}

impl<'a, E: Exporter<[Run<'a>]>> Exporter<[Run<'a>]> for Failing<'_, E> {
    fn serialize(&self, runs: &[Run<'a>]) -> io::Result<Vec<u8>> {
        self.0.serialize(runs)?;
        Err(injected())
    }
}

macro_rules! failing_for {
    ($($doc:ty),* $(,)?) => {$(
        impl<E: Exporter<$doc>> Exporter<$doc> for Failing<'_, E> {
            fn serialize(&self, doc: &$doc) -> io::Result<Vec<u8>> {
                self.0.serialize(doc)?;
                Err(injected())
            }
        }
    )*};
}

failing_for!(
    CsDocument,
    PairedDocument,
    Comparison,
    FabricOnlyDocument,
    CompareReport,
    FabricCompareOutput,
);

const OLD: &[u8] = b"{\"an older\": \"complete file\"}\n";

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// The two halves of the promise for one exporter and document.
fn check<'e, D: ?Sized, E: Exporter<D>>(exporter: &'e E, doc: &D, dir: &Path, file: &str)
where
    Failing<'e, E>: Exporter<D>,
{
    let path = dir.join(file);
    std::fs::write(&path, OLD).unwrap();
    let failed = write_atomic(&Failing(exporter), doc, &path);
    let msg = failed.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("injected"), "{}: {msg}", exporter.format());
    assert_eq!(std::fs::read(&path).unwrap(), OLD, "{}", exporter.format());
    assert!(temporaries(dir).is_empty(), "{}", exporter.format());
    write_atomic(exporter, doc, &path).unwrap();
    let bytes = exporter.serialize(doc).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "{}",
        exporter.format()
    );
    assert!(temporaries(dir).is_empty(), "{}", exporter.format());
}

#[test]
fn every_exporter_keeps_the_old_file_whole_when_its_write_fails() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let result = crate::html::synthetic_result(2, 2, 3);
    let runs = [Run {
        name: "run",
        doc: &result,
    }];
    let runs = &runs[..];
    let text = Text(TextOptions::default());
    check(&Json, runs, d, "result.json");
    check(&Html::new(false), runs, d, "result.html");
    check(&Csv, runs, d, "result.csv");
    check(&Markdown, runs, d, "result.md");
    check(&Jsonl, runs, d, "samples.jsonl");
    check(&text, runs, d, "report.txt");
    let cs = CsDocument::default();
    check(&Json, &cs, d, "cstats.json");
    check(&text, &cs, d, "cstats.txt");
    let paired = PairedDocument::default();
    check(&Json, &paired, d, "paired.json");
    check(&text, &paired.comparison, d, "paired.txt");
    check(&Json, &FabricOnlyDocument::default(), d, "fabric.json");
    let report = CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: Vec::new(),
    };
    check(&Json, &report, d, "compare.json");
    check(&text, &report, d, "compare.txt");
    check(&Markdown, &report, d, "compare.md");
    let fabric = FabricCompareOutput {
        threshold_pct: 5.0,
        fabric: Vec::new(),
    };
    check(&Json, &fabric, d, "fabric-compare.json");
}

/// A target that cannot be replaced (a folder) fails whole, too.
#[test]
fn a_target_that_cannot_be_replaced_is_an_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep"), "x").unwrap();
    let msg = write_atomic(&Json, &CsDocument::default(), &busy)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.starts_with("cannot replace result file"), "{msg}");
    assert_eq!(std::fs::read_to_string(busy.join("keep")).unwrap(), "x");
    assert!(temporaries(dir.path()).is_empty());
}
