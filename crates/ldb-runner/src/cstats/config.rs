//! What a completion-stats run was asked to do, after the command line and
//! the profile defaults were merged (the flag given explicitly wins).

use ldb_eval::score::ScoreSource;
use ldb_eval::task::Task;

use crate::config::RunConfig;

/// The settings of one completion-stats run.
#[derive(Debug, Clone)]
pub struct CsConfig {
    /// Connection, model, KV and timeout settings shared with the matrix.
    pub base: RunConfig,
    /// What to send and how to judge it.
    pub task: Task,
    /// `max_tokens` to send; `None` leaves the field out (no client cap).
    pub max_tokens: Option<u64>,
    /// Fixed concurrency; `None` runs the adaptive search.
    pub fixed_concurrency: Option<usize>,
    /// `--completion-stats-runs` (0: `min_results` decides).
    pub requested_runs: usize,
    /// Completed runs wanted at the selected concurrency.
    pub min_results: usize,
    /// Adaptive probe levels (sorted, deduplicated, starting at 1).
    pub levels: Vec<usize>,
    /// Probe size = C × waves.
    pub probe_waves: usize,
    /// Relative gain of aggregate gen tok/s that counts as an improvement.
    pub min_improvement: f64,
    /// Non-improving levels before the search stops.
    pub patience: usize,
    /// Whether patience stops the search.
    pub auto_stop: bool,
    /// The generic scorer's regex as configured (`""`: none), for the record.
    pub correct_regex: String,
    /// Where the scorer reads the answer, for the record.
    pub score_source: ScoreSource,
    /// Keep whole texts in the result.
    pub save_text: bool,
    /// Send the `max_tokens = 1` scout first.
    pub prefill_scout: bool,
    /// `temperature` to send.
    pub temperature: Option<f64>,
    /// `top_p` to send.
    pub top_p: Option<f64>,
}

impl CsConfig {
    /// Measured runs of the fixed mode.
    pub fn fixed_runs(&self) -> usize {
        if self.requested_runs > 0 {
            self.requested_runs
        } else {
            self.min_results
        }
    }

    /// The largest concurrency the run may use.
    pub fn max_concurrency(&self) -> usize {
        self.fixed_concurrency
            .unwrap_or_else(|| self.levels.iter().copied().max().unwrap_or(1))
            .max(1)
    }
}
