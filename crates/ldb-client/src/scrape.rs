//! `/metrics` scraping on its own task, with timestamps.
//!
//! The measurement loop never waits on a scrape: it reads the latest one from
//! a watch channel. Each scrape carries the run-clock time at which its answer
//! arrived, so counter deltas divide by the real interval between scrapes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_core::document::MetricsLost;
use ldb_core::engine::{Engine, ServerSnapshot, server_snapshot};
use ldb_core::prometheus::MetricSet;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::http::Http;
use crate::stream::RunClock;

/// One scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Sequence number (increments per successful scrape).
    pub seq: u64,
    /// Run-clock time the answer arrived.
    pub t: f64,
    /// Run-clock time the request was sent.
    pub sent: f64,
    /// Engine-independent values.
    pub snap: ServerSnapshot,
}

/// Failed scrapes in a row after which `/metrics` counts as lost.
const LOST_AFTER: u32 = 3;

/// How the scrapes have gone: the unbroken run of failures, and the loss
/// once that run reached [`LOST_AFTER`].
#[derive(Debug, Default)]
struct Health {
    failures_in_row: u32,
    first_failure_unix: f64,
    lost: Option<MetricsLost>,
}

/// Handle to the scraper task.
#[derive(Clone)]
pub struct Scraper {
    rx: watch::Receiver<Option<Arc<Scrape>>>,
    http: Http,
    engine: Engine,
    clock: RunClock,
    stop: CancellationToken,
    health: Arc<Mutex<Health>>,
}

impl Scraper {
    /// Start scraping every `interval` (no task when `enabled` is false).
    pub fn start(
        http: Http,
        engine: Engine,
        clock: RunClock,
        interval: Duration,
        enabled: bool,
    ) -> Scraper {
        let (tx, rx) = watch::channel(None);
        let stop = CancellationToken::new();
        let s = Scraper {
            rx,
            http,
            engine,
            clock,
            stop: stop.clone(),
            health: Arc::default(),
        };
        if enabled {
            let me = s.clone();
            tokio::spawn(async move {
                let mut seq = 0;
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    if let Some(mut sc) = me.scrape_once().await {
                        seq += 1;
                        sc.seq = seq;
                        let _ = tx.send(Some(Arc::new(sc)));
                    }
                }
            });
        }
        s
    }

    /// One scrape now (also used for window-edge snapshots). A failure (no
    /// answer in 5 s, a status other than 200, an answer without one
    /// Prometheus sample) is `None`, and counts towards [`Scraper::lost`].
    pub async fn scrape_once(&self) -> Option<Scrape> {
        let sent = self.clock.now();
        let set = match self.http.get_text("/metrics", Duration::from_secs(5)).await {
            Ok((200, text)) => {
                let set = MetricSet::parse(&text);
                if set.samples.is_empty() {
                    let n = text.len();
                    return self.failed(format!("not Prometheus text (no sample in {n} bytes)"));
                }
                set
            }
            Ok((status, _)) => return self.failed(format!("HTTP {status}")),
            Err(e) => return self.failed(e.to_string()),
        };
        self.succeeded();
        let t = self.clock.now();
        let snap = server_snapshot(self.engine, &set);
        Some(Scrape {
            seq: 0,
            t,
            sent,
            snap,
        })
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self, reason: String) -> Option<Scrape> {
        let now = self.clock.unix(self.clock.now());
        let mut h = self.health();
        if h.failures_in_row == 0 {
            h.first_failure_unix = now;
        }
        h.failures_in_row += 1;
        let (in_row, first) = (h.failures_in_row, h.first_failure_unix);
        match &mut h.lost {
            Some(l) if l.back_unix.is_none() => l.reason = reason,
            // Lost before, back, and lost again: the record keeps the first
            // loss (and says it came back once).
            Some(_) => {}
            None if in_row >= LOST_AFTER => {
                h.lost = Some(MetricsLost {
                    since_unix: first,
                    reason,
                    back_unix: None,
                });
            }
            None => {}
        }
        None
    }

    fn succeeded(&self) {
        let now = self.clock.unix(self.clock.now());
        let mut h = self.health();
        h.failures_in_row = 0;
        if let Some(l) = &mut h.lost
            && l.back_unix.is_none()
        {
            l.back_unix = Some(now);
        }
    }

    /// `/metrics` stopped answering usefully ([`LOST_AFTER`] failed scrapes
    /// in a row): since when, why, and whether it came back.
    pub fn lost(&self) -> Option<MetricsLost> {
        self.health().lost.clone()
    }

    /// The latest scrape, if any.
    pub fn latest(&self) -> Option<Arc<Scrape>> {
        self.rx.borrow().clone()
    }

    /// Wait for a scrape that was *sent* after `t` (fresh state), up to `timeout`.
    pub async fn fresh_after(&self, t: f64, timeout: Duration) -> Option<Arc<Scrape>> {
        let mut rx = self.rx.clone();
        let wait = async {
            loop {
                if let Some(s) = rx.borrow_and_update().clone()
                    && s.sent >= t
                {
                    return Some(s);
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    /// Stop the task.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}
