//! `llm-decode-bench report RESULT.json [--csv FILE] [--markdown FILE] [--slo SPEC]`:
//! the final report of a saved run, and its CSV and Markdown forms, judged
//! against `--slo` targets when given (the file itself is not changed).

use std::io::{IsTerminal, Write};
use std::path::Path;

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
    if to_stdout(&a.csv) && to_stdout(&a.markdown) {
        return Err(AppError::config(
            "--csv - and --markdown - both ask for stdout; write one of them to a file",
        ));
    }
    let slo = crate::app::parse_slo(a.slo.as_deref())?;
    let mut doc = ldb_report::load_result_file(&a.result).map_err(AppError::config)?;
    if let Some(spec) = &slo {
        ldb_core::slo::evaluate(spec, &mut doc);
    }
    if let Some(path) = &a.csv {
        let mut buf = Vec::new();
        ldb_report::csv::write(&doc, &mut buf)
            .map_err(|e| AppError::Output(format!("cannot write the CSV: {e}")))?;
        emit(path, &buf, "CSV")?;
    }
    if let Some(path) = &a.markdown {
        emit(
            path,
            ldb_report::markdown::render(&doc).as_bytes(),
            "Markdown",
        )?;
    }
    // stdout carries the text report unless an export was asked for there.
    if !to_stdout(&a.csv) && !to_stdout(&a.markdown) {
        let opts = ldb_report::text::TextOptions {
            width: crate::app::terminal_width(),
            show_capacity_limited_values: a.show_capacity_limited_values
                || doc.metadata.show_capacity_limited_values,
            color: std::io::stdout().is_terminal(),
        };
        let _ = ldb_report::text::render(&doc, &opts, &mut std::io::stdout().lock());
    }
    Ok(exit::OK)
}

/// Writes `bytes` to the file, or to stdout for `-`.
fn emit(path: &Path, bytes: &[u8], what: &str) -> Result<(), AppError> {
    if is_stdout(path) {
        // A closed pipe is not a failure of the report.
        let _ = std::io::stdout().lock().write_all(bytes);
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| {
        AppError::Output(format!(
            "cannot write the {what} file {}: {e}",
            path.display()
        ))
    })
}
