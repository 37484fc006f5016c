//! Publishing a replay's progress to the live view (the dashboard's replay
//! view, `ldb_core::live::replay`): the sending side and the request tasks
//! count into shared atomics, and a ticker copies them into the snapshot
//! four times a second, so a busy replay does not wake the view per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ldb_core::live::LiveEvent;
use ldb_core::live::replay::{ReplayKind, ReplayProgress};
use tokio_util::sync::CancellationToken;

use crate::ctx::RunCtx;

/// How often the view is refreshed.
const TICK: Duration = Duration::from_millis(250);

/// Counts shared by the sender and the request tasks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Requests whose scheduled time came.
    pub due: AtomicU64,
    /// Requests sent.
    pub sent: AtomicU64,
    /// Requests that completed.
    pub completed: AtomicU64,
    /// Requests that failed.
    pub errors: AtomicU64,
    /// Requests open now.
    pub in_flight: AtomicU64,
    /// Sessions whose every turn ended.
    pub sessions_done: AtomicU64,
}

impl Counters {
    /// One more of `c`.
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A request ended, completed or not.
    pub fn ended(&self, failed: bool) {
        Self::bump(if failed {
            &self.errors
        } else {
            &self.completed
        });
    }

    /// `base` with the counts as they stand, `elapsed` seconds in.
    fn progress(&self, base: &ReplayProgress, elapsed: f64) -> ReplayProgress {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ReplayProgress {
            due: get(&self.due),
            sent: get(&self.sent),
            completed: get(&self.completed),
            errors: get(&self.errors),
            in_flight: get(&self.in_flight),
            sessions_done: get(&self.sessions_done),
            elapsed: elapsed.max(0.0),
            ..base.clone()
        }
    }
}

/// The fixed part of a trace replay's progress: `scheduled` requests over
/// `span` seconds.
pub(crate) fn trace_progress(scheduled: u64, span: f64) -> ReplayProgress {
    ReplayProgress {
        kind: ReplayKind::Trace,
        scheduled,
        total: Some(span),
        ..ReplayProgress::default()
    }
}

/// The fixed part of a session run's progress.
pub(crate) fn session_progress(sessions: u64, turns: u32) -> ReplayProgress {
    ReplayProgress {
        kind: ReplayKind::Sessions,
        scheduled: sessions * u64::from(turns),
        sessions,
        turns,
        ..ReplayProgress::default()
    }
}

/// Publishes the progress until dropped (one last publication then).
pub(crate) struct Ticker {
    stop: CancellationToken,
    publish: Box<dyn Fn() + Send + Sync>,
}

impl Ticker {
    /// Starts publishing `base` with `counters`' counts, the elapsed time
    /// counted from run-clock time `start`.
    pub fn start(rc: &RunCtx, base: ReplayProgress, counters: Arc<Counters>, start: f64) -> Ticker {
        let (live, clock) = (rc.live.clone(), rc.clock);
        let publish = move || {
            let p = counters.progress(&base, clock.now() - start);
            live.send(LiveEvent::ReplayProgressed(Box::new(p)));
        };
        publish();
        let stop = CancellationToken::new();
        let publish: Arc<dyn Fn() + Send + Sync> = Arc::new(publish);
        let (tick, token) = (publish.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(TICK) => tick(),
                }
            }
        });
        Ticker {
            stop,
            publish: Box::new(move || publish()),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.cancel();
        (self.publish)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_land_in_the_progress() {
        let c = Counters::default();
        Counters::bump(&c.due);
        Counters::bump(&c.due);
        Counters::bump(&c.sent);
        c.ended(false);
        c.ended(true);
        let base = ReplayProgress {
            scheduled: 5,
            total: Some(9.0),
            ..ReplayProgress::default()
        };
        let p = c.progress(&base, 2.5);
        assert_eq!((p.due, p.sent, p.completed, p.errors), (2, 1, 1, 1));
        assert_eq!((p.scheduled, p.total, p.elapsed), (5, Some(9.0), 2.5));
        assert_eq!(c.progress(&base, -1.0).elapsed, 0.0);
    }
}
