//! What every phase of a run shares.

use std::sync::{Arc, Mutex};

use ldb_client::Http;
use ldb_client::scrape::Scraper;
use ldb_client::stream::RunClock;
use ldb_core::engine::Engine;
use ldb_core::hardware::{HardwareSnapshot, HardwareSummary};
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;
use crate::live::Live;

/// Hardware telemetry as the runner sees it (implemented by the telemetry crate
/// in the binary; absent in tests that do not need it).
pub trait Hardware: Send + Sync {
    /// Mark the current position of the sample history.
    fn mark(&self) -> usize;
    /// Summary of samples since `mark` (empty summary when none).
    fn summary_since(&self, mark: usize) -> HardwareSummary;
    /// Summary of samples between two marks; energy covers the marks' times.
    fn summary_between(&self, start: usize, end: usize) -> HardwareSummary;
    /// The samples between two marks, for a cell's timeline (none by default).
    fn samples_between(&self, _start: usize, _end: usize) -> Vec<HardwareSnapshot> {
        Vec::new()
    }
    /// Now on the samples' clock (their `t_s`), seconds.
    fn elapsed_s(&self) -> f64 {
        0.0
    }
}

/// Skip and stop requests from the user.
#[derive(Debug, Default)]
pub struct Controls {
    /// Stop the run (graceful).
    pub stop: CancellationToken,
    skip: Mutex<CancellationToken>,
}

impl Controls {
    /// A fresh skip token for the next cell or row (also fires on stop).
    pub fn new_skip(&self) -> CancellationToken {
        let t = self.stop.child_token();
        if let Ok(mut s) = self.skip.lock() {
            *s = t.clone();
        }
        t
    }

    /// Skip whatever is running.
    pub fn skip(&self) {
        if let Ok(s) = self.skip.lock() {
            s.cancel();
        }
    }
}

/// Shared state of a run.
pub struct RunCtx {
    /// Configuration.
    pub cfg: RunConfig,
    /// Server access for streams.
    pub http: Http,
    /// The `/metrics` scraper (idle when metrics are unavailable).
    pub scraper: Scraper,
    /// Detected engine.
    pub engine: Engine,
    /// `/metrics` usable.
    pub metrics: bool,
    /// Model name.
    pub model: String,
    /// Run clock.
    pub clock: RunClock,
    /// Live view.
    pub live: Live,
    /// User controls.
    pub controls: Arc<Controls>,
    /// Hardware telemetry, if any.
    pub hardware: Option<Arc<dyn Hardware>>,
    /// Measured prefill speed (tok/s) to scale readiness limits.
    pub prefill_rate: Mutex<Option<f64>>,
    /// Outages and restarts of the server seen so far.
    pub(crate) faults: crate::server_watch::SharedFaults,
    /// Prompts sent so far, so a scout timed as a prefill is cold (`cold.rs`).
    pub(crate) sent_prompts: crate::cold::SentPrompts,
    /// Prefix-cache granularity, intended cache and resets (`prefix.rs`).
    pub(crate) prefix: crate::prefix::PrefixState,
    /// The interference probe's prompts and solo TTFTs (`interference.rs`).
    pub(crate) probe: crate::interference::ProbeState,
    /// Local, or leading shards (`shard.rs`).
    pub(crate) executor: crate::shard::CellExecutor,
}

impl RunCtx {
    /// Hardware summary since `mark` for the result (empty, written `{}`,
    /// without telemetry), and the same when there is telemetry.
    pub fn hw_since(&self, mark: Option<usize>) -> (HardwareSummary, Option<HardwareSummary>) {
        match (&self.hardware, mark) {
            (Some(h), Some(m)) => {
                let s = h.summary_since(m);
                (s.clone(), Some(s))
            }
            _ => (HardwareSummary::default(), None),
        }
    }

    /// Hardware summary between two marks (both from [`RunCtx::hw_mark`]).
    pub fn hw_between(
        &self,
        start: Option<usize>,
        end: Option<usize>,
    ) -> (HardwareSummary, Option<HardwareSummary>) {
        match (&self.hardware, start, end) {
            (Some(h), Some(a), Some(b)) => {
                let s = h.summary_between(a, b);
                (s.clone(), Some(s))
            }
            _ => (HardwareSummary::default(), None),
        }
    }

    /// Mark the hardware history.
    pub fn hw_mark(&self) -> Option<usize> {
        self.hardware.as_ref().map(|h| h.mark())
    }
}
