//! Sending requests at their scheduled times, each on its own task, with
//! `--max-in-flight` slots and a time limit, as the open-loop cells do
//! (`crate::open_loop`); the bodies are handed over one by one, so a trace
//! is never held whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use ldb_core::live::replay::ReplayProgress;

use super::progress::{Counters, Ticker};
use crate::ctx::RunCtx;

/// A finished request: its index, scheduled run-clock time and outcome.
pub(crate) type Finished = (usize, f64, StreamOutcome);

/// The sending side of one replay.
pub(crate) struct Dispatcher {
    /// Run-clock time of schedule time 0.
    pub start: f64,
    deadline: tokio::time::Instant,
    pub skip: CancellationToken,
    cap: Option<Arc<Semaphore>>,
    pub window: Arc<SharedWindow>,
    pub counters: Arc<CellCounters>,
    tx: mpsc::UnboundedSender<Finished>,
    pub in_flight: Arc<AtomicU64>,
    /// Requests handed to [`Dispatcher::send`] so far, and those finished.
    pub sent: Arc<AtomicU64>,
    pub finished: Arc<AtomicU64>,
    most: Arc<AtomicU64>,
    /// A request waited for a `--max-in-flight` slot.
    pub capped: bool,
    /// The counts the live view shows.
    pub progress: Arc<Counters>,
    /// Publishes them until the dispatcher is gone (after `collect`).
    _ticker: Ticker,
}

/// Why a request was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotSent {
    /// Skipped or stopped by the user.
    Stopped,
    /// The time limit came while every slot was taken.
    NoSlot,
}

impl Dispatcher {
    /// A dispatcher whose schedule starts at `start` and sends nothing after
    /// run-clock time `limit`; the live view shows `progress` with its counts.
    pub fn new(
        rc: &RunCtx,
        start: f64,
        limit: f64,
        progress: ReplayProgress,
    ) -> (Self, mpsc::UnboundedReceiver<Finished>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let window = Arc::new(SharedWindow::default());
        window.open(start);
        // throughput over time counts tokens by arrival from the start
        let cell_counters = Arc::new(CellCounters::default());
        cell_counters.arrivals.start_at(start);
        let deadline = tokio::time::Instant::now()
            + Duration::from_secs_f64((limit - rc.clock.now()).max(0.0));
        let d = Dispatcher {
            start,
            deadline,
            skip: rc.controls.new_skip(),
            cap: (rc.cfg.open_loop.max_in_flight > 0)
                .then(|| Arc::new(Semaphore::new(rc.cfg.open_loop.max_in_flight as usize))),
            window,
            counters: cell_counters,
            tx,
            in_flight: Arc::new(AtomicU64::new(0)),
            sent: Arc::new(AtomicU64::new(0)),
            finished: Arc::new(AtomicU64::new(0)),
            most: Arc::new(AtomicU64::new(0)),
            capped: false,
            progress: counters.clone(),
            _ticker: Ticker::start(rc, progress, counters, start),
        };
        (d, rx)
    }

    /// Caps this process's requests in flight at `cap` (0: no cap) instead
    /// of `--max-in-flight`: over shards each has its part of it.
    pub fn set_cap(&mut self, cap: u64) {
        self.cap = (cap > 0).then(|| Arc::new(Semaphore::new(cap as usize)));
    }

    /// Most requests in flight at once so far.
    pub fn most(&self) -> u64 {
        self.most.load(Ordering::Relaxed)
    }

    /// Waits until schedule time `due`; false when the user stopped.
    pub async fn wait_until(&self, rc: &RunCtx, due: f64) -> bool {
        let wait = self.start + due - rc.clock.now();
        if wait > 0.0 {
            tokio::select! {
                _ = self.skip.cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
        }
        !self.skip.is_cancelled()
    }

    async fn permit(&mut self) -> Result<Option<OwnedSemaphorePermit>, NotSent> {
        let Some(sem) = &self.cap else {
            return Ok(None);
        };
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Ok(Some(p));
        }
        self.capped = true;
        tokio::select! {
            _ = self.skip.cancelled() => Err(NotSent::Stopped),
            _ = tokio::time::sleep_until(self.deadline) => Err(NotSent::NoSlot),
            p = sem.clone().acquire_owned() => p.map(Some).map_err(|_| NotSent::Stopped),
        }
    }

    /// Sends request `index`, due at schedule time `due`, on its own task.
    pub async fn send(
        &mut self,
        rc: &RunCtx,
        index: usize,
        due: f64,
        body: Bytes,
    ) -> Result<(), NotSent> {
        let permit = self.permit().await?;
        self.sent.fetch_add(1, Ordering::SeqCst);
        let env = StreamEnv {
            window: self.window.clone(),
            counters: self.counters.clone(),
            cancel: self.skip.child_token(),
            idle_timeout: rc.cfg.timing.idle_timeout(),
            first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        };
        let tx = self.tx.clone();
        let (in_flight, most) = (self.in_flight.clone(), self.most.clone());
        let finished = self.finished.clone();
        let scheduled = self.start + due;
        let progress = self.progress.clone();
        Counters::bump(&progress.sent);
        tokio::spawn(async move {
            let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            progress.in_flight.store(now, Ordering::Relaxed);
            most.fetch_max(now, Ordering::Relaxed);
            let out = run_stream(&env, body).await;
            let left = in_flight.fetch_sub(1, Ordering::Relaxed) - 1;
            progress.in_flight.store(left, Ordering::Relaxed);
            progress.ended(out.cancelled || out.track.error().is_some());
            finished.fetch_add(1, Ordering::SeqCst);
            drop(permit);
            let _ = tx.send((index, scheduled, out));
        });
        Ok(())
    }

    /// Gathers every finished request, cancelling the rest at run-clock time
    /// `limit`; the flag says whether the limit came.
    pub async fn collect(
        self,
        rc: &RunCtx,
        mut rx: mpsc::UnboundedReceiver<Finished>,
        limit: f64,
        mut on_tick: impl FnMut(usize),
    ) -> (Vec<Finished>, bool) {
        let Dispatcher { tx, skip, .. } = self;
        drop(tx);
        let mut outs = Vec::new();
        loop {
            if rc.clock.now() >= limit {
                skip.cancel();
            }
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(o) => outs.push(o),
                    None => break,
                },
                _ = tokio::time::sleep(Duration::from_millis(250)) => on_tick(outs.len()),
            }
        }
        (outs, rc.clock.now() >= limit)
    }
}
