//! Comparing result files: `llm-decode-bench compare BASE.json NEW.json …`.
//!
//! Pure over loaded [`ResultDocument`]s: the caller reads the files
//! ([`crate::load_result_file`]) and prints what the renderers return.
//! Each new run is compared with the base run on its own:
//!
//! 1. settings ([`settings`]): what must match for the numbers to mean the
//!    same thing (engine, model, engine version, matrix, window, prompts);
//!    a blocking difference makes the caller refuse unless forced;
//! 2. cells ([`cells`]): matched by layer (decode or burst), context and
//!    concurrency; per metric the change in percent of the base, judged
//!    against the threshold in the metric's direction ([`metric`]); cells
//!    present or valid in one run only are kept and listed;
//! 3. prefill rows: matched by context, the headline rate;
//! 4. open-loop rate cells ([`rates`]): matched by context and offered rate;
//! 5. trace replays and session runs ([`replays`]): matched by kind and
//!    position, their summaries and (sessions) TTFT by turn;
//! 6. energy and cost ([`energy`]): the cells' J/token, tok/s per kW and
//!    $/Mtok side by side, shown but never judged for the exit code.
//! 7. the prefill–decode interference probes ([`interference`]): matched by
//!    cell and injected length, side by side with deltas, shown, not judged.
//!
//! Runs are single measurements per cell, so no change is tested for
//! significance; [`metric::Estimate`] has room for repeats when runs carry them.
//!
//! `docs/compare.md` defines every rule, metric, format and exit code.

pub mod cells;
pub mod energy;
pub mod fabric;
pub mod interference;
mod json;
pub mod metric;
pub mod output;
pub mod rates;
pub mod replays;
pub mod settings;
mod table;
pub mod ttft;

use ldb_core::document::ResultDocument;

pub use cells::{CellComparison, CellKey, Layer, Outcome, PrefillComparison};
pub use energy::{EnergyChange, EnergyComparison, EnergyMetric};
pub use json::{output as typed_output, to_json};
pub use metric::{CellMetric, Change, Direction, Estimate, Significance, Verdict};
pub use output::{CompareOutput, read as read_output};
pub use rates::{RateComparison, RateMetric};
pub use replays::{ReplayComparison, ReplayKind, ReplayMetric};
pub use settings::SettingDiff;
pub use table::{render_markdown, render_text};

/// Default `--threshold`: changes within 5 % either way are not marked.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// The sentence every output format carries about significance.
pub const SIGNIFICANCE_NOTE: &str = "Each cell is a single measurement per run: \
     differences carry no significance test, and a change near the threshold may be run-to-run noise.";

/// The sentence when cells carry repeats on both sides.
pub const REPEATS_NOTE: &str = "Cells measured several times (--repeat) are compared by their means; \
     * marks a change that Welch's t-test finds significant (two-sided p < 0.05), and cells \
     with a single measurement on either side carry no test.";

/// A run as named in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLabel {
    /// The file as given on the command line.
    pub file: String,
    /// Engine (`vllm`, `sglang`, …).
    pub engine: String,
    /// Model name.
    pub model: String,
    /// Engine version reported by the server.
    pub engine_version: String,
    /// When the run started.
    pub started_at: String,
}

impl RunLabel {
    /// The label of `doc`, read from `file`.
    pub fn of(file: &str, doc: &ResultDocument) -> RunLabel {
        let m = &doc.metadata;
        RunLabel {
            file: file.to_string(),
            engine: m.engine.clone(),
            model: m.model.clone(),
            engine_version: m.engine_version.clone(),
            started_at: m.started_at.clone(),
        }
    }
}

