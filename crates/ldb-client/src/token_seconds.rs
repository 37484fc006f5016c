//! Output tokens counted by the second they arrived in, from an origin (a
//! replay's start): a replay's throughput over time (docs/workloads.md),
//! which counting whole outputs at their completion would bunch into the
//! seconds requests happened to end in.

use std::sync::{Mutex, OnceLock};

/// Per-second token counts; inactive (counts nothing) until [`start_at`]
/// gives it an origin, so cells that do not ask pay one check per chunk.
///
/// [`start_at`]: TokenSeconds::start_at
#[derive(Debug, Default)]
pub struct TokenSeconds {
    origin: OnceLock<f64>,
    counts: Mutex<Vec<u64>>,
}

/// Seconds past the origin beyond which arrivals are not bucketed (a
/// guard against a clock gone wrong growing the list without end).
const MAX_SECONDS: usize = 30 * 24 * 3600;

impl TokenSeconds {
    /// Counts from run-clock time `origin` on (the first origin holds).
    pub fn start_at(&self, origin: f64) {
        let _ = self.origin.set(origin);
    }

    /// `n` tokens arrived at run-clock time `t`.
    pub fn add(&self, t: f64, n: u64) {
        let Some(origin) = self.origin.get() else {
            return;
        };
        let i = (t - origin).max(0.0).floor() as usize;
        if i > MAX_SECONDS {
            return;
        }
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.len() <= i {
            c.resize(i + 1, 0);
        }
        c[i] += n;
    }

    /// The counts, second 0 first; `None` when never started.
    pub fn counts(&self) -> Option<Vec<u64>> {
        self.origin.get()?;
        Some(
            self.counts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_land_in_the_second_they_arrived_in() {
        let s = TokenSeconds::default();
        s.add(5.0, 3);
        assert_eq!(s.counts(), None, "not started: nothing counted");
        s.start_at(10.5);
        s.start_at(99.0);
        s.add(10.6, 2);
        s.add(11.49, 1);
        s.add(11.5, 4);
        s.add(13.9, 1);
        s.add(9.0, 1); // before the origin: second 0
        assert_eq!(s.counts(), Some(vec![4, 4, 0, 1]));
    }
}
