//! `metadata.resumed`: how often a result file was continued with
//! `--resume`, when, and what each continuation carried over unchanged.

use serde::{Deserialize, Serialize};

/// A matrix cell named by its coordinates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default)]
pub struct CellKey {
    /// Concurrency.
    pub concurrency: u32,
    /// Nominal context in tokens.
    pub context_tokens: u64,
}

/// One `--resume` of the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResumeEntry {
    /// When the resumed run started, Unix time in seconds.
    pub at_unix: f64,
    /// Primary-matrix cells kept from the file, in the file's order.
    pub carried_cells: Vec<CellKey>,
    /// Burst cells kept from the file.
    pub carried_burst_cells: Vec<CellKey>,
    /// Prefill rows kept from the file, by context.
    pub carried_prefill_contexts: Vec<u64>,
}

/// The resume history of a result file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resumed {
    /// How many times the run was resumed (the length of `history`).
    pub count: u32,
    /// Each resume, oldest first.
    pub history: Vec<ResumeEntry>,
}

impl Resumed {
    /// The history with one more resume appended.
    pub fn push(prior: Option<Resumed>, entry: ResumeEntry) -> Resumed {
        let mut r = prior.unwrap_or_default();
        r.history.push(entry);
        r.count = u32::try_from(r.history.len()).unwrap_or(u32::MAX);
        r
    }
}