/// One new run against the base run.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The base run.
    pub base: RunLabel,
    /// The new run.
    pub new: RunLabel,
    /// Settings that differ (blocking ones first).
    pub settings: Vec<SettingDiff>,
    /// Every cell of either run.
    pub cells: Vec<CellComparison>,
    /// Every prefill context of either run.
    pub prefill: Vec<PrefillComparison>,
    /// Every open-loop rate cell of either run.
    pub rates: Vec<RateComparison>,
    /// Every trace replay and session run of either run.
    pub replays: Vec<ReplayComparison>,
    /// Every cell with energy figures in either run (not counted in verdicts).
    pub energy: Vec<EnergyComparison>,
    /// Cells of either run with a TTFT breakdown (shown, not judged).
    pub ttft: Vec<ttft::TtftComparison>,
    /// Cells and replays of either run whose prefix-cache hit rate missed the intended
    /// one by more than 10 points (`base: …`, `new: …`), see
    /// [`crate::prefix_flags`].
    pub prefix_gaps: Vec<String>,
}

impl Comparison {
    /// Compares `new` with `base`; `threshold_pct` is `--threshold`.
    pub fn new(
        base: (&str, &ResultDocument),
        new: (&str, &ResultDocument),
        threshold_pct: f64,
    ) -> Comparison {
        Comparison {
            base: RunLabel::of(base.0, base.1),
            new: RunLabel::of(new.0, new.1),
            settings: settings::differences(&base.1.metadata, &new.1.metadata),
            cells: cells::compare_cells(base.1, new.1, threshold_pct),
            prefill: cells::compare_prefill(base.1, new.1, threshold_pct),
            rates: rates::compare_rates(base.1, new.1, threshold_pct),
            replays: replays::compare_replays(base.1, new.1, threshold_pct),
            energy: energy::compare_energy(base.1, new.1, threshold_pct),
            ttft: ttft::compare_ttft(base.1, new.1),
            prefix_gaps: [("base", base.1), ("new", new.1)]
                .into_iter()
                .flat_map(|(side, doc)| {
                    crate::prefix_flags::flags(doc)
                        .into_iter()
                        .chain(replays::gap_flags(doc))
                        .map(move |f| format!("{side}: {f}"))
                })
                .collect(),
        }
    }

    /// The differences that make the runs not comparable.
    pub fn blocking(&self) -> Vec<&SettingDiff> {
        self.settings.iter().filter(|d| d.blocking).collect()
    }

    /// Cells, prefill rows, rate cells and replays whose overall verdict is `v`.
    pub fn count(&self, v: Verdict) -> usize {
        self.cells.iter().filter(|c| c.verdict == v).count()
            + self.prefill.iter().filter(|p| p.verdict == v).count()
            + self.rates.iter().filter(|r| r.verdict == v).count()
            + self.replays.iter().filter(|r| r.verdict == v).count()
    }

    /// Some cell or prefill row regressed beyond the threshold.
    pub fn has_regression(&self) -> bool {
        self.count(Verdict::Regression) > 0
    }

    /// The one-line refusal when blocking differences exist (`None` otherwise).
    pub fn refusal(&self) -> Option<String> {
        let b = self.blocking();
        if b.is_empty() {
            return None;
        }
        let list: Vec<String> = b.iter().map(|d| d.short()).collect();
        Some(format!(
            "{} and {} are not comparable: {} (use --force to compare anyway)",
            self.base.file,
            self.new.file,
            list.join("; ")
        ))
    }
}

/// Everything one `compare` prints: each new run against the base.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareReport {
    /// `--threshold`, percent.
    pub threshold_pct: f64,
    /// `--force` was given (blocking differences were overridden).
    pub forced: bool,
    /// One comparison per new run, in command-line order.
    pub comparisons: Vec<Comparison>,
}

impl CompareReport {
    /// Some new run regressed against the base.
    pub fn has_regression(&self) -> bool {
        self.comparisons.iter().any(Comparison::has_regression)
    }

    /// Some change was tested for significance (both sides carried repeats).
    pub fn tested(&self) -> bool {
        self.comparisons.iter().any(|c| {
            c.cells.iter().any(|cell| {
                cell.changes
                    .iter()
                    .any(|(_, ch)| ch.significance != Significance::NotTestedSingleRun)
            })
        })
    }

    /// The sentence about significance this report carries.
    pub fn significance_note(&self) -> &'static str {
        if self.tested() {
            REPEATS_NOTE
        } else {
            SIGNIFICANCE_NOTE
        }
    }
}

#[cfg(test)]
mod tests;
