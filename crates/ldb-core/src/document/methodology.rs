//! The `methodology` block: one short note per kind of number in the file
//! (how it is made, in brief), typed. The texts themselves and the builder
//! that picks them from a run's facts are in [`super::methodology_notes`].

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One note: what a family of numbers is, whether this file has it, and
/// how it is computed. Keys are written in this order; the optional ones
/// only where a note carries them (each note has at most one of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MethodologyNote {
    /// Display name.
    pub name: String,
    /// The file holds numbers of this kind.
    pub present: bool,
    /// The prefill mode the run used (the `prefill` note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `present` or why it was not run (the `burst_e2e_decode` note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The interval method in use (the `window_auto_stop` note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The formula, in words and symbols.
    pub formula: String,
    /// What is counted and what is left out.
    pub notes: String,
}

/// The `methodology` block: notes by the number family they describe, in
/// the file's order. Empty (written `{}`) when nothing was measured yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Methodology {
    /// Prefill rows (`prefill`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<MethodologyNote>,
    /// Sustained decode cells (`results` in duration mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustained_decode: Option<MethodologyNote>,
    /// Burst / request-count cells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_e2e_decode: Option<MethodologyNote>,
    /// The MTP / speculative decoding normalization.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_normalization: Option<MethodologyNote>,
    /// `--duration auto`: when a sustained window closes early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_auto_stop: Option<MethodologyNote>,
    /// The `--coding-peak` probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coding_peak: Option<MethodologyNote>,
    /// Notes of other writers this build does not model, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Methodology {
    /// The typed notes present, by key, in the file's order (notes of other
    /// writers, in `extra`, are not included).
    pub fn notes(&self) -> Vec<(&'static str, &MethodologyNote)> {
        [
            ("prefill", &self.prefill),
            ("sustained_decode", &self.sustained_decode),
            ("burst_e2e_decode", &self.burst_e2e_decode),
            ("acceptance_normalization", &self.acceptance_normalization),
            ("window_auto_stop", &self.window_auto_stop),
            ("coding_peak", &self.coding_peak),
        ]
        .into_iter()
        .filter_map(|(k, n)| Some((k, n.as_ref()?)))
        .collect()
    }

    /// No note at all.
    pub fn is_empty(&self) -> bool {
        self.notes().is_empty() && self.extra.is_empty()
    }
}

/// `null` reads as the empty block, as it did while the block was untyped.
pub(crate) fn null_as_default<'de, D: Deserializer<'de>>(d: D) -> Result<Methodology, D::Error> {
    Ok(Option::<Methodology>::deserialize(d)?.unwrap_or_default())
}
