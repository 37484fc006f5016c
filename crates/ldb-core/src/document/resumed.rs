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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::CellStatus;

    #[test]
    fn each_resume_is_appended_and_counted() {
        let first = Resumed::push(None, ResumeEntry::default());
        assert_eq!(first.count, 1);
        let entry = ResumeEntry {
            at_unix: 2.0,
            ..ResumeEntry::default()
        };
        let second = Resumed::push(Some(first), entry);
        assert_eq!(second.count, 2);
        assert_eq!(second.history[1].at_unix, 2.0);
    }

    #[test]
    fn only_error_and_no_tokens_cells_are_unfinished() {
        use CellStatus::*;
        for s in [Ok, CapacityLimited, SkippedKv, SkippedContext, SkippedUser] {
            assert!(s.is_finished(), "{s:?}");
        }
        for s in [Error, NoTokens] {
            assert!(!s.is_finished(), "{s:?}");
        }
    }
}
