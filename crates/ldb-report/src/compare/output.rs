//! `compare --format json` as types: what the comparison JSON holds, key
//! for key in the order it is written (docs/compare.md), with a reader
//! ([`read`]) so a script or a later run can load it back.

use serde::{Deserialize, Serialize};

/// The whole comparison (`compare_format` 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareOutput {
    /// Layout version; raised when a key changes meaning or goes away.
    pub compare_format: u32,
    /// `--threshold`, percent.
    pub threshold_pct: f64,
    /// `--force` was given.
    pub forced: bool,
    /// `welch_t_test` when some change was tested, else `not_tested_single_run`.
    pub significance: String,
    /// What the significance means here, one sentence.
    pub significance_note: String,
    /// Some new run regressed.
    pub regression: bool,
    /// One per new run, in command-line order.
    pub comparisons: Vec<RunComparison>,
}

/// One new run against the base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    /// The base run.
    pub base: RunOut,
    /// The new run.
    pub new: RunOut,
    /// No blocking settings difference.
    pub comparable: bool,
    /// Settings that differ.
    pub settings_differences: Vec<SettingOut>,
    /// Some cell, row or rate cell regressed.
    pub regression: bool,
    /// Verdicts counted.
    pub counts: Counts,
    /// Decode and burst cells.
    pub cells: Vec<CellOut>,
    /// Prefill rows.
    pub prefill: Vec<PrefillOut>,
    /// Open-loop rate cells.
    pub rate_cells: Vec<RateOut>,
    /// Trace replays and session runs (absent when neither run has one,
    /// so comparisons of matrix runs read as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replays: Vec<ReplayOut>,
    /// Energy and cost of the cells either run has figures for (absent when
    /// neither has; never counted in `regression` or `counts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy: Vec<EnergyOut>,
    /// Cells with a TTFT breakdown in either run, figures side by side
    /// (absent when neither run has one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_breakdown: Vec<TtftOut>,
}

/// Energy and cost figures of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyOut {
    /// `decode` or `burst`.
    pub layer: String,
    /// Context, tokens.
    pub context_tokens: u64,
    /// Concurrency.
    pub concurrency: u32,
    /// Figure key → change.
    pub metrics: Metrics,
    /// Figure key → why the base has no figure.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub base_reasons: std::collections::BTreeMap<String, String>,
    /// Figure key → why the new run has no figure.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub new_reasons: std::collections::BTreeMap<String, String>,
}

/// One cell's TTFT breakdown in both runs (not judged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TtftOut {
    /// `decode` or `burst`.
    pub layer: String,
    /// Context, tokens.
    pub context_tokens: u64,
    /// Concurrency.
    pub concurrency: u32,
    /// Figure key (`engine_ttft_mean`, …) → base, new and new − base, seconds.
    pub figures: indexed::Ordered<TtftFigureOut>,
}

/// One figure in both runs, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TtftFigureOut {
    /// The base run's value.
    pub base: Option<f64>,
    /// The new run's value.
    pub new: Option<f64>,
    /// new − base.
    pub delta: Option<f64>,
}

/// A run's label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOut {
    /// The file as given.
    pub file: String,
    /// Engine.
    pub engine: String,
    /// Engine version.
    pub engine_version: String,
    /// Model.
    pub model: String,
    /// When the run started.
    pub started_at: String,
}

/// One settings difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingOut {
    /// The `metadata` key.
    pub key: String,
    /// The base run's value, as text.
    pub base: String,
    /// The new run's value, as text.
    pub new: String,
    /// Makes the runs not comparable without `--force`.
    pub blocking: bool,
}

/// Verdicts counted over a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Regressions.
    pub regression: usize,
    /// Improvements.
    pub improvement: usize,
    /// Unchanged.
    pub unchanged: usize,
    /// Not comparable.
    pub not_comparable: usize,
}

/// A decode or burst cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellOut {
    /// `decode` or `burst`.
    pub layer: String,
    /// Context, tokens.
    pub context_tokens: u64,
    /// Concurrency.
    pub concurrency: u32,
    /// The base cell's status.
    pub base_status: Option<String>,
    /// The new cell's status.
    pub new_status: Option<String>,
    /// `compared`, `only_in_base`, …
    pub outcome: String,
    /// The cell's verdict.
    pub verdict: String,
    /// Metric key → change, in the report's order.
    pub metrics: Metrics,
}

