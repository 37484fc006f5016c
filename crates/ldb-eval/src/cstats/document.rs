//! The completion-stats result document (docs/result-json.md, "Completion
//! statistics"): run settings, every run, and the summaries derived from
//! them. [`CsDocument::derive`] recomputes every derived key from `runs`
//! and `level_summaries`, so a document saved mid-run is as consistent as
//! the final one.

use ldb_core::hardware::HardwareSummary;
use ldb_core::hardware::p2p::P2pOverride;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::run::{CsRun, Phase};
use super::summary::{RunSummary, summarize_runs};
use crate::stats::{Z95, wilson_interval};

/// `metadata`: what was run, against what, with which settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CsMetadata {
    /// This tool's version.
    pub version: String,
    /// Always `completion_stats`.
    pub mode: String,
    /// The run was stopped early (q, Ctrl-C, SIGTERM) or has not finished yet.
    pub interrupted: bool,
    /// Base URL of the server (credentials removed).
    pub server: String,
    /// Engine detected (`sglang`, `vllm`, `llamacpp`, `openai_proxy`, …).
    pub engine: String,
    /// Engine version, when reported.
    pub server_version: Option<String>,
    /// KV-cache budget in tokens, when known.
    pub kv_budget: Option<u64>,
    /// Where the KV budget came from.
    pub kv_source: Option<String>,
    /// The server's running-request cap, when reported.
    pub max_running_requests: Option<u64>,
    /// Model measured.
    pub model: String,
    /// Models the server listed.
    pub models: Vec<String>,
    /// Profile name, or `""` for a custom prompt.
    pub test_profile: String,
    /// One line on what the task measures.
    pub test_profile_description: String,
    /// `profile:<name>`, `file:<path>`, `stdin` or `inline --prompt`.
    pub prompt_source: String,
    /// Characters of the (first) prompt.
    pub prompt_chars: usize,
    /// Start time, RFC 3339 UTC.
    pub timestamp: String,
    /// `--api`: the request API the runs spoke (absent in files written
    /// before the key existed: those spoke `chat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The output-token limit sent; `None` when the field is omitted.
    pub max_tokens: Option<u64>,
    /// The request field carrying the limit (`max_tokens`;
    /// `max_output_tokens` on the Responses API).
    pub token_limit_field: String,
    /// No token limit was sent.
    pub max_tokens_omitted: bool,
    /// Fixed concurrency, or `None` for the adaptive search.
    pub fixed_concurrency: Option<usize>,
    /// Requested measured runs (0: min-results decides).
    pub requested_runs: usize,
    /// Adaptive probe levels after normalization.
    pub concurrency_levels_requested: Vec<usize>,
    /// Completed runs wanted at the selected concurrency.
    pub min_results: usize,
    /// Probe size multiplier.
    pub probe_waves: usize,
    /// Whether patience stops the probe.
    pub auto_stop: bool,
    /// Relative gain that counts as an improvement.
    pub min_improvement: f64,
    /// Non-improving levels tolerated.
    pub patience: usize,
    /// The regex of the generic scorer (`""`: none).
    pub correct_regex: String,
    /// Where the scorer reads the answer.
    pub score_source: String,
    /// Scorer name (`regex`, a profile's scorer) or `""`.
    pub profile_scorer: String,
    /// The expected answer of a single-prompt task, when known.
    pub expected_answer: Option<String>,
    /// Tolerance band of a numeric scorer, when it has one.
    pub approx_tolerance: Option<f64>,
    /// Rows of the dataset file (datasets only).
    pub dataset_rows: Option<usize>,
    /// sha256 of the dataset file.
    pub dataset_sha256: Option<String>,
    /// Dataset name.
    pub dataset: Option<String>,
    /// Dataset file path.
    pub dataset_path: Option<String>,
    /// Where the dataset file came from.
    pub dataset_source: Option<String>,
    /// Items in the dataset.
    pub dataset_items_total: Option<usize>,
    /// Items this run could use.
    pub dataset_items_selected: Option<usize>,
    /// sha256 of the (first) prompt, hex.
    pub prompt_sha256: String,
    /// A prefill scout was sent.
    pub prefill_scout: bool,
    /// `temperature` sent, if any.
    pub temperature: Option<f64>,
    /// `top_p` sent, if any.
    pub top_p: Option<f64>,
    /// Extra request fields of the task.
    pub request_overrides: Map<String, Value>,
    /// A system message was sent.
    pub system_prompt: bool,
    /// The NVIDIA P2P override check's verdict, when it ran.
    pub nvidia_p2p_override_effective: Option<bool>,
    /// Fabric diagnostics are not part of this tool: always `not_run`.
    pub p2pmark_status: String,
    /// As `p2pmark_status`.
    pub amd_fabric_status: String,
}

