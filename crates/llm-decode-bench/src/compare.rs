//! `llm-decode-bench compare BASE.json NEW.json …`: reads the files, hands
//! them to `ldb_report::compare`, prints the chosen format and turns the
//! verdict into the exit code (0 no regression, 1 regression, 2 bad input).

use std::io::Write;

use ldb_report::compare::fabric::{
    FabricCompareOutput, FabricRowOut, FabricRunOut, compare_fabric, render_fabric_text,
};
use ldb_report::compare::interference::{compare_interference, render_interference_text};
use ldb_report::compare::{CompareReport, Comparison};
use ldb_report::export::{self, Exporter};
use ldb_report::fabric_only::FabricOnlyDocument;

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
    let raw: Vec<serde_json::Value> = a
        .files
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default()
        })
        .collect();
    if raw.iter().all(is_fabric_only) {
        return compare_fabric_only(a, &names, &raw);
    }
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
    // The comparison's text takes no options of the text report.
    let text = export::Text(Default::default());
    let exporter: &dyn Exporter<CompareReport> = match a.format {
        CompareFormat::Text => &text,
        CompareFormat::Markdown => &export::Markdown,
        CompareFormat::Json => &export::Json,
    };
    // A closed pipe (`| head`) is not an error of the comparison.
    let _ = export::write_to(exporter, &report, &mut std::io::stdout().lock());
    // The interference probes, when either run has one (text forms only).
    for (doc, name) in new_docs.iter().zip(&names[1..]) {
        let rows = compare_interference(base_doc, doc);
        if !rows.is_empty() && a.format != CompareFormat::Json {
            let _ = writeln!(std::io::stdout(), "\n{name} vs {}", names[0]);
            let _ = std::io::stdout().write_all(render_interference_text(&rows).as_bytes());
        }
    }
    // The fabric blocks, when both runs measured them (text forms only).
    let mut fabric_regressed = false;
    for (new, name) in raw[1..].iter().zip(&names[1..]) {
        let rows = compare_fabric(&raw[0], new, a.threshold);
        fabric_regressed |= rows.iter().any(|r| r.regressed);
        if !rows.is_empty() && a.format != CompareFormat::Json {
            let _ = writeln!(std::io::stdout(), "\n{name} vs {}", names[0]);
            let _ = std::io::stdout().write_all(render_fabric_text(&rows, a.threshold).as_bytes());
        }
    }
    Ok(if report.has_regression() || fabric_regressed {
        exit::REGRESSION
    } else {
        exit::OK
    })
}

/// A fabric-only file (`--p2pmark-only`, `--amd-fabric-only`).
fn is_fabric_only(v: &serde_json::Value) -> bool {
    v["metadata"]["mode"]
        .as_str()
        .is_some_and(FabricOnlyDocument::is_fabric_only_mode)
}

/// Fabric-only files: each new run's fabric blocks against the base's.
fn compare_fabric_only(
    a: &CompareArgs,
    names: &[String],
    raw: &[serde_json::Value],
) -> Result<i32, AppError> {
    let mut out = String::new();
    let mut regressed = false;
    let mut json_runs = Vec::new();
    for (new, name) in raw[1..].iter().zip(&names[1..]) {
        let rows = compare_fabric(&raw[0], new, a.threshold);
        if rows.is_empty() {
            return Err(AppError::Config(format!(
                "{name}: no fabric block is ok in both {} and {name}; nothing to compare",
                names[0]
            )));
        }
        regressed |= rows.iter().any(|r| r.regressed);
        out.push_str(&format!("{name} vs {}\n", names[0]));
        out.push_str(&render_fabric_text(&rows, a.threshold));
        json_runs.push(FabricRunOut {
            base: names[0].clone(),
            new: name.clone(),
            rows: rows.iter().map(FabricRowOut::from).collect(),
        });
    }
    let mut stdout = std::io::stdout().lock();
    if a.format == CompareFormat::Json {
        let doc = FabricCompareOutput {
            threshold_pct: a.threshold,
            fabric: json_runs,
        };
        let _ = export::write_to(&export::Json, &doc, &mut stdout);
    } else {
        let _ = stdout.write_all(out.as_bytes());
    }
    Ok(if regressed {
        exit::REGRESSION
    } else {
        exit::OK
    })
}
