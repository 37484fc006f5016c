//! The run's clock: seconds since a fixed origin, and their Unix time.
//! Every time stamp of a run (requests, windows, scrapes, shards' clock
//! exchanges) is read from one `RunClock`.

use std::time::{Duration, Instant};

/// Reads of the wall clock between two instants when a clock starts
/// (`RunClock::new`); the tightest is kept.
const PAIRING_TRIES: usize = 8;

/// The run's clock: seconds since a fixed origin.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    origin: Instant,
    origin_unix: f64,
}

impl RunClock {
    /// A clock starting now.
    ///
    /// The origin pairs a monotonic instant with the wall clock. Two reads
    /// cannot be taken at once, and a thread preempted between them pairs
    /// the wall clock with an instant hundreds of microseconds away; two
    /// processes' clocks (shards on one host) would then disagree by that
    /// much. So the wall clock is read between two instants, a few times,
    /// and the tightest bracket's midpoint is kept: its error is at most
    /// half that bracket (normally well under a microsecond).
    pub fn new() -> Self {
        let unix_now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let mut best: Option<(Duration, Instant, f64)> = None;
        for _ in 0..PAIRING_TRIES {
            let before = Instant::now();
            let unix = unix_now();
            let after = Instant::now();
            let bracket = after - before;
            if best.is_none_or(|(b, _, _)| bracket < b) {
                best = Some((bracket, before + bracket / 2, unix));
            }
        }
        let (_, origin, origin_unix) =
            best.unwrap_or_else(|| (Duration::ZERO, Instant::now(), unix_now()));
        RunClock {
            origin,
            origin_unix,
        }
    }

    /// Seconds since the origin.
    pub fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// The run-clock time of `instant` (0 for one before the origin), for a
    /// caller that already read the clock.
    pub fn at(&self, instant: Instant) -> f64 {
        instant.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// A run-clock time as Unix seconds (wall clock at the origin + elapsed,
    /// so later wall-clock steps do not bend it).
    pub fn unix(&self, t: f64) -> f64 {
        self.origin_unix + t
    }
}

impl Default for RunClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clocks_started_apart_agree_on_the_unix_time_of_one_instant() {
        // Shards on one host compare their clocks' Unix times: two clocks
        // must map the same instant to the same Unix time, up to the
        // pairing error the tightest bracket leaves.
        let a = RunClock::new();
        std::thread::sleep(Duration::from_millis(5));
        let b = RunClock::new();
        let t = Instant::now();
        let (ua, ub) = (a.unix(a.at(t)), b.unix(b.at(t)));
        assert!((ua - ub).abs() < 50e-6, "{ua} vs {ub}");
    }

    #[test]
    fn run_time_counts_from_the_origin() {
        let c = RunClock::new();
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.now() >= t0 + 0.002);
        assert!((c.unix(1.5) - c.unix(0.0) - 1.5).abs() < 1e-9);
    }
}
