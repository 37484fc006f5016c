//! Paired comparison of completion-stats results, file side: reading the two
//! result files and building the standalone comparison document. The
//! statistics are in `ldb_eval::paired`; the console text is
//! [`crate::text::render_paired`].

use std::path::Path;

use ldb_eval::paired::{Comparison, ResultRuns, compare};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
/// returned value under [`ldb_eval::paired::COMPARISON_KEY`] and print it with
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

/// `metadata` of the standalone comparison's file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedMetadata {
    /// This tool's version.
    pub version: String,
    /// Always `paired_comparison`.
    pub mode: String,
    /// When the comparison was made (local time).
    pub timestamp: String,
    /// The baseline file as given.
    pub baseline_path: String,
    /// The candidate file as given.
    pub candidate_path: String,
}

/// The file `--compare-baseline A --compare-candidate B --output F` writes
/// (through `export::Json`): `metadata`, then the comparison under
/// [`ldb_eval::paired::COMPARISON_KEY`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedDocument {
    /// What was compared, when, by which version.
    pub metadata: PairedMetadata,
    /// The comparison.
    pub comparison: Comparison,
}

/// The standalone comparison's document.
pub fn standalone_document(
    comparison: &Comparison,
    baseline_path: &Path,
    candidate_path: &Path,
    version: &str,
    timestamp: &str,
) -> PairedDocument {
    PairedDocument {
        metadata: PairedMetadata {
            version: version.into(),
            mode: "paired_comparison".into(),
            timestamp: timestamp.into(),
            baseline_path: baseline_path.display().to_string(),
            candidate_path: candidate_path.display().to_string(),
        },
        comparison: comparison.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{Exporter, Json};
    use ldb_eval::paired::{COMPARISON_KEY, RunRecord, Side};
    use serde_json::json;

    fn side(label: &str, correct: &[bool]) -> ResultRuns {
        ResultRuns {
            side: Side {
                label: label.into(),
                model: Some("m".into()),
                ..Side::default()
            },
            runs: correct
                .iter()
                .enumerate()
                .map(|(i, &c)| RunRecord {
                    item_id: format!("q{i}"),
                    correct: c,
                    completion_tokens: 100.0 + i as f64,
                    hit_max_tokens: false,
                    score_label: if c { "pass" } else { "fail" }.into(),
                    score_detail: String::new(),
                    category: None,
                })
                .collect(),
        }
    }

    /// The typed document writes the bytes the untyped one did, and reads
    /// back to itself.
    #[test]
    fn the_standalone_document_round_trips_in_the_files_layout() {
        let c = compare(
            &side("a.json", &[true, false, true, true]),
            &side("b.json", &[true, true, false, true]),
        );
        let doc = standalone_document(&c, "a.json".as_ref(), "b.json".as_ref(), "1.2.3", "t0");
        let before = json!({
            "metadata": {
                "version": "1.2.3",
                "mode": "paired_comparison",
                "timestamp": "t0",
                "baseline_path": "a.json",
                "candidate_path": "b.json",
            },
            COMPARISON_KEY: c,
        });
        let mut old = serde_json::to_string_pretty(&before).unwrap();
        old.push('\n');
        let bytes = Json.serialize(&doc).unwrap();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), old);
        let back: PairedDocument = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, doc);
    }
}
