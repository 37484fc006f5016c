//! `llm-decode-bench report RESULT.json [MORE.json…] [--csv FILE] [--markdown FILE]
//! [--html FILE] [--requests-jsonl FILE] [--slo SPEC]`: the final report of a
//! saved run, and its CSV, Markdown, HTML and request-sample forms, judged
//! against `--slo` targets when given (the files themselves are not changed).
//! Several files make one HTML page that overlays their curves. `--timeline
//! CELL` prints one cell's per-second timeline instead.

use std::io::{IsTerminal, Write};
use std::path::Path;

use ldb_report::export::{self, Exporter, Format, Run};
use ldb_report::fabric_only::FabricOnlyDocument;

use crate::cli::ReportArgs;
use crate::error::{AppError, exit, exit_with};

/// Runs the subcommand; the return value is the process exit code.
pub fn run(a: &ReportArgs) -> i32 {
    exit_with(report(a))
}

fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

fn report(a: &ReportArgs) -> Result<i32, AppError> {
    let to_stdout = |p: &Option<std::path::PathBuf>| p.as_deref().is_some_and(is_stdout);
    let stdout_users = [
        ("--csv", &a.csv),
        ("--markdown", &a.markdown),
        ("--requests-jsonl", &a.requests_jsonl),
    ]
    .into_iter()
    .filter(|(_, p)| to_stdout(p))
    .map(|(f, _)| format!("{f} -"))
    .collect::<Vec<_>>();
    if stdout_users.len() > 1 {
        return Err(AppError::config(format!(
            "{} all ask for stdout; write all but one of them to a file",
            stdout_users.join(" and ")
        )));
    }
    if to_stdout(&a.html) {
        return Err(AppError::config(
            "--html needs a file name (a browser opens a file, not stdout)",
        ));
    }
    if a.timeline.is_some() && (a.results.len() > 1 || !stdout_users.is_empty()) {
        return Err(AppError::config(
            "--timeline prints one cell of one result file to stdout; give one RESULT and no \
             other output on stdout",
        ));
    }
    if a.results.len() > 1
        && (a.html.is_none()
            || a.csv.is_some()
            || a.markdown.is_some()
            || a.requests_jsonl.is_some())
    {
        return Err(AppError::config(
            "several result files make one --html page; the text report, --csv, --markdown and \
             --requests-jsonl take one file (use compare to set runs side by side)",
        ));
    }
    if let [one] = a.results.as_slice()
        && let Some(doc) = fabric_only_file(one)
    {
        print_fabric(&doc.p2pmark, &doc.amd_fabric);
        return Ok(exit::OK);
    }
    let slo = crate::app::parse_slo(a.slo.as_deref(), a.slo_preset.as_deref())?;
    let mut docs = Vec::with_capacity(a.results.len());
    for path in &a.results {
        let mut doc = ldb_report::load_result_file(path).map_err(AppError::config)?;
        if let Some(spec) = &slo {
            ldb_core::slo::evaluate(spec, &mut doc);
        }
        docs.push(doc);
    }
    let names: Vec<String> = a
        .results
        .iter()
        .map(|p| ldb_report::html::name_of(p))
        .collect();
    let runs: Vec<Run<'_>> = names
        .iter()
        .zip(&docs)
        .map(|(name, doc)| Run { name, doc })
        .collect();
    if let Some(path) = &a.html {
        let html = export::Html::new(a.show_capacity_limited_values);
        export::write_atomic(&html, runs.as_slice(), path)
            .map_err(|e| AppError::Output(format!("{}: {e}", html.format())))?;
    }
    let [run] = runs.as_slice() else {
        return Ok(exit::OK);
    };
    if let Some(name) = &a.timeline {
        return print_timeline(run.doc, name);
    }
    export_one(a, run)?;
    // stdout carries the text report unless an export was asked for there.
    if stdout_users.is_empty() {
        let text = export::Text(ldb_report::text::TextOptions {
            width: crate::app::terminal_width(),
            show_capacity_limited_values: a.show_capacity_limited_values
                || run.doc.metadata.show_capacity_limited_values,
            color: std::io::stdout().is_terminal(),
        });
        let _ = export::write_to(
            &text,
            std::slice::from_ref(run),
            &mut std::io::stdout().lock(),
        );
        print_fabric(&run.doc.p2pmark, &run.doc.amd_fabric);
    }
    Ok(exit::OK)
}

/// `--timeline CELL`: the cell's timeline on stdout instead of the report;
/// a name that is no cell with a timeline is exit 2, listing those that are.
fn print_timeline(doc: &ldb_core::document::ResultDocument, name: &str) -> Result<i32, AppError> {
    let cell = ldb_report::timeline::find_cell(doc, name).map_err(AppError::config)?;
    if let Some(t) = &cell.ext.timeline {
        let text = ldb_report::timeline::render(cell, t);
        // A closed pipe is not a failure of the report.
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    }
    Ok(exit::OK)
}

/// `--requests-jsonl`, `--csv` and `--markdown` of one result, each to its
/// file or to stdout (`-`).
fn export_one(a: &ReportArgs, run: &Run<'_>) -> Result<(), AppError> {
    let runs = std::slice::from_ref(run);
    if let Some(path) = &a.requests_jsonl {
        if is_stdout(path) {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            // A closed pipe is not a failure of the report.
            let _ = export::write_to(&export::Jsonl, runs, &mut out);
        } else {
            export::write_atomic(&export::Jsonl, runs, path)
                .map_err(|e| AppError::Output(format!("{}: {e}", export::Jsonl.format())))?;
        }
    }
    let files: [(&Option<std::path::PathBuf>, &dyn Exporter<[Run<'_>]>); 2] =
        [(&a.csv, &export::Csv), (&a.markdown, &export::Markdown)];
    for (path, exporter) in files {
        let Some(path) = path else { continue };
        if is_stdout(path) {
            let bytes = exporter.serialize(runs).map_err(|e| {
                AppError::Output(format!("cannot write the {}: {e}", exporter.format()))
            })?;
            // A closed pipe is not a failure of the report.
            let _ = std::io::stdout().lock().write_all(&bytes);
        } else {
            // Atomic like every other file the tool writes: a reader (or a
            // killed report) never sees half a CSV.
            export::write_atomic(exporter, runs, path).map_err(|e| {
                AppError::Output(format!(
                    "cannot write the {} file {}: {e}",
                    exporter.format(),
                    path.display()
                ))
            })?;
        }
    }
    Ok(())
}

/// A fabric-only file (`--…-only`), or `None` for any other file (which
/// the result loader then reads or refuses).
fn fabric_only_file(path: &Path) -> Option<FabricOnlyDocument> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    FabricOnlyDocument::from_file_value(&v)
}

/// The fabric diagnostics' report (nothing for blocks not run): printed
/// before a run, and after the matrix for a saved result.
fn print_fabric(
    p2pmark: &ldb_core::document::FabricBlock,
    amd_fabric: &ldb_core::document::FabricBlock,
) {
    let opts = ldb_report::text::fabric::FabricTextOptions {
        width: crate::app::terminal_width(),
        p2p_detail: false,
        cpu_detail: false,
    };
    let text = ldb_report::text::fabric::render(p2pmark, amd_fabric, &opts);
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
