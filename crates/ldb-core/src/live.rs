//! The live view of a running benchmark, published by the runner and drawn by
//! the dashboard or the plain-mode printer. Plain data: cloning a snapshot is
//! cheap enough at ≤ 10 frames per second. The runner changes it only by
//! sending [`LiveEvent`]s, which [`LiveSnapshot::apply`] takes in.

pub mod replay;

use crate::hardware::GpuSample;
use crate::result::CellStatus;

pub mod event;

pub use event::{CellSample, LIVE_EVENTS, LiveEvent, RunLayout};

/// What the run is doing now.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Phase {
    /// Discovery, calibration, prompt sizing.
    #[default]
    Preparing,
    /// Prefill warmup, scout-only or standalone prefill rows.
    Prefill,
    /// The hidden C=1 decode warmup.
    DecodeWarmup,
    /// A sustained-decode matrix cell.
    Decode,
    /// A burst / request-count cell.
    Burst,
    /// Finished (or stopped); the report follows.
    Done,
}

impl Phase {
    /// Short word for headers.
    pub fn label(&self) -> &'static str {
        match self {
            Phase::Preparing => "preparing",
            Phase::Prefill => "prefill",
            Phase::DecodeWarmup => "decode warmup",
            Phase::Decode => "decode",
            Phase::Burst => "burst",
            Phase::Done => "done",
        }
    }
}

/// Stage inside a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CellStage {
    /// The `max_tokens=1` request that warms the prefix cache.
    #[default]
    Scout,
    /// Streams launched, waiting for readiness.
    RampUp,
    /// Inside the measurement window.
    Window,
    /// Window closed; waiting for the server to drain.
    Drain,
}

impl CellStage {
    /// Short word.
    pub fn label(self) -> &'static str {
        match self {
            CellStage::Scout => "scout",
            CellStage::RampUp => "ramp-up",
            CellStage::Window => "measuring",
            CellStage::Drain => "drain",
        }
    }
}

/// State of one matrix cell in the live table.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MatrixCellState {
    /// Not started.
    #[default]
    Pending,
    /// Running now.
    Running,
    /// Finished.
    Done {
        /// Headline tok/s (None when not reported).
        tps: Option<f64>,
        /// TTFT p50, seconds.
        ttft_p50: f64,
        /// ITL p50, seconds.
        itl_p50: f64,
        /// Time to first output (answer) token p50, seconds (NaN when none).
        ttfo_p50: f64,
        /// Outcome.
        status: CellStatus,
        /// Effective concurrency.
        effective: f64,
        /// `--repeat`: half width of the 95 % interval of `tps` (the mean of
        /// the repeats so far); `None` for a single measurement.
        tps_ci95: Option<f64>,
    },
}

/// One cell of the live matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixCell {
    /// Context tokens.
    pub context: u64,
    /// Concurrency.
    pub concurrency: u32,
    /// State.
    pub state: MatrixCellState,
}

/// The cell being measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CurrentCell {
    /// Requested concurrency.
    pub concurrency: u32,
    /// Context tokens.
    pub context: u64,
    /// Stage.
    pub stage: CellStage,
    /// Running requests reported by the server.
    pub running: Option<f64>,
    /// Queued requests reported by the server.
    pub queued: Option<f64>,
    /// Streams currently producing tokens.
    pub producing: u32,
    /// Client tok/s over the last second, most recent last (bounded).
    pub tps_trace: Vec<f64>,
    /// Tokens counted in the window so far.
    pub window_tokens: u64,
    /// Window seconds elapsed.
    pub window_elapsed: f64,
    /// Window length.
    pub window_total: f64,
    /// Seconds in the current stage.
    pub stage_elapsed: f64,
    /// Live speculative accept length (tokens per drafted step).
    pub accept_length: Option<f64>,
    /// `--duration auto`: the window rate's 95 % interval so far.
    pub rate_ci: Option<LiveRateCi>,
}

/// The interval a window under `--duration auto` closes on, as it stands.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveRateCi {
    /// Window rate so far, tok/s.
    pub mean: f64,
    /// Half width of the 95 % interval, tok/s.
    pub half_width: f64,
    /// Rate change across the window so far, relative to the mean.
    pub drift_rel: f64,
    /// The target half width (and drift), relative (0.01 = ±1 %).
    pub target_rel: f64,
    /// The window may not close on the interval before this, seconds.
    pub min_s: f64,
}

/// A prefill row in the live view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrefillRow {
    /// Context tokens.
    pub context: u64,
    /// Method word (`scout_only`, `integrated_scout`, `client`, …).
    pub method: String,
    /// Finished: tok/s; running: None.
    pub tok_per_sec: Option<f64>,
    /// TTFT when finished.
    pub ttft: Option<f64>,
    /// Seconds spent so far while running.
    pub elapsed: f64,
    /// Estimated seconds left while running (from the measured prefill speed).
    pub eta: Option<f64>,
    /// Skipped with this reason.
    pub skipped: Option<String>,
}

/// Host state for the hardware panel (None when telemetry is off).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HardwareLive {
    /// Per-GPU rows: the latest sample of each GPU, lowest index first,
    /// capped by `--hw-gpu-limit`.
    pub gpus: Vec<GpuSample>,
    /// CPU utilization %.
    pub cpu_util_pct: Option<f64>,
    /// CPU frequency MHz.
    pub cpu_freq_mhz: Option<f64>,
    /// Hottest CPU package °C.
    pub cpu_temp_c: Option<f64>,
}

/// Recent streamed text of one request, for the output viewer (bounded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamText {
    /// Stream slot (0-based worker index).
    pub slot: u32,
    /// The last few KiB of generated text.
    pub text: String,
}

/// Everything the dashboard draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Model name.
    pub model: String,
    /// Engine display name.
    pub engine: String,
    /// Server label.
    pub server: String,
    /// KV budget tokens (0 unknown).
    pub kv_budget: u64,
    /// Phase.
    pub phase: Phase,
    /// Seconds since the run started.
    pub elapsed: f64,
    /// Estimated seconds until the whole run ends.
    pub eta: Option<f64>,
    /// Concurrency columns.
    pub concurrencies: Vec<u32>,
    /// Column headings when the columns are not concurrencies (open-loop
    /// rates: `R=2/s`), one per entry of `concurrencies`, which then holds
    /// the column's key (1, 2, …). Empty: `C=<concurrency>`.
    pub column_labels: Vec<String>,
    /// Context rows.
    pub contexts: Vec<u64>,
    /// Matrix cells (all of them, pending included).
    pub matrix: Vec<MatrixCell>,
    /// The cell in progress.
    pub current: Option<CurrentCell>,
    /// Prefill rows.
    pub prefill: Vec<PrefillRow>,
    /// Hardware (None = telemetry unavailable: hide the panel).
    pub hardware: Option<HardwareLive>,
    /// Recent events, oldest first (bounded).
    pub events: Vec<String>,
    /// Recent output of the current cell's streams (bounded).
    pub outputs: Vec<StreamText>,
    /// A trace replay or session run in progress (or just finished).
    pub replay: Option<replay::ReplayProgress>,
}

/// Requests from the user interface to the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Skip the current cell or prefill row.
    Skip,
    /// Stop the run gracefully (save and report what was measured).
    Stop,
}

impl LiveSnapshot {
    /// The heading of the column keyed `conc`.
    pub fn column_label(&self, conc: u32) -> String {
        self.concurrencies
            .iter()
            .position(|&c| c == conc)
            .and_then(|i| self.column_labels.get(i))
            .cloned()
            .unwrap_or_else(|| format!("C={conc}"))
    }
}
