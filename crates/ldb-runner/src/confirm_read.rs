//! The confirming `/metrics` read of a sustained window (methodology §9).
//!
//! With `--metrics-interval 10` a window holds two to four readings of the
//! server's gauges, and a queue counts towards the capacity verdict only
//! when two of them saw one: one reading may have caught a restarting
//! request's moment in the queue. When exactly one reading saw a queue, the
//! verdict rests on that reading alone, so one more read is taken before it
//! is final: at the window's end, after the end scrape has answered and
//! while the streams still run (so the server is still loaded like the
//! window), at least [`CONFIRM_SPACING_S`] after the lone reading. It is
//! bounded like every scrape (no answer in 5 s: no confirmation), enters no
//! mean, and is recorded in the cell's `server_gauge_basis`.

use std::time::Duration;

use ldb_client::scrape::Scrape;

use crate::cell_window::{ScrapeTask, join_scrape};
use crate::ctx::RunCtx;
use crate::pool::StreamPool;

/// The least time between the lone queue reading and the confirming read:
/// a replacement request waits in the queue for one engine step (tens of
/// milliseconds), so a read right after the one that caught it would
/// likely catch the same moment.
pub(crate) const CONFIRM_SPACING_S: f64 = 0.5;

/// Whether a reading saw a non-empty queue.
fn saw_queue(s: &Scrape) -> bool {
    s.snap.waiting.unwrap_or(0.0) > 0.0
}

/// The one reading that saw a queue, when exactly one did.
pub(crate) fn lone_queue_reading<'a>(
    reads: impl IntoIterator<Item = &'a Scrape>,
) -> Option<&'a Scrape> {
    let mut queued = reads.into_iter().filter(|s| saw_queue(s));
    let first = queued.next()?;
    queued.next().is_none().then_some(first)
}

/// Send the confirming read when the window's readings (`start`, the
/// periodic ones, `end`) have exactly one with a queue; `None` otherwise,
/// without `/metrics`, or when the read failed.
pub(crate) async fn confirm_lone_queue(
    rc: &RunCtx,
    start: Option<&Scrape>,
    sched: &[Scrape],
    end: Option<&Scrape>,
) -> Option<Scrape> {
    if !rc.metrics {
        return None;
    }
    let lone = lone_queue_reading(start.into_iter().chain(sched).chain(end))?;
    let wait = lone.t + CONFIRM_SPACING_S - rc.clock.now();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    rc.scraper.scrape_once().await
}

/// At the window's end, streams still running: the answers of the start
/// and end scrapes, then the confirming read when one reading alone saw a
/// queue ([`confirm_lone_queue`]); then the streams are cancelled (unless
/// the interference probe keeps them for its stretch: `interference.rs`).
pub(crate) async fn edge_reads(
    rc: &RunCtx,
    [start, end]: [ScrapeTask; 2],
    sched: &[Scrape],
    pool: &StreamPool,
) -> (Option<Scrape>, Option<Scrape>, Option<Scrape>) {
    let end = join_scrape(end).await;
    let start = join_scrape(start).await;
    let confirm = confirm_lone_queue(rc, start.as_ref(), sched, end.as_ref()).await;
    if !crate::interference::wanted(rc) {
        pool.cancel();
    }
    (start, end, confirm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::engine::ServerSnapshot;

    fn read(t: f64, waiting: Option<f64>) -> Scrape {
        Scrape {
            seq: 0,
            t,
            sent: t - 0.01,
            snap: ServerSnapshot {
                waiting,
                ..ServerSnapshot::default()
            },
            parts: Vec::new(),
        }
    }

    #[test]
    fn only_a_single_queue_reading_asks_for_confirmation() {
        let (a, b, c) = (read(0.0, Some(0.0)), read(5.0, Some(2.0)), read(10.0, None));
        assert_eq!(lone_queue_reading([&a, &b, &c]).map(|s| s.t), Some(5.0));
        let d = read(7.0, Some(1.0));
        assert!(
            lone_queue_reading([&a, &b, &d, &c]).is_none(),
            "two saw one"
        );
        assert!(lone_queue_reading([&a, &c]).is_none(), "none saw one");
    }
}
