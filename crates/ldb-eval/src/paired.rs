//! Paired A/B comparison of two completion-stats results: the same items
//! answered by a baseline and a candidate (another model, quantisation,
//! engine build, …). Pairing by item removes the item-difficulty variance
//! that makes two independent accuracies hard to compare; the exact McNemar
//! test then asks whether the discordant items lean one way.
//!
//! Runs are read leniently from the result JSON (`runs[]` with `item_id`,
//! `correct`, `completion_tokens`, `hit_max_tokens`, `score_label`,
//! `score_detail`, `category`), so results of older or foreign versions pair
//! as long as those keys are present.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::stats::{Z95, mcnemar_exact_p, wilson_interval};
use ldb_core::stats::percentile_sorted;

/// At most this many flipped item ids are listed per direction.
pub const MAX_FLIP_IDS: usize = 100;

/// The JSON key of the comparison in a completion-stats result.
pub const COMPARISON_KEY: &str = "comparison";

/// One scored run as the comparison needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Item the run answered.
    pub item_id: String,
    /// Scorer verdict.
    pub correct: bool,
    /// Completion tokens (0 when unknown).
    pub completion_tokens: f64,
    /// Whether the output hit `max_tokens`.
    pub hit_max_tokens: bool,
    /// `score_label`.
    pub score_label: String,
    /// `score_detail`.
    pub score_detail: String,
    /// Dataset category, if any.
    pub category: Option<String>,
}

/// The description of one side, from its result's `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Who this side is in the report (the file path by default).
    pub label: String,
    /// `metadata.model`.
    pub model: Option<String>,
    /// `metadata.server`.
    pub server: Option<String>,
    /// `metadata.engine`.
    pub engine: Option<String>,
    /// `metadata.timestamp`.
    pub timestamp: Option<String>,
    /// `metadata.test_profile`.
    pub test_profile: Option<String>,
    /// `metadata.dataset`.
    pub dataset: Option<String>,
    /// `metadata.dataset_sha256`.
    pub dataset_sha256: Option<String>,
    /// `metadata.temperature`.
    pub temperature: Option<f64>,
    /// `metadata.max_tokens`.
    pub max_tokens: Option<u64>,
}

/// A completion-stats result reduced to what pairing needs.
#[derive(Debug, Clone, Default)]
pub struct ResultRuns {
    /// Side description.
    pub side: Side,
    /// Scored runs with an item id, in file order.
    pub runs: Vec<RunRecord>,
}

/// Why a document cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairedInputError {
    /// Not a JSON object with a `runs` array.
    #[error("not a completion-stats result (no \"runs\" array)")]
    NotAResult,
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl ResultRuns {
    /// Read a completion-stats result document. Runs without an `item_id` or
    /// with a null `correct` (unscored, failed) are skipped.
    pub fn from_json(doc: &Value, label: &str) -> Result<ResultRuns, PairedInputError> {
        let runs = doc
            .get("runs")
            .and_then(Value::as_array)
            .ok_or(PairedInputError::NotAResult)?;
        let meta = doc.get("metadata").cloned().unwrap_or(Value::Null);
        let side = Side {
            label: label.to_owned(),
            model: text(&meta, "model"),
            server: text(&meta, "server"),
            engine: text(&meta, "engine"),
            timestamp: text(&meta, "timestamp"),
            test_profile: text(&meta, "test_profile").filter(|s| !s.is_empty()),
            dataset: text(&meta, "dataset").filter(|s| !s.is_empty()),
            dataset_sha256: text(&meta, "dataset_sha256").filter(|s| !s.is_empty()),
            temperature: meta.get("temperature").and_then(Value::as_f64),
            max_tokens: meta.get("max_tokens").and_then(Value::as_u64),
        };
        let runs = runs
            .iter()
            .filter_map(|r| {
                Some(RunRecord {
                    item_id: text(r, "item_id").filter(|s| !s.is_empty())?,
                    correct: r.get("correct")?.as_bool()?,
                    completion_tokens: r
                        .get("completion_tokens")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                    hit_max_tokens: r
                        .get("hit_max_tokens")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    score_label: text(r, "score_label").unwrap_or_default(),
                    score_detail: text(r, "score_detail").unwrap_or_default(),
                    category: text(r, "category").filter(|s| !s.is_empty()),
                })
            })
            .collect();
        Ok(ResultRuns { side, runs })
    }
}

