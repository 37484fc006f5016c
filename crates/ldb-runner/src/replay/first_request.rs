//! After a prefix-cache reset, whether the replay's first request found the
//! cache empty (docs/workloads.md): the cached tokens its answer reported
//! (`usage.prompt_tokens_details.cached_tokens`), else the server's
//! prefix-hit counter between the scrape before the replay and one taken as
//! soon as the first request ended, kept only when no second request had
//! been sent by the time that scrape answered (the server then had seen the
//! first request alone).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ldb_client::scrape::Scrape;

use super::dispatch::{Dispatcher, Finished};
use crate::ctx::RunCtx;
use crate::prefix_achieved::counted_between;

/// How often the watch looks at the dispatcher's counts.
const POLL: Duration = Duration::from_millis(5);

/// What the watch follows: the dispatcher's counts, and whether the
/// sending loop has ended.
pub(super) struct FirstRequestWatch {
    sent: Arc<AtomicU64>,
    finished: Arc<AtomicU64>,
    pub(super) sending_done: AtomicBool,
}

impl FirstRequestWatch {
    pub(super) fn new(d: &Dispatcher) -> Self {
        Self {
            sent: d.sent.clone(),
            finished: d.finished.clone(),
            sending_done: AtomicBool::new(false),
        }
    }

    /// The prefix-cache hits the server counted for the first request
    /// alone, from the counter; `None` when a second request was sent first,
    /// the server has no such counter, nothing was sent, or the replay's
    /// time limit (run-clock `limit`) came first: the wait for a request
    /// that never ends must not outlast the replay.
    pub(super) async fn counted_hits(
        &self,
        rc: &RunCtx,
        before: Option<&Scrape>,
        limit: f64,
    ) -> Option<f64> {
        let before = before.filter(|b| b.snap.prefix_queries.is_some())?;
        loop {
            let sent = self.sent.load(Ordering::SeqCst);
            if sent > 1 || (sent == 0 && self.sending_done.load(Ordering::SeqCst)) {
                return None;
            }
            if rc.clock.now() >= limit {
                return None;
            }
            if sent == 1 && self.finished.load(Ordering::SeqCst) >= 1 {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let after = rc.scraper.scrape_once().await?;
        if self.sent.load(Ordering::SeqCst) > 1 {
            return None;
        }
        counted_between(before, &after).map(|c| c.hits)
    }
}

/// The first request's cached tokens and where they came from: its own
/// answer's report, else the counted hits.
pub(super) fn first_cached(outs: &[Finished], counted: Option<f64>) -> (Option<u64>, &'static str) {
    let reported = outs
        .iter()
        .find(|(i, _, _)| *i == 0)
        .and_then(|(_, _, o)| o.cached_tokens);
    match (reported, counted) {
        (Some(n), _) => (Some(n), "usage"),
        (None, Some(h)) => (Some(h.round() as u64), "metrics"),
        (None, None) => (None, ""),
    }
}
