//! Paired comparison of completion-stats results, file side: reading the two
//! result files and building the standalone comparison document. The
//! statistics are in `ldb_eval::paired`; the console text is
//! [`crate::text::render_paired`].

use std::path::Path;

use ldb_eval::paired::{COMPARISON_KEY, Comparison, ResultRuns, compare};
use serde_json::{Value, json};

/// Read a completion-stats result file for pairing; the error is one line
/// naming the file.
pub fn load_runs(path: &Path) -> Result<ResultRuns, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a JSON document ({e})", path.display()))?;
    ResultRuns::from_json(&doc, &path.display().to_string())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What a completion-stats run calls after it finished with
/// `--compare-baseline FILE`: pair `current` (the run's own result
/// document, labelled `current_label`) against the baseline file. Embed the
/// returned value under [`COMPARISON_KEY`] and print it with
/// [`crate::text::render_paired`]. A comparison without common items is
/// still returned (it carries `error`); only an unreadable baseline is `Err`.
pub fn compare_with_baseline(
    baseline: &Path,
    current: &Value,
    current_label: &str,
) -> Result<Comparison, String> {
    let a = load_runs(baseline)?;
    let b = ResultRuns::from_json(current, current_label)
        .map_err(|e| format!("{current_label}: {e}"))?;
    Ok(compare(&a, &b))
}

/// The document `--compare-baseline A --compare-candidate B --output F`
/// writes: `metadata` {version, mode, timestamp, baseline_path,
/// candidate_path} and the comparison.
pub fn standalone_document(
    comparison: &Comparison,
    baseline_path: &Path,
    candidate_path: &Path,
    version: &str,
    timestamp: &str,
) -> Value {
    json!({
        "metadata": {
            "version": version,
            "mode": "paired_comparison",
            "timestamp": timestamp,
            "baseline_path": baseline_path.display().to_string(),
            "candidate_path": candidate_path.display().to_string(),
        },
        COMPARISON_KEY: comparison,
    })
}
