//! The dashboard's state: the latest snapshot plus view state.

use std::time::Instant;

use ldb_core::live::{LiveSnapshot, Phase, PrefillRow};

/// Which overlay covers the dashboard, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlay {
    /// Just the dashboard.
    #[default]
    None,
    /// The key help.
    Help,
    /// The streamed-output viewer.
    Output,
}

/// Position in the output viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Viewer {
    /// Index into `snapshot.outputs` of the stream shown.
    pub stream: usize,
    /// First visible line; `None` follows the end of the text as it grows.
    pub scroll: Option<usize>,
}

/// Everything `render` needs; changed only by `update`.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Latest snapshot from the runner.
    pub snapshot: LiveSnapshot,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Overlay shown.
    pub overlay: Overlay,
    /// Output viewer position.
    pub viewer: Viewer,
    /// A stop was requested from the keyboard (shown in the footer).
    pub stopping: bool,
    /// A skip was requested for the cell shown (cleared when the cell changes).
    pub skipping: bool,
    /// False when stdin is not a terminal: the footer hides the key hints.
    pub keys_enabled: bool,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// Time of the last tick; the view's "now" (None before the first tick).
    pub now: Option<Instant>,
    /// When the time-like fields were last published.
    pub stamps: Stamps,
}

/// When the snapshot's clocks were last set by the runner. The runner
/// publishes `elapsed`/`eta` and a prefill row's `elapsed`/`eta` only now and
/// then; the view counts on from these instants so the clocks keep moving.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    /// The run's `elapsed`/`eta` changed.
    pub run: Option<Instant>,
    /// The running prefill row appeared or its `elapsed`/`eta` changed.
    pub prefill: Option<Instant>,
}

impl Model {
    /// A model showing `snapshot` on a `size` terminal.
    pub fn new(snapshot: LiveSnapshot, size: (u16, u16), keys_enabled: bool) -> Self {
        Model {
            snapshot,
            size,
            keys_enabled,
            dirty: true,
            ..Model::default()
        }
    }

    /// Seconds since the run's `elapsed`/`eta` were published (0 when the
    /// run is done or nothing is known).
    pub fn run_since(&self) -> f64 {
        if self.snapshot.phase == Phase::Done {
            return 0.0;
        }
        since(self.now, self.stamps.run)
    }

    /// Seconds since the running prefill row's clocks were published.
    pub fn prefill_since(&self) -> f64 {
        since(self.now, self.stamps.prefill)
    }
}

fn since(now: Option<Instant>, stamp: Option<Instant>) -> f64 {
    match (now, stamp) {
        (Some(now), Some(at)) => now.saturating_duration_since(at).as_secs_f64(),
        _ => 0.0,
    }
}

/// A running prefill row's clocks, counted on by `since` seconds:
/// (elapsed, seconds left by the estimate; negative once it is exceeded).
pub fn prefill_clock(row: &PrefillRow, since: f64) -> (f64, Option<f64>) {
    (row.elapsed + since, row.eta.map(|e| e - since))
}

/// The prefill row being measured now: the first row that has neither a
/// result nor a skip reason, while the run is not done. Any later unfinished
/// rows are waiting their turn.
pub fn running_prefill(snap: &LiveSnapshot) -> Option<(usize, &PrefillRow)> {
    if snap.phase == Phase::Done {
        return None;
    }
    snap.prefill
        .iter()
        .enumerate()
        .find(|(_, r)| r.tok_per_sec.is_none() && r.skipped.is_none())
}