/// One probed or collected level (`level_summaries[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    /// Concurrency.
    pub concurrency: usize,
    /// `profile`, `probe` or `collect`.
    pub phase: Phase,
    /// Summary of this level's runs.
    pub summary: RunSummary,
    /// This is the level the run selected.
    pub selected: bool,
    /// The level beat the best before it (adaptive only).
    pub improved: bool,
}

/// `accuracy` (tasks with a dataset).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Items in the dataset.
    pub items_total: usize,
    /// Items this run could use.
    pub items_selected: usize,
    /// Measured requests sent.
    pub attempted: usize,
    /// Completed runs with a verdict.
    pub scored: usize,
    /// Of those, correct.
    pub correct: usize,
    /// `correct / scored` (0 when nothing was scored).
    pub accuracy: f64,
    /// Wilson 95 % interval, low end.
    pub wilson95_low: f64,
    /// Wilson 95 % interval, high end.
    pub wilson95_high: f64,
    /// Runs whose answer could not be parsed (detail `unparseable`).
    pub unparseable: usize,
    /// Runs labelled `truncated` (no answer before `max_tokens`).
    pub truncated_no_answer: usize,
    /// Runs that stopped at `max_tokens`.
    pub hit_max_tokens: usize,
    /// Failed requests.
    pub errors: usize,
    /// The run stopped because every selected item was used.
    pub dataset_exhausted: bool,
}

/// One row of `category_summaries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategorySummary {
    /// Category name.
    pub category: String,
    /// Scored runs.
    pub scored: usize,
    /// Correct runs.
    pub correct: usize,
    /// `correct / scored`.
    pub accuracy: f64,
}

/// `methodology`: how the numbers were made, in words.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CsMethodology {
    /// Name of the method.
    pub name: String,
    /// The prefill scout.
    pub prefill: String,
    /// The concurrency search.
    pub adaptive_concurrency: String,
    /// The token statistics.
    pub token_need: String,
    /// Scoring.
    pub correctness: String,
}

/// The whole completion-stats result file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CsDocument {
    /// Settings and server.
    pub metadata: CsMetadata,
    /// The NVIDIA P2P override check (same object as decode results;
    /// `null` when it did not run, and `{}` in a file reads the same).
    #[serde(default, deserialize_with = "ldb_core::document::none_if_empty")]
    pub nvidia_p2p_override: Option<P2pOverride>,
    /// Fabric diagnostics: not run by this mode (`null`, read as `None`).
    pub p2pmark: Option<ldb_core::document::FabricBlock>,
    /// As `p2pmark`.
    pub amd_fabric: Option<ldb_core::document::FabricBlock>,
    /// The scout request, if one was sent.
    pub prefill_scout: Option<CsRun>,
    /// Concurrency the statistics are reported at.
    pub selected_concurrency: Option<usize>,
    /// Summary of the runs at the selected concurrency.
    pub selected_summary: Option<RunSummary>,
    /// Summary of every measured run (scout excluded).
    pub all_summary: RunSummary,
    /// Each batch level, in the order run.
    pub level_summaries: Vec<LevelSummary>,
    /// Accuracy over the dataset items (dataset tasks), else `None`.
    pub accuracy: Option<Accuracy>,
    /// Accuracy per category (tasks with categories).
    pub category_summaries: Vec<CategorySummary>,
    /// Runs at the selected concurrency that were wrong or failed.
    pub wrong_runs: Vec<CsRun>,
    /// Hardware over the whole run (`null` without a sampler).
    #[serde(default)]
    pub hardware_run_summary: Option<HardwareSummary>,
    /// Every measured run, in the order they finished.
    pub runs: Vec<CsRun>,
    /// The method in words.
    pub methodology: CsMethodology,
    /// The paired comparison with `--compare-baseline`, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::paired::Comparison>,
}

impl CsDocument {
    /// Recompute the summaries, `wrong_runs`, `accuracy` and categories from
    /// `runs` and `selected_concurrency`. `dataset` is `(items_total,
    /// items_selected, exhausted)` for dataset tasks.
    pub fn derive(&mut self, dataset: Option<(usize, usize, bool)>) {
        self.all_summary = summarize_runs(&self.runs);
        let sel = self.selected_concurrency;
        let at_selected: Vec<&CsRun> = self
            .runs
            .iter()
            .filter(|r| Some(r.concurrency) == sel)
            .collect();
        self.selected_summary = sel.map(|_| summarize_runs(at_selected.iter().copied()));
        self.wrong_runs = at_selected
            .iter()
            .filter(|r| r.wrong_or_failed())
            .map(|r| (*r).clone())
            .collect();
        for l in &mut self.level_summaries {
            l.selected = Some(l.concurrency) == sel;
        }
        self.accuracy = dataset.map(|(total, selected, exhausted)| {
            accuracy_of(&self.runs, total, selected, exhausted)
        });
        self.category_summaries = categories(&self.runs);
    }
}

