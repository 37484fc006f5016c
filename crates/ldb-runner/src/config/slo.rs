//! The SLO the run itself acts on (`--slo-search`, `--slo-bisect`).

/// The SLO and what the matrix does with it (read by the matrix driver,
/// startup's record and the replays' verdicts).
#[derive(Debug, Clone, Default)]
pub struct SloConfig {
    /// `--slo` (with any `--slo-preset`), when the run itself acts on it:
    /// `--slo-search` and `--slo-bisect` judge cells as they finish.
    pub spec: Option<ldb_core::slo::SloSpec>,
    /// `--slo-search`: stop raising concurrency at a context after two
    /// consecutive levels failed the SLO.
    pub search: bool,
    /// `--slo-bisect`: measure the levels between the last passing and the
    /// first failing concurrency of each context (bisection).
    pub bisect: bool,
}
