//! The event-loop lag probe: a timer due every [`PERIOD`] on the benchmark's
//! own runtime, and how late it fires. A token that has arrived waits about
//! as long before the client reads it, so the lateness is the client's own
//! share of every latency it measures (see `ldb_core::headroom`).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the probe's timer is due.
pub(crate) const PERIOD: Duration = Duration::from_millis(10);

/// A running probe; [`LagProbe::finish`] stops it and returns its samples.
pub(crate) struct LagProbe {
    stop: CancellationToken,
    task: JoinHandle<Vec<f64>>,
}

impl LagProbe {
    /// Start probing now, on the current runtime.
    pub(crate) fn start() -> LagProbe {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            // 100 samples a second; a few minutes of window stay small.
            let mut lateness = Vec::with_capacity(4096);
            let mut due = Instant::now() + PERIOD;
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep_until(due) => {}
                }
                let now = Instant::now();
                lateness.push(now.saturating_duration_since(due).as_secs_f64());
                // After a long delay the next tick is one period from now:
                // a frozen stretch counts once, not as a burst of late ticks.
                due = (due + PERIOD).max(now + PERIOD / 2);
            }
            lateness
        });
        LagProbe { stop, task }
    }

    /// Stop and return the lateness of every tick, seconds.
    pub(crate) async fn finish(self) -> Vec<f64> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_idle_runtime_fires_about_on_time() {
        let p = LagProbe::start();
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let mut v = p.finish().await;
        // one sample per 10 ms, fewer only if the machine is very busy
        assert!((40..=101).contains(&v.len()), "{}", v.len());
        v.sort_by(f64::total_cmp);
        assert!(v[v.len() / 2] < 0.02, "median lateness {v:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_runtime_shows_as_lateness() {
        let p = LagProbe::start();
        tokio::time::sleep(Duration::from_millis(30)).await;
        // hog the only runtime thread for 120 ms, as a client with more
        // ready work than CPU would
        std::thread::sleep(Duration::from_millis(120));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let v = p.finish().await;
        let worst = v.iter().copied().fold(0.0, f64::max);
        assert!(worst >= 0.1, "{v:?}");
        // counted once, not as a dozen late ticks
        assert_eq!(v.iter().filter(|x| **x >= 0.05).count(), 1, "{v:?}");
    }
}