fn accuracy_of(runs: &[CsRun], total: usize, selected: usize, exhausted: bool) -> Accuracy {
    let scored: Vec<&CsRun> = runs
        .iter()
        .filter(|r| r.completed() && r.correct.is_some())
        .collect();
    let correct = scored.iter().filter(|r| r.correct == Some(true)).count();
    let (lo, hi) = wilson_interval(correct as u64, scored.len() as u64, Z95);
    Accuracy {
        items_total: total,
        items_selected: selected,
        attempted: runs.len(),
        scored: scored.len(),
        correct,
        accuracy: if scored.is_empty() {
            0.0
        } else {
            correct as f64 / scored.len() as f64
        },
        wilson95_low: lo,
        wilson95_high: hi,
        unparseable: runs
            .iter()
            .filter(|r| r.score_detail == "unparseable")
            .count(),
        truncated_no_answer: runs
            .iter()
            .filter(|r| r.score_label.as_deref() == Some("truncated"))
            .count(),
        hit_max_tokens: runs.iter().filter(|r| r.hit_max_tokens).count(),
        errors: runs.iter().filter(|r| !r.ok && !r.cancelled).count(),
        dataset_exhausted: exhausted,
    }
}

fn categories(runs: &[CsRun]) -> Vec<CategorySummary> {
    let mut by: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for r in runs.iter().filter(|r| r.completed()) {
        if let (Some(c), Some(ok)) = (r.category.as_deref(), r.correct) {
            let e = by.entry(c).or_default();
            e.0 += 1;
            e.1 += usize::from(ok);
        }
    }
    by.into_iter()
        .map(|(category, (scored, correct))| CategorySummary {
            category: category.to_owned(),
            scored,
            correct,
            accuracy: correct as f64 / scored as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cstats::summary::tests::run;

    #[test]
    fn derive_selects_and_scores() {
        let mut a = run(10, 1.0, 1.5, Some("pass"));
        a.concurrency = 2;
        a.category = Some("math".into());
        let mut b = run(20, 1.0, 1.5, Some("fail"));
        b.concurrency = 2;
        b.category = Some("math".into());
        let c = run(30, 1.0, 1.5, Some("fail"));
        let mut doc = CsDocument {
            runs: vec![a, b, c],
            selected_concurrency: Some(2),
            ..CsDocument::default()
        };
        doc.derive(Some((100, 3, true)));
        assert_eq!(doc.selected_summary.as_ref().unwrap().completed, 2);
        assert_eq!(doc.all_summary.completed, 3);
        assert_eq!(doc.wrong_runs.len(), 1);
        let acc = doc.accuracy.clone().unwrap();
        assert_eq!(
            (acc.scored, acc.correct, acc.dataset_exhausted),
            (3, 1, true)
        );
        assert!(acc.wilson95_low < 1.0 / 3.0 && acc.wilson95_high > 1.0 / 3.0);
        assert_eq!(doc.category_summaries.len(), 1);
        assert_eq!(doc.category_summaries[0].scored, 2);
        let json = serde_json::to_value(&doc).unwrap();
        assert!(json.get("comparison").is_none());
        assert!(json["accuracy"].is_object());
    }

    #[test]
    fn typed_blocks_keep_the_files_layout() {
        // A run without the P2P check or a sampler writes both as null, and
        // an older file's `{}` reads the same.
        let json = serde_json::to_value(CsDocument::default()).unwrap();
        assert!(json["nvidia_p2p_override"].is_null());
        assert!(json["hardware_run_summary"].is_null());
        let mut older = json.clone();
        older["nvidia_p2p_override"] = serde_json::json!({});
        let doc: CsDocument = serde_json::from_value(older).unwrap();
        assert_eq!(doc.nvidia_p2p_override, None);
        // An embedded comparison that could not be made reads back whole.
        let mut with = json;
        with["comparison"] = serde_json::json!({
            "baseline": {"label": "a", "model": "m", "server": null, "engine": "vllm", "timestamp": null, "test_profile": "p", "dataset": "d", "dataset_sha256": null, "temperature": null, "max_tokens": null},
            "candidate": {"label": "b", "model": "m", "server": null, "engine": "vllm", "timestamp": null, "test_profile": "p", "dataset": "d", "dataset_sha256": null, "temperature": null, "max_tokens": null},
            "paired_items": 0, "baseline_scored_items": 3, "candidate_scored_items": 0,
            "profile_match": true, "dataset_match": true,
            "error": "no item was scored on both sides"
        });
        let doc: CsDocument = serde_json::from_value(with.clone()).unwrap();
        let c = doc.comparison.as_ref().expect("comparison");
        assert_eq!(c.error.as_deref(), Some("no item was scored on both sides"));
        assert!(c.result.is_none());
        assert_eq!(serde_json::to_value(&doc).unwrap(), with);
    }
}