/// A pair of numbers, one per side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PerSide {
    /// Baseline count.
    pub baseline: u64,
    /// Candidate count.
    pub candidate: u64,
}

/// Flipped item ids, sorted, at most [`MAX_FLIP_IDS`] each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlipIds {
    /// Items only the baseline answered correctly.
    pub baseline_only_correct: Vec<String>,
    /// Items only the candidate answered correctly.
    pub candidate_only_correct: Vec<String>,
}

/// Completion tokens of the paired runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenComparison {
    /// Mean over the baseline's paired runs.
    pub baseline_mean: f64,
    /// Mean over the candidate's paired runs.
    pub candidate_mean: f64,
    /// Median, baseline.
    pub baseline_p50: f64,
    /// Median, candidate.
    pub candidate_p50: f64,
    /// 90th percentile, baseline.
    pub baseline_p90: f64,
    /// 90th percentile, candidate.
    pub candidate_p90: f64,
    /// candidate_mean / baseline_mean; null when the baseline mean is 0.
    pub ratio_mean: Option<f64>,
}

/// One category's paired accuracy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CategoryComparison {
    /// Category name.
    pub category: String,
    /// Paired items in it.
    pub paired: u64,
    /// Baseline correct.
    pub baseline_correct: u64,
    /// Candidate correct.
    pub candidate_correct: u64,
    /// Baseline accuracy (0–1).
    pub baseline_accuracy: f64,
    /// Candidate accuracy (0–1).
    pub candidate_accuracy: f64,
    /// (candidate − baseline) accuracy in percentage points.
    pub delta_pp: f64,
}

/// The `comparison` object (JSON key names as documented in
/// docs/completion-stats.md). When nothing pairs, only the sides, the
/// counts, the match flags and `error` are present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Baseline description.
    pub baseline: Side,
    /// Candidate description.
    pub candidate: Side,
    /// Items scored on both sides.
    pub paired_items: u64,
    /// Distinct scored items in the baseline.
    pub baseline_scored_items: u64,
    /// Distinct scored items in the candidate.
    pub candidate_scored_items: u64,
    /// Same `test_profile` on both sides.
    pub profile_match: bool,
    /// Same dataset (sha256 when both have one, else name).
    pub dataset_match: bool,
    /// Why no comparison was made (no common items).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The paired statistics; absent with `error`.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub result: Option<PairedStats>,
}

/// The statistics of a comparison that has common items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairedStats {
    /// Baseline correct among paired items.
    pub baseline_correct: u64,
    /// Candidate correct among paired items.
    pub candidate_correct: u64,
    /// Baseline accuracy (0–1).
    pub baseline_accuracy: f64,
    /// Candidate accuracy (0–1).
    pub candidate_accuracy: f64,
    /// Wilson 95% interval of the baseline accuracy, [lo, hi].
    pub baseline_wilson95: [f64; 2],
    /// Wilson 95% interval of the candidate accuracy.
    pub candidate_wilson95: [f64; 2],
    /// (candidate − baseline) accuracy in percentage points.
    pub delta_pp: f64,
    /// Discordant items the baseline got right (b).
    pub flips_baseline_only_correct: u64,
    /// Discordant items the candidate got right (c).
    pub flips_candidate_only_correct: u64,
    /// Their ids.
    pub flip_item_ids: FlipIds,
    /// Exact two-sided McNemar p-value on b and c.
    pub mcnemar_exact_p: f64,
    /// `mcnemar_exact_p < 0.05`.
    pub significant_at_0_05: bool,
    /// Completion tokens of the paired runs.
    pub completion_tokens: TokenComparison,
    /// Paired runs that hit `max_tokens`.
    pub hit_max_tokens: PerSide,
    /// Paired runs whose answer could not be parsed.
    pub unparseable: PerSide,
    /// Paired runs with no answer because they hit `max_tokens`.
    pub truncated_no_answer: PerSide,
    /// Per category, worst delta first.
    pub per_category: Vec<CategoryComparison>,
}

fn last_per_item(runs: &[RunRecord]) -> BTreeMap<&str, &RunRecord> {
    // later runs overwrite earlier ones: the last verdict on an item wins
    runs.iter().map(|r| (r.item_id.as_str(), r)).collect()
}

fn accuracy(correct: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        correct as f64 / n as f64
    }
}

fn same(a: &Option<String>, b: &Option<String>) -> bool {
    a.as_deref().unwrap_or("") == b.as_deref().unwrap_or("")
}