/// A prefill row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillOut {
    /// Context, tokens.
    pub context_tokens: u64,
    /// The base run measured the row.
    pub base_measured: Option<bool>,
    /// The new run measured the row.
    pub new_measured: Option<bool>,
    /// `compared`, `only_in_base`, …
    pub outcome: String,
    /// The row's verdict.
    pub verdict: String,
    /// `tok_per_sec` → change.
    pub metrics: Metrics,
}

/// An open-loop rate cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateOut {
    /// Context, tokens.
    pub context_tokens: u64,
    /// Requests per second.
    pub request_rate: f64,
    /// The base cell's status.
    pub base_status: Option<String>,
    /// The new cell's status.
    pub new_status: Option<String>,
    /// The base cell saturated.
    pub base_saturated: Option<bool>,
    /// The new cell saturated.
    pub new_saturated: Option<bool>,
    /// `compared`, `only_in_base`, …
    pub outcome: String,
    /// The cell's verdict.
    pub verdict: String,
    /// Metric key → change.
    pub metrics: Metrics,
}

/// A trace replay or session run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayOut {
    /// `trace` or `sessions`.
    pub kind: String,
    /// Position in the run's `trace_results` / `session_results`, from 0.
    pub index: usize,
    /// The base replay's status.
    pub base_status: Option<String>,
    /// The new replay's status.
    pub new_status: Option<String>,
    /// Both ran the same workload (trace file and trace options; sessions,
    /// turns and user tokens).
    pub same_workload: bool,
    /// `compared`, `only_in_base`, …
    pub outcome: String,
    /// The replay's verdict.
    pub verdict: String,
    /// Metric key → change.
    pub metrics: Metrics,
    /// Intended and achieved prefix-cache hit rates of both sides, 0–1.
    pub prefix_cache: HitRatesOut,
    /// Session runs: TTFT by turn index (empty for traces).
    pub turns: Vec<TurnOut>,
}

/// Hit rates of both sides of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HitRatesOut {
    /// The base replay's intended rate.
    pub base_intended: Option<f64>,
    /// The base replay's achieved rate.
    pub base_achieved: Option<f64>,
    /// The new replay's intended rate.
    pub new_intended: Option<f64>,
    /// The new replay's achieved rate.
    pub new_achieved: Option<f64>,
}

/// TTFT of one turn index of a session run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnOut {
    /// 1-based turn.
    pub turn: u32,
    /// `ttft_p50`, `ttft_p99` → change.
    pub metrics: Metrics,
}

/// Metric key → change, in order (the JSON object's key order).
pub type Metrics = indexed::Ordered<ChangeOut>;

/// One metric's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeOut {
    /// The base value.
    pub base: Option<f64>,
    /// The new value.
    pub new: Option<f64>,
    /// New against base, percent.
    pub change_pct: Option<f64>,
    /// `higher` or `lower` is better.
    pub better: String,
    /// The change's verdict.
    pub verdict: String,
    /// How it was judged.
    pub significance: String,
    /// Only when both sides carried repeats: the test's p-value and spreads.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub tested: Option<Tested>,
}

/// A change tested for significance (both runs with `--repeat`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tested {
    /// Welch's t-test p-value.
    pub p_value: f64,
    /// The base's repeats.
    pub base_repeats: Option<Spread>,
    /// The new run's repeats.
    pub new_repeats: Option<Spread>,
}

/// The spread of a metric over a cell's repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Repeats.
    pub n: u32,
    /// Sample standard deviation.
    pub std_dev: f64,
}

/// Reads a comparison JSON written by `compare --format json`.
pub fn read(text: &str) -> Result<CompareOutput, serde_json::Error> {
    serde_json::from_str(text)
}

pub mod indexed {
    //! A JSON object as an ordered list of pairs (keys kept in order).

    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Key → value pairs, written and read as one JSON object.
    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct Ordered<T>(pub Vec<(String, T)>);

    impl<T> Ordered<T> {
        /// The value of `key`.
        pub fn get(&self, key: &str) -> Option<&T> {
            self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
        }
    }

    impl<T: Serialize> Serialize for Ordered<T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
        }
    }

    impl<'de, T: DeserializeOwned> Deserialize<'de> for Ordered<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            // serde_json's map keeps the order of the text (preserve_order)
            let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
            map.into_iter()
                .map(|(k, v)| {
                    serde_json::from_value(v)
                        .map(|v| (k, v))
                        .map_err(serde::de::Error::custom)
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Ordered)
        }
    }
}
