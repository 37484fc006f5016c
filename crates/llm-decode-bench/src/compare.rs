//! `llm-decode-bench compare BASE.json NEW.json …`: reads the files, hands
//! them to `ldb_report::compare`, prints the chosen format and turns the
//! verdict into the exit code (0 no regression, 1 regression, 2 bad input).

use std::io::Write;

use ldb_report::compare::{CompareReport, Comparison, render_markdown, render_text, to_json};

use crate::cli::{CompareArgs, CompareFormat};
use crate::error::{AppError, exit, exit_with};

/// Runs the subcommand; the return value is the process exit code.
pub fn run(a: &CompareArgs) -> i32 {
    exit_with(compare(a))
}

fn compare(a: &CompareArgs) -> Result<i32, AppError> {
    if !a.threshold.is_finite() || a.threshold < 0.0 {
        return Err(AppError::config(format!(
            "invalid --threshold: {} (use a percentage of 0 or more, e.g. 5)",
            a.threshold
        )));
    }
    let names: Vec<String> = a.files.iter().map(|p| p.display().to_string()).collect();
    let docs = a
        .files
        .iter()
        .map(|p| ldb_report::load_result_file(p).map_err(AppError::config))
        .collect::<Result<Vec<_>, _>>()?;
    let (base_doc, new_docs) = docs
        .split_first()
        .ok_or_else(|| AppError::config("no files"))?;
    let comparisons: Vec<Comparison> = new_docs
        .iter()
        .zip(&names[1..])
        .map(|(doc, name)| Comparison::new((&names[0], base_doc), (name, doc), a.threshold))
        .collect();
    if !a.force
        && let Some(refusal) = comparisons.iter().find_map(Comparison::refusal)
    {
        return Err(AppError::Config(refusal));
    }
    let report = CompareReport {
        threshold_pct: a.threshold,
        forced: a.force,
        comparisons,
    };
    let text = match a.format {
        CompareFormat::Text => render_text(&report),
        CompareFormat::Markdown => render_markdown(&report),
        CompareFormat::Json => {
            let mut s = serde_json::to_string_pretty(&to_json(&report)).unwrap_or_default();
            s.push('\n');
            s
        }
    };
    // A closed pipe (`| head`) is not an error of the comparison.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(if report.has_regression() {
        exit::REGRESSION
    } else {
        exit::OK
    })
}
