//! The stream pool of a sustained cell: C workers that each keep one request
//! in flight (a finished or failed request is followed by the next), the
//! shared window they count into, and the outcomes they hand back.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ctx::RunCtx;

/// Pause after a failed request before the stream sends the next one, so a
/// failing server is not hammered in a tight loop.
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How long a stream may take to stop once cancelled.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// C streams and what they reported.
pub(crate) struct StreamPool {
    /// The window the streams count their tokens into.
    pub window: Arc<SharedWindow>,
    /// Live counters shared with the streams.
    pub counters: Arc<CellCounters>,
    /// The text of the first streams, for the dashboard's output view.
    pub sinks: Vec<Arc<Mutex<String>>>,
    /// Finished requests so far.
    pub outcomes: Vec<StreamOutcome>,
    /// The first failure no later request can escape.
    pub fatal: Option<String>,
    /// When the streams were launched (run clock).
    pub launch: f64,
    concurrency: u32,
    cancel: CancellationToken,
    rx: mpsc::UnboundedReceiver<StreamOutcome>,
    workers: Vec<JoinHandle<()>>,
}

impl StreamPool {
    /// Start `concurrency` streams, stream s sending `bodies[s mod len]`
    /// (one body per prefix group, `prefix_groups.rs`); `text_slots` of them
    /// copy their text for the dashboard. Cancelling `parent` stops them all.
    pub(crate) fn launch(
        rc: &RunCtx,
        bodies: Vec<Bytes>,
        concurrency: u32,
        text_slots: u32,
        parent: &CancellationToken,
    ) -> StreamPool {
        let base = StreamEnv {
            idle_timeout: rc.cfg.timing.idle_timeout(),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        };
        Self::launch_spread(
            &base,
            bodies,
            concurrency,
            text_slots,
            parent,
            rc.clock.now(),
        )
    }

    /// The same from a stream environment alone (a follower shard has no
    /// run context): `base` gives the client, clock and idle limit; each
    /// stream gets the pool's window, counters and cancellation.
    pub(crate) fn launch_env(
        base: &StreamEnv,
        body: Bytes,
        concurrency: u32,
        text_slots: u32,
        parent: &CancellationToken,
        now: f64,
    ) -> StreamPool {
        Self::launch_spread(base, vec![body], concurrency, text_slots, parent, now)
    }

    /// [`Self::launch_env`] with one body per prefix group, taken in turn.
    fn launch_spread(
        base: &StreamEnv,
        bodies: Vec<Bytes>,
        concurrency: u32,
        text_slots: u32,
        parent: &CancellationToken,
        now: f64,
    ) -> StreamPool {
        let window = Arc::new(SharedWindow::default());
        let counters = Arc::new(CellCounters::default());
        let cancel = parent.child_token();
        let sinks: Vec<Arc<Mutex<String>>> = (0..concurrency.min(text_slots))
            .map(|_| Arc::new(Mutex::new(String::new())))
            .collect();
        let (tx, rx) = mpsc::unbounded_channel::<StreamOutcome>();
        let workers = (0..concurrency)
            .map(|slot| {
                // No first-token limit: the cell bounds the wait (its
                // readiness limit, then the window, after which every
                // stream is cancelled).
                let env = StreamEnv {
                    window: window.clone(),
                    counters: counters.clone(),
                    cancel: cancel.clone(),
                    text_sink: sinks.get(slot as usize).cloned(),
                    slot,
                    ..base.clone()
                };
                let body = bodies[slot as usize % bodies.len().max(1)].clone();
                tokio::spawn(worker(env, body, tx.clone()))
            })
            .collect();
        StreamPool {
            window,
            counters,
            sinks,
            outcomes: Vec::new(),
            fatal: None,
            launch: now,
            concurrency,
            cancel,
            rx,
            workers,
        }
    }

    /// Gather finished requests, keeping the first fatal failure.
    pub(crate) fn collect(&mut self) {
        while let Ok(o) = self.rx.try_recv() {
            if self.fatal.is_none()
                && let Some(e) = o.track.error().filter(|e| e.is_fatal())
            {
                self.fatal = Some(e.to_string());
            }
            self.outcomes.push(o);
        }
    }

    /// The cell cannot be saved: a fatal failure, or failures beyond the
    /// limit (see [`failing`]).
    pub(crate) fn hopeless(&self, max_error_rate: f64) -> bool {
        self.fatal.is_some() || failing(&self.counters, self.concurrency, max_error_rate)
    }

    /// Streams producing tokens right now.
    pub(crate) fn producing(&self) -> u32 {
        self.counters.producing.load(Ordering::Relaxed).max(0) as u32
    }

    /// Drop every stream's connection at once.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Wait for the cancelled streams to end and gather their outcomes;
    /// `on_stuck` is told about a stream that did not stop in time.
    pub(crate) async fn join(&mut self, on_stuck: impl Fn()) {
        for w in self.workers.drain(..) {
            if tokio::time::timeout(STOP_WAIT, w).await.is_err() {
                on_stuck();
            }
        }
        self.collect();
    }
}

async fn worker(env: StreamEnv, body: Bytes, tx: mpsc::UnboundedSender<StreamOutcome>) {
    while !env.cancel.is_cancelled() {
        let out = run_stream(&env, body.clone()).await;
        let fatal = out.track.error().is_some_and(|e| e.is_fatal());
        let failed = out.track.error().is_some();
        if tx.send(out).is_err() || fatal {
            break;
        }
        if failed {
            tokio::select! {
                _ = env.cancel.cancelled() => break,
                _ = tokio::time::sleep(RETRY_PAUSE) => {}
            }
        }
    }
}

/// Failures are beyond saving the cell: at least 3, and either nothing has
/// produced a token yet or every stream failed once on average while the
/// failed share is above the limit. The cell then ends early instead of
/// waiting out its readiness limit or window.
fn failing(counters: &CellCounters, concurrency: u32, max_rate: f64) -> bool {
    let failed = counters.failed.load(Ordering::Relaxed);
    let started = counters.started.load(Ordering::Relaxed).max(1);
    failed >= 3
        && (counters.tokens.load(Ordering::Relaxed) == 0
            || (failed >= u64::from(concurrency) && failed as f64 / started as f64 > max_rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(started: u64, failed: u64, tokens: u64) -> CellCounters {
        let c = CellCounters::default();
        c.started.store(started, Ordering::Relaxed);
        c.failed.store(failed, Ordering::Relaxed);
        c.tokens.store(tokens, Ordering::Relaxed);
        c
    }

    #[test]
    fn a_few_failures_never_end_a_cell() {
        assert!(!failing(&counters(10, 2, 0), 4, 0.02));
    }

    #[test]
    fn three_failures_before_any_token_end_it() {
        assert!(failing(&counters(3, 3, 0), 4, 0.02));
    }

    #[test]
    fn once_tokens_flow_it_takes_one_failure_per_stream_above_the_rate() {
        // 4 streams: 3 failures of 100 is below one per stream.
        assert!(!failing(&counters(100, 3, 500), 4, 0.02));
        // 4 failures of 100 = 4 % > 2 %.
        assert!(failing(&counters(100, 4, 500), 4, 0.02));
        // 4 failures of 1000 = 0.4 % ≤ 2 %.
        assert!(!failing(&counters(1000, 4, 500), 4, 0.02));
    }
}
