//! When a sustained cell's window closes: at its length, or under
//! `--duration auto` as soon as its rate is known (`ldb_core::autostop`).
//! Follows the window's cumulative token count tick by tick, publishes the
//! interval to the live view, and writes the outcome into the cell.

use ldb_core::autostop::{self, AutoStop, RateEstimate, StoppedBy};
use ldb_core::live::{LiveEvent, LiveRateCi};
use ldb_core::result::{CellExtras, round};

use crate::ctx::RunCtx;

/// The closing rule of one window and what it has seen.
#[derive(Debug)]
pub(crate) struct WindowStop {
    rule: Option<AutoStop>,
    max_s: f64,
    /// `(seconds since the window opened, tokens counted)` at each tick.
    samples: Vec<(f64, u64)>,
    last: Option<RateEstimate>,
    stopped_by: Option<StoppedBy>,
}

impl WindowStop {
    /// A window of `max_s` seconds that `rule` may close earlier.
    pub(crate) fn new(rule: Option<AutoStop>, max_s: f64) -> WindowStop {
        WindowStop {
            rule,
            max_s,
            samples: Vec::new(),
            last: None,
            stopped_by: None,
        }
    }

    /// One tick of the window: `elapsed` seconds in, `tokens` counted so
    /// far. True when the window closes now.
    pub(crate) fn pass(&mut self, rc: &RunCtx, elapsed: f64, tokens: u64) -> bool {
        if let Some(rule) = self.rule {
            self.samples.push((elapsed, tokens));
            self.last = autostop::estimate_window(&self.samples, elapsed, self.max_s);
            let live = self.last.map(|e| LiveRateCi {
                mean: e.mean,
                half_width: e.half_width,
                drift_rel: e.drift_rel,
                target_rel: rule.target_rel,
                min_s: rule.min_s,
            });
            rc.live.send(LiveEvent::WindowEstimated(live));
        }
        self.stopped_by =
            autostop::decide(self.rule.as_ref(), elapsed, self.max_s, self.last.as_ref());
        self.stopped_by.is_some()
    }

    /// Record the outcome in the cell (auto windows that reached a close only).
    pub(crate) fn record(&self, ext: &mut CellExtras) {
        let (Some(_), Some(by)) = (self.rule, self.stopped_by) else {
            return;
        };
        ext.stopped_by = Some(by);
        ext.rate_ci_method = Some(autostop::METHOD.to_string());
        if let Some(e) = self.last {
            ext.rate_ci95 = Some([round(e.low(), 2), round(e.high(), 2)]);
            ext.rate_drift_pct = Some(round(e.drift_rel * 100.0, 3));
        }
    }
}
