//! `/metrics` scraping on its own task, with timestamps.
//!
//! The measurement loop never waits on a scrape: it reads the latest one from
//! a watch channel. Each scrape carries the run-clock time at which its answer
//! arrived, so counter deltas divide by the real interval between scrapes.

use std::sync::Arc;
use std::time::Duration;

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

/// Handle to the scraper task.
#[derive(Clone)]
pub struct Scraper {
    rx: watch::Receiver<Option<Arc<Scrape>>>,
    http: Http,
    engine: Engine,
    clock: RunClock,
    stop: CancellationToken,
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

    /// One scrape now (also used for window-edge snapshots).
    pub async fn scrape_once(&self) -> Option<Scrape> {
        let sent = self.clock.now();
        let (status, text) = self
            .http
            .get_text("/metrics", Duration::from_secs(5))
            .await
            .ok()?;
        if status != 200 {
            return None;
        }
        let t = self.clock.now();
        let snap = server_snapshot(self.engine, &MetricSet::parse(&text));
        Some(Scrape {
            seq: 0,
            t,
            sent,
            snap,
        })
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
