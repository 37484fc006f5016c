//! The dashboard's state: the latest snapshot plus view state.

use ldb_core::live::{LiveSnapshot, PrefillRow};

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
}

/// The prefill row being measured now: not finished, not skipped, and started
/// (time spent or an ETA). The runner fills rows in order, so the first such
/// row is the live one.
pub fn running_prefill(snap: &LiveSnapshot) -> Option<(usize, &PrefillRow)> {
    snap.prefill.iter().enumerate().find(|(_, r)| {
        r.tok_per_sec.is_none() && r.skipped.is_none() && (r.elapsed > 0.0 || r.eta.is_some())
    })
}