fn token_stats(a: &[f64], b: &[f64]) -> TokenComparison {
    let sorted = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let (sa, sb) = (sorted(a), sorted(b));
    let (ma, mb) = (mean(a), mean(b));
    TokenComparison {
        baseline_mean: ma,
        candidate_mean: mb,
        baseline_p50: percentile_sorted(&sa, 50.0),
        candidate_p50: percentile_sorted(&sb, 50.0),
        baseline_p90: percentile_sorted(&sa, 90.0),
        candidate_p90: percentile_sorted(&sb, 90.0),
        ratio_mean: (ma > 0.0).then(|| mb / ma),
    }
}

/// Pair `baseline` and `candidate` by item id and compare them.
pub fn compare(baseline: &ResultRuns, candidate: &ResultRuns) -> Comparison {
    let a = last_per_item(&baseline.runs);
    let b = last_per_item(&candidate.runs);
    let common: Vec<&str> = a.keys().filter(|k| b.contains_key(*k)).copied().collect();
    let (bs, cs) = (&baseline.side, &candidate.side);
    let dataset_match = match (&bs.dataset_sha256, &cs.dataset_sha256) {
        (Some(x), Some(y)) => x == y,
        _ => same(&bs.dataset, &cs.dataset),
    };
    let mut out = Comparison {
        baseline: bs.clone(),
        candidate: cs.clone(),
        paired_items: common.len() as u64,
        baseline_scored_items: a.len() as u64,
        candidate_scored_items: b.len() as u64,
        profile_match: same(&bs.test_profile, &cs.test_profile),
        dataset_match,
        error: None,
        result: None,
    };
    if common.is_empty() {
        out.error =
            Some("no common scored items (runs need item_id and a non-null correct)".into());
        return out;
    }
    let n = common.len() as u64;
    let mut s = PairedStats::default();
    let mut tokens = (Vec::new(), Vec::new());
    let mut cats: BTreeMap<String, CategoryComparison> = BTreeMap::new();
    let mut flips = (BTreeSet::new(), BTreeSet::new());
    for id in &common {
        let (x, y) = (a[id], b[id]);
        s.baseline_correct += u64::from(x.correct);
        s.candidate_correct += u64::from(y.correct);
        if x.correct && !y.correct {
            flips.0.insert(id.to_string());
        }
        if y.correct && !x.correct {
            flips.1.insert(id.to_string());
        }
        tokens.0.push(x.completion_tokens);
        tokens.1.push(y.completion_tokens);
        s.hit_max_tokens.baseline += u64::from(x.hit_max_tokens);
        s.hit_max_tokens.candidate += u64::from(y.hit_max_tokens);
        s.unparseable.baseline += u64::from(x.score_detail == "unparseable");
        s.unparseable.candidate += u64::from(y.score_detail == "unparseable");
        s.truncated_no_answer.baseline += u64::from(x.score_label == "truncated");
        s.truncated_no_answer.candidate += u64::from(y.score_label == "truncated");
        if let Some(cat) = x.category.as_ref().or(y.category.as_ref()) {
            let c = cats
                .entry(cat.clone())
                .or_insert_with(|| CategoryComparison {
                    category: cat.clone(),
                    ..Default::default()
                });
            c.paired += 1;
            c.baseline_correct += u64::from(x.correct);
            c.candidate_correct += u64::from(y.correct);
        }
    }
    s.baseline_accuracy = accuracy(s.baseline_correct, n);
    s.candidate_accuracy = accuracy(s.candidate_correct, n);
    let (lo, hi) = wilson_interval(s.baseline_correct, n, Z95);
    s.baseline_wilson95 = [lo, hi];
    let (lo, hi) = wilson_interval(s.candidate_correct, n, Z95);
    s.candidate_wilson95 = [lo, hi];
    s.delta_pp = (s.candidate_accuracy - s.baseline_accuracy) * 100.0;
    s.flips_baseline_only_correct = flips.0.len() as u64;
    s.flips_candidate_only_correct = flips.1.len() as u64;
    s.mcnemar_exact_p = mcnemar_exact_p(
        s.flips_baseline_only_correct,
        s.flips_candidate_only_correct,
    );
    s.significant_at_0_05 = s.mcnemar_exact_p < 0.05;
    s.flip_item_ids = FlipIds {
        baseline_only_correct: flips.0.into_iter().take(MAX_FLIP_IDS).collect(),
        candidate_only_correct: flips.1.into_iter().take(MAX_FLIP_IDS).collect(),
    };
    s.completion_tokens = token_stats(&tokens.0, &tokens.1);
    let mut per_category: Vec<CategoryComparison> = cats
        .into_values()
        .map(|mut c| {
            c.baseline_accuracy = accuracy(c.baseline_correct, c.paired);
            c.candidate_accuracy = accuracy(c.candidate_correct, c.paired);
            c.delta_pp = (c.candidate_accuracy - c.baseline_accuracy) * 100.0;
            c
        })
        .collect();
    // worst (most negative) delta first; the name breaks ties so the order
    // is the same on every run
    per_category.sort_by(|x, y| {
        x.delta_pp
            .total_cmp(&y.delta_pp)
            .then_with(|| x.category.cmp(&y.category))
    });
    s.per_category = per_category;
    out.result = Some(s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(model: &str, runs: &[(&str, Option<bool>, f64, &str, &str)]) -> Value {
        json!({
            "metadata": {"model": model, "server": "http://127.0.0.1:1", "test_profile": "gsm8k",
                         "dataset": "gsm8k_test", "dataset_sha256": "ab", "max_tokens": 100},
            "runs": runs.iter().map(|(id, c, t, label, cat)| json!({
                "item_id": id, "correct": c, "completion_tokens": t,
                "hit_max_tokens": *label == "truncated", "score_label": label,
                "score_detail": if *label == "fail" { "unparseable" } else { "" },
                "category": cat,
            })).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn pairs_by_item_with_last_run_winning() {
        let a = doc(
            "A",
            &[
                ("i1", Some(true), 100.0, "pass", "math"),
                ("i2", Some(true), 200.0, "pass", "math"),
                ("i3", Some(false), 300.0, "fail", "law"),
                ("i4", Some(true), 50.0, "pass", "law"),
                ("i5", None, 0.0, "", ""),
            ],
        );
        let b = doc(
            "B",
            &[
                ("i1", Some(false), 150.0, "truncated", "math"),
                ("i1", Some(true), 150.0, "pass", "math"), // overrides the first
                ("i2", Some(false), 250.0, "truncated", "math"),
                ("i3", Some(true), 350.0, "pass", "law"),
                ("i4", Some(true), 60.0, "pass", "law"),
                ("i9", Some(true), 1.0, "pass", "law"),
            ],
        );
        let a = ResultRuns::from_json(&a, "a.json").unwrap();
        let b = ResultRuns::from_json(&b, "b.json").unwrap();
        let c = compare(&a, &b);
        assert_eq!(c.paired_items, 4);
        assert_eq!(c.baseline_scored_items, 4);
        assert_eq!(c.candidate_scored_items, 5);
        assert!(c.profile_match && c.dataset_match);
        let s = c.result.as_ref().unwrap();
        assert_eq!((s.baseline_correct, s.candidate_correct), (3, 3));
        assert_eq!(s.delta_pp, 0.0);
        assert_eq!(s.flip_item_ids.baseline_only_correct, vec!["i2"]);
        assert_eq!(s.flip_item_ids.candidate_only_correct, vec!["i3"]);
        assert_eq!(s.mcnemar_exact_p, 1.0);
        assert_eq!(
            s.truncated_no_answer,
            PerSide {
                baseline: 0,
                candidate: 1
            }
        );
        assert_eq!(
            s.unparseable,
            PerSide {
                baseline: 1,
                candidate: 0
            }
        );
        assert_eq!(s.completion_tokens.baseline_mean, 162.5);
        assert_eq!(s.completion_tokens.ratio_mean, Some(810.0 / 650.0));
        assert_eq!(s.per_category[0].category, "math");
        assert_eq!(s.per_category[0].delta_pp, -50.0);
        let v = serde_json::to_value(&c).unwrap();
        for k in [
            "baseline_wilson95",
            "mcnemar_exact_p",
            "flip_item_ids",
            "per_category",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert!(v.get("error").is_none());
        let back: Comparison = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn no_overlap_is_an_error_object() {
        let a =
            ResultRuns::from_json(&doc("A", &[("x", Some(true), 1.0, "pass", "")]), "a").unwrap();
        let b =
            ResultRuns::from_json(&doc("B", &[("y", Some(true), 1.0, "pass", "")]), "b").unwrap();
        let c = compare(&a, &b);
        assert!(c.error.is_some() && c.result.is_none());
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("delta_pp").is_none());
        assert!(ResultRuns::from_json(&json!({"cells": []}), "x").is_err());
    }
}
