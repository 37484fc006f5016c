//! The streams' side of the client series: every chunk's tokens, added as
//! they arrive. The window's start is not known during ramp-up, so tokens
//! before it are kept on a fine grid from the origin and folded into the
//! window-anchored seconds afterwards (`super::client_series`); tokens the
//! window counts go straight into its seconds.

use std::sync::{Mutex, OnceLock};

/// Width of the ramp-up's fine bins, seconds: a ramp-up token may land in
/// the neighbouring second when it arrived this close to a boundary.
pub const RAMP_STEP_S: f64 = 0.01;

/// Fine bins beyond this are dropped (two hours of ramp-up; a guard against
/// a clock gone wrong growing the list without end).
const MAX_RAMP_BINS: usize = 720_000;
/// Window seconds beyond this are folded into the last (a day).
const MAX_WINDOW_SECS: usize = 86_400;

/// The counts so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimelineCounts {
    /// Run-clock time of the origin (the streams' launch).
    pub origin: f64,
    /// Tokens before the window, by [`RAMP_STEP_S`] bin from the origin.
    pub ramp: Vec<u64>,
    /// Tokens the window counted, by second from the window start.
    pub window: Vec<u64>,
}

/// Shared by a cell's streams; counts nothing until [`start_at`] gives it
/// an origin, so cells that keep no timeline pay one check per chunk.
///
/// [`start_at`]: TimelineCounter::start_at
#[derive(Debug, Default)]
pub struct TimelineCounter {
    origin: OnceLock<f64>,
    counts: Mutex<TimelineCounts>,
}

impl TimelineCounter {
    /// Counts from run-clock time `origin` on (the first origin holds).
    pub fn start_at(&self, origin: f64) {
        let _ = self.origin.set(origin);
    }

    /// A chunk at run-clock time `t` brought `new` tokens, `counted` of them
    /// inside the window that starts at `ws` (None: not open yet). Tokens
    /// not counted are ramp-up tokens when they came before the window, and
    /// are dropped when they came after it (the drain is not part of a cell).
    pub fn add(&self, t: f64, new: u64, counted: u64, ws: Option<f64>) {
        let Some(&origin) = self.origin.get() else {
            return;
        };
        let rest = new.saturating_sub(counted);
        let before = ws.is_none_or(|ws| t < ws);
        if counted == 0 && !(rest > 0 && before) {
            return;
        }
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ws) = ws
            && counted > 0
        {
            let k = (super::second_of(t, ws).max(0) as usize).min(MAX_WINDOW_SECS);
            grow(&mut c.window, k)[k] += counted;
        }
        if rest > 0 && before {
            let j = ((t - origin).max(0.0) / RAMP_STEP_S).floor() as usize;
            if j < MAX_RAMP_BINS {
                grow(&mut c.ramp, j)[j] += rest;
            }
        }
    }

    /// The counts; `None` when never started.
    pub fn counts(&self) -> Option<TimelineCounts> {
        let origin = *self.origin.get()?;
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        Some(TimelineCounts {
            origin,
            ramp: c.ramp.clone(),
            window: c.window.clone(),
        })
    }
}

fn grow(v: &mut Vec<u64>, i: usize) -> &mut Vec<u64> {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v
}
