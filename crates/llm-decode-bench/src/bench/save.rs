//! The benchmark's save hook (the result file after every fact, judged by
//! `--slo`, with the `--html` page rewritten after it) and the lines after
//! the report saying where the extra files went. Every file goes through
//! the report crate's exporters (`ldb_report::export`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ldb_core::document::ResultDocument;
use ldb_core::slo::SloSpec;
use ldb_report::export::{self, Run};
use ldb_runner::Live;

use crate::session::Saves;

/// `--html` on a run: where the page goes and how a failed write is told.
pub(crate) struct LiveHtml {
    pub(crate) path: PathBuf,
    /// The series name of this run in the page (the result file's stem).
    pub(crate) name: String,
    pub(crate) live: Live,
    pub(crate) show_capacity_limited_values: bool,
    /// The first failed write (told once in the event log, then at the end).
    pub(crate) error: Arc<Mutex<Option<String>>>,
}

impl LiveHtml {
    /// Writes the page for `doc`; a failure is a warning, never the run's end.
    fn write(&self, doc: &ResultDocument) {
        let runs = [Run {
            name: &self.name,
            doc,
        }];
        let html = export::Html::new(self.show_capacity_limited_values);
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        match export::write_atomic(&html, &runs, &self.path) {
            Ok(_) => *error = None,
            Err(e) => {
                if error.is_none() {
                    self.live
                        .event(format!("WARNING cannot write the HTML report: {e}"));
                }
                *error = Some(e.to_string());
            }
        }
    }
}

/// The runner's save hook: an atomic write of the result file under the
/// save lock (see `session::exit_now`). A failed save leaves the previous
/// file as it was; the first failure is kept for the exit code. With
/// `--slo`, each save judges a copy of the document, so a file read mid-run
/// carries the verdicts so far. With `--html`, the page is rewritten
/// (atomically too) after the JSON.
pub(crate) fn hook(
    output: PathBuf,
    saves: Saves,
    slo: Option<SloSpec>,
    html: Option<LiveHtml>,
) -> Box<dyn Fn(&ResultDocument) + Send + Sync> {
    Box::new(move |doc| {
        let judged = slo.as_ref().map(|spec| {
            let mut d = doc.clone();
            ldb_core::slo::evaluate(spec, &mut d);
            d
        });
        let doc = judged.as_ref().unwrap_or(doc);
        saves.write(|| {
            let runs = [Run { name: "", doc }];
            let saved = export::write_atomic(&export::Json, &runs, &output)
                .map(drop)
                .map_err(|e| e.to_string());
            if let Some(h) = &html {
                h.write(doc);
            }
            saved
        });
    })
}

/// After the report: where the HTML page and the request samples went, or
/// why they did not (a warning; the exit code does not change).
pub(crate) fn report_extras(
    html: Option<&Path>,
    requests_jsonl: Option<&Path>,
    doc: &ResultDocument,
    html_error: Option<&Mutex<Option<String>>>,
    out: &mut impl Write,
) {
    if let (Some(path), Some(err)) = (html, html_error) {
        match err.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
            None => {
                let _ = writeln!(out, "HTML report written to {}", path.display());
            }
            Some(e) => eprintln!("warning: the HTML report was not written: {e}"),
        }
    }
    if let Some(path) = requests_jsonl {
        match export::write_atomic(&export::Jsonl, &[Run { name: "", doc }], path) {
            Ok(n) => {
                // Replays add lines of their own (summary, turns, seconds).
                let what = if doc.trace_results.is_empty() && doc.session_results.is_empty() {
                    "request samples"
                } else {
                    "lines (request samples and replays)"
                };
                let _ = writeln!(out, "{n} {what} written to {}", path.display());
            }
            Err(e) => eprintln!("warning: the request samples were not written: {e}"),
        }
    }
}
