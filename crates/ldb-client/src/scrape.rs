//! `/metrics` scraping on its own task, with timestamps.
//!
//! The measurement loop never waits on a scrape: it reads the latest one from
//! a watch channel. Each scrape carries the run-clock time at which its answer
//! arrived, so counter deltas divide by the real interval between scrapes.
//!
//! Reading `/metrics` is not free for the server: vLLM and SGLang render it in
//! Python, on the CPU that also feeds the engine (on a CPU-bound vLLM, a scrape
//! every 0.5 s cost ~8 % of its decode rate; docs/performance.md §3). So the
//! scraper has two paces: a quick one while nothing is measured (ramp-up
//! readiness, idle and drain waits want fresh gauges), and a slower one, or
//! none, while a [`Measuring`] guard is held (a window, a burst batch, an
//! open-loop cell, a prefill probe), whose counters come from the
//! measurement's own edge scrapes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_core::document::MetricsLost;
use ldb_core::engine::{Engine, ServerSnapshot, server_snapshot};
use ldb_core::prometheus::MetricSet;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::http::Http;
use crate::replicas::Replicas;
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
    /// Engine-independent values (over `--metrics-url` replicas: combined,
    /// `ldb_core::replicas::combine`).
    pub snap: ServerSnapshot,
    /// `--metrics-url`: each replica's own values, in the order the URLs
    /// were given, so a span's counters can be taken per replica
    /// (`ldb_core::replicas::fleet_delta`); empty for one server.
    pub parts: Vec<ServerSnapshot>,
}

impl Scrape {
    /// When the server most likely read its counters for this page: some
    /// instant between the request's sending and the answer's arrival, taken
    /// as the middle. A server short of CPU may answer a second or more
    /// late (seen on a CPU vLLM whose engine processes kept both cores busy),
    /// so the arrival alone can be far from the reading.
    pub fn read_at(&self) -> f64 {
        (self.sent + self.t) / 2.0
    }
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

/// How often the background task reads `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScrapePace {
    /// While nothing is measured.
    pub idle: Duration,
    /// While a [`Measuring`] guard is held; `None`: no background scrape
    /// then (the measurement's own edge scrapes only).
    pub measuring: Option<Duration>,
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
    /// Measurements under way (held [`Measuring`] guards).
    measuring: Arc<watch::Sender<u32>>,
    /// SGLang attention-TP group size under DP attention (see
    /// `MetricSet::parse_grouped`); 0 or 1 otherwise.
    attn_tp_size: u64,
    /// `--metrics-url`: replicas read and combined instead of the server's
    /// own `/metrics` (empty: the server's).
    replicas: Arc<Replicas>,
}

/// Held while a measurement runs: the scraper keeps its measuring pace
/// until every guard is dropped.
#[must_use = "the measuring pace lasts only while the guard is held"]
pub struct Measuring(Arc<watch::Sender<u32>>);

impl Drop for Measuring {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Scraper {
    /// Start scraping at `pace` (no task when `enabled` is false).
    pub fn start(
        http: Http,
        engine: Engine,
        clock: RunClock,
        pace: ScrapePace,
        enabled: bool,
    ) -> Scraper {
        Scraper::start_grouped(http, engine, clock, pace, enabled, 0)
    }

    /// [`Scraper::start`] for an SGLang server whose attention-TP groups
    /// have `attn_tp_size` ranks (`Discovery::attn_tp_size`).
    pub fn start_grouped(
        http: Http,
        engine: Engine,
        clock: RunClock,
        pace: ScrapePace,
        enabled: bool,
        attn_tp_size: u64,
    ) -> Scraper {
        Scraper::start_replicas(
            http,
            engine,
            clock,
            pace,
            enabled,
            attn_tp_size,
            Replicas::default(),
        )
    }

    /// [`Scraper::start_grouped`] reading `replicas` (when not empty)
    /// instead of the server's own `/metrics` (`--metrics-url`).
    pub fn start_replicas(
        http: Http,
        engine: Engine,
        clock: RunClock,
        pace: ScrapePace,
        enabled: bool,
        attn_tp_size: u64,
        replicas: Replicas,
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
            measuring: Arc::new(watch::channel(0).0),
            attn_tp_size,
            replicas: Arc::new(replicas),
        };
        if enabled {
            let me = s.clone();
            tokio::spawn(async move { me.run(pace, tx).await });
        }
        s
    }

    /// The background loop: scrape when due at the current pace; a change
    /// of pace moves the next scrape (into a measurement: one period after
    /// its start, which has its own edge scrape; out of one: one idle
    /// period after the last scrape, so at once after a long window).
    async fn run(self, pace: ScrapePace, tx: watch::Sender<Option<Arc<Scrape>>>) {
        use tokio::time::{Instant, sleep_until};
        // Far enough to mean "not while measuring" without overflowing.
        const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
        let mut pace_rx = self.measuring.subscribe();
        let mut seq = 0;
        let mut last_sent = Instant::now();
        let mut due = last_sent;
        let period = |measuring: bool| {
            if measuring {
                pace.measuring.unwrap_or(NEVER)
            } else {
                pace.idle
            }
        };
        let mut measuring = *pace_rx.borrow_and_update() > 0;
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => break,
                changed = pace_rx.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let now_measuring = *pace_rx.borrow_and_update() > 0;
                    if now_measuring != measuring {
                        measuring = now_measuring;
                        due = if measuring {
                            Instant::now() + period(true)
                        } else {
                            last_sent + period(false)
                        };
                    }
                    continue;
                }
                _ = sleep_until(due) => {}
            }
            last_sent = Instant::now();
            if let Some(mut sc) = self.scrape_once().await {
                seq += 1;
                sc.seq = seq;
                let _ = tx.send(Some(Arc::new(sc)));
            }
            // A scrape slower than the period is followed at once by the
            // next, never by a burst of catch-up scrapes.
            due = (last_sent + period(measuring)).max(Instant::now());
        }
    }

    /// Switch to the measuring pace until the guard is dropped.
    pub fn measuring(&self) -> Measuring {
        self.measuring.send_modify(|n| *n += 1);
        Measuring(Arc::clone(&self.measuring))
    }

    /// One scrape now (also used for window-edge snapshots). A failure (no
    /// answer in 5 s, a status other than 200, an answer without one
    /// Prometheus sample) is `None`, and counts towards [`Scraper::lost`].
    pub async fn scrape_once(&self) -> Option<Scrape> {
        let sent = self.clock.now();
        if !self.replicas.is_empty() {
            let combined = self.replicas.scrape(self.engine, self.attn_tp_size).await;
            let t = self.clock.now();
            return match combined {
                Ok((snap, parts)) => {
                    self.succeeded();
                    Some(Scrape {
                        seq: 0,
                        t,
                        sent,
                        snap,
                        parts,
                    })
                }
                Err(reason) => self.failed(reason),
            };
        }
        let answer = self.http.get_text("/metrics", Duration::from_secs(5)).await;
        // Arrival, before parsing: the page's values are from no later.
        let t = self.clock.now();
        let set = match answer {
            Ok((200, text)) => {
                let set = MetricSet::parse_grouped(&text, self.attn_tp_size);
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
        let snap = server_snapshot(self.engine, &set);
        Some(Scrape {
            seq: 0,
            t,
            sent,
            snap,
            parts: Vec::new(),
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
