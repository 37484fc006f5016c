//! The run plan as data: everything decided before the first generation
//! request (cells in run order and their skips, prefill rows, warmups, the
//! estimate). Made by `ldb_runner::plan::plan`, printed by
//! `ldb_report::text::plan`, followed by the runner.

use crate::kv::Infeasible;
use crate::result::CellStatus;

/// What discovery contributed to the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerLimits {
    /// The model's context length (0 = unknown).
    pub model_context: u64,
    /// KV budget in tokens (0 = unknown: no KV skips).
    pub kv_budget: u64,
}

/// One decode cell, in run order.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    /// Concurrency.
    pub concurrency: u32,
    /// Nominal context.
    pub context: u64,
    /// Why it is skipped without sending a request; `None` = measured.
    pub skip: Option<Infeasible>,
    /// `--resume`: the status of this cell's finished result in the file,
    /// kept as it is instead of measuring the cell again.
    pub carried: Option<CellStatus>,
    /// `--resume`: the same for the cell's Burst / E2E result.
    pub burst_carried: Option<CellStatus>,
    /// `--resume` with `--repeat N`: repeats of this cell the file already
    /// holds when they are fewer than N (the cell is then measured for the
    /// missing ones only, in the passes after them); 0 otherwise.
    pub carried_repeats: u32,
}

/// A prefill context beyond the prompt limit: recorded as skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPrefill {
    /// The context.
    pub context: u64,
    /// The row's `skip_reason`.
    pub reason: String,
    /// The row's `method`: `scout_only` or `client` (standalone).
    pub method: crate::result::PrefillMethod,
}

/// Everything decided before a request is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    /// Longest prompt sent: model context − 64, at most 128k.
    pub max_prefill: u64,
    /// Decode contexts whose first cell's scout is recorded as the prefill
    /// row (integrated prefill).
    pub integrated_prefill: Vec<u64>,
    /// `--prefill-contexts` outside the matrix, measured by a scout alone.
    pub scout_only: Vec<u64>,
    /// Standalone cold prefill contexts (`--standalone-prefill`, `--prefill-only`).
    pub standalone: Vec<u64>,
    /// Prefill contexts beyond `max_prefill`, skipped with the reason.
    pub prefill_skipped: Vec<SkippedPrefill>,
    /// Context of the prefill warmup request, if any prefill row is measured.
    pub prefill_warmup: Option<u64>,
    /// Context of the hidden decode warmup (`None` when it is off).
    pub decode_warmup: Option<u64>,
    /// Contexts whose prompts are sized (those that will be sent).
    pub prompt_contexts: Vec<u64>,
    /// Decode cells in run order (none for `--prefill-only`).
    pub cells: Vec<PlannedCell>,
    /// `--resume`: prefill rows kept from the file, not measured again.
    pub prefill_carried: Vec<u64>,
    /// Open-loop contexts that cannot be sent (one request does not fit the
    /// model), with the reason; their rate cells are recorded as skipped.
    pub rate_skips: Vec<(u64, String)>,
    /// Open loop: the rate cells in words, for `--dry-run` (`None` otherwise).
    pub open_loop: Option<String>,
    /// Rough lower estimate of the run's length, seconds.
    pub estimated_seconds: f64,
}

impl RunPlan {
    /// Measured (not skipped) cells, carried over or not.
    pub fn measured_cells(&self) -> impl Iterator<Item = &PlannedCell> {
        self.cells.iter().filter(|c| c.skip.is_none())
    }

    /// Cells of the primary matrix this run still measures: neither skipped
    /// nor carried over from the file it resumes.
    pub fn cells_to_measure(&self) -> impl Iterator<Item = &PlannedCell> {
        self.measured_cells().filter(|c| c.carried.is_none())
    }
}
