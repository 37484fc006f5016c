//! A sustained cell's timeline (`ldb_core::timeline`) from what the cell
//! gathered anyway: the streams' per-second counts, the scrapes of ramp-up
//! and window, and the hardware monitor's samples since the launch. Nothing
//! here scrapes or samples more often than the run already does.

use ldb_client::scrape::Scrape;
use ldb_core::timeline::{CellTimeline, ServerPoint, build};

use crate::cell::RampEnd;
use crate::cell_window::WindowRecord;
use crate::ctx::RunCtx;
use crate::pool::StreamPool;

/// A scrape's gauges, timed when the server most likely read them.
pub(crate) fn point(s: &Scrape) -> ServerPoint {
    ServerPoint {
        t: s.read_at(),
        running: s.snap.running,
        waiting: s.snap.waiting,
        kv_usage: s.snap.kv_usage,
    }
}

/// The distinct scrapes seen during ramp-up, one point each.
#[derive(Default)]
pub(crate) struct ScrapeLog {
    last_seq: u64,
    pub(crate) points: Vec<ServerPoint>,
}

impl ScrapeLog {
    /// Keep `s` unless it is the scrape kept last.
    pub(crate) fn keep(&mut self, s: Option<&Scrape>) {
        if let Some(s) = s
            && s.seq != self.last_seq
        {
            self.last_seq = s.seq;
            self.points.push(point(s));
        }
    }
}

/// The cell's timeline; `None` when its streams kept no counts (a sharded
/// cell's leader, say).
pub(crate) fn timeline(
    rc: &RunCtx,
    pool: &StreamPool,
    ramp: &RampEnd,
    win: &WindowRecord,
) -> Option<CellTimeline> {
    let counts = pool.counters.timeline.counts()?;
    let mut points = ramp.scrapes.clone();
    let edges = win.start_scrape.iter().chain(&win.sched);
    points.extend(edges.chain(win.end_scrape.iter()).map(point));
    let (samples, offset) = match (&rc.hardware, ramp.hw_launch, win.hw_end) {
        // Both clocks read back to back: the monitor's sample times plus
        // this offset are run-clock times.
        (Some(h), Some(a), Some(b)) => (h.samples_between(a, b), rc.clock.now() - h.elapsed_s()),
        _ => (Vec::new(), 0.0),
    };
    Some(build(
        &counts,
        (win.start, win.end),
        &points,
        &samples,
        offset,
    ))
}
