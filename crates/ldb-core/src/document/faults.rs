//! Server faults a run lived through, recorded in the metadata: the server
//! not answering (`--server-down-grace`), the server restarting, and the
//! loss of its `/metrics`.

use serde::{Deserialize, Serialize};

/// A time the server stopped answering mid-run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerOutage {
    /// When the run found the server gone (Unix seconds).
    pub since_unix: f64,
    /// When it answered again; `null` when it did not within the grace,
    /// which ended the run.
    pub back_unix: Option<f64>,
    /// The cell that was running, `C=4 ctx=16k`.
    pub during: String,
    /// The failure that made the run look (the cell's reason).
    pub evidence: String,
}

/// A server restart seen between two reads of its state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerRestart {
    /// When the restart was noticed (Unix seconds); it happened before.
    pub at_unix: f64,
    /// What showed it (a start time that changed, a counter that went down,
    /// the server not answering for a while).
    pub evidence: String,
}

/// The server's `/metrics` stopped answering usefully after discovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricsLost {
    /// First failed scrape of the unbroken run of failures (Unix seconds).
    pub since_unix: f64,
    /// The last failure, one line.
    pub reason: String,
    /// A later scrape succeeded again (Unix seconds); `null` when none did.
    pub back_unix: Option<f64>,
}
