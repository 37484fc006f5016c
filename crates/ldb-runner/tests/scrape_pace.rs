//! How often the benchmark reads `/metrics`: quickly while it waits for
//! readiness, at `--metrics-interval` inside a measurement window, and the
//! window's server numbers still come from its edge scrapes. The simulator
//! records when each `/metrics` read arrived.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, cell, config, start, within};
use ldb_core::document::ResultDocument;
use ldb_core::result::CellStatus;
use ldb_sim::SimHandle;

/// `/metrics` reads that arrived strictly between `from` and `to` (Unix s).
fn reads_between(sim: &SimHandle, from: f64, to: f64) -> usize {
    sim.stats()
        .http
        .metrics_arrivals_unix
        .iter()
        .filter(|&&t| t > from && t < to)
        .count()
}

/// One C = 2 cell of `duration` seconds at `--metrics-interval interval`:
/// the simulator (still up), the result, and the window's Unix start and end.
async fn one_cell(interval: f64, duration: f64) -> (SimHandle, ResultDocument, f64, f64) {
    let sim = start(FLAT, |_| {}).await;
    let mut cfg = config(&sim, &[2], &[0], duration);
    cfg.timing.metrics_interval = interval;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = cell(&doc, 2, 0);
    assert_eq!(r.ext.status, CellStatus::Ok, "{}", r.ext.status_reason);
    assert_eq!(doc.metadata.metrics_interval, Some(interval));
    let ws = r.ext.window_start_unix.expect("window start");
    let we = r.ext.window_end_unix.expect("window end");
    (sim, doc, ws, we)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_zero_reads_metrics_only_at_the_window_edges() {
    let _serial = SERIAL.lock().await;
    let (sim, doc, ws, we) = one_cell(0.0, 4.0).await;
    let r = cell(&doc, 2, 0);
    // The start scrape (and one sent just before the window) arrive in its
    // first second; after that nothing until the end scrape, which is sent
    // after the window closed. Every 0.5 s would be five reads here.
    assert_eq!(
        reads_between(&sim, ws + 1.0, we - 0.2),
        0,
        "background /metrics reads inside the window"
    );
    // Ramp-up keeps the quick pace: readiness holds for 3 s before the window.
    let ramp = reads_between(&sim, ws - 2.5, ws - 0.2);
    assert!(ramp >= 3, "{ramp} reads in the last 2.3 s of ramp-up");
    // The counters still bracket the window, and the start scrape gives the
    // scheduler its sample.
    let tps = r.aggregate_tps.expect("value");
    assert!(
        within(r.server_gen_throughput, tps, 0.05),
        "server {:.1} vs client {tps:.1}",
        r.server_gen_throughput
    );
    assert_eq!(r.sched.effective_concurrency, 2.0);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_reads_metrics_at_the_measuring_interval() {
    let _serial = SERIAL.lock().await;
    let (sim, _doc, ws, we) = one_cell(1.5, 6.0).await;
    // Due 1.5, 3.0 and 4.5 s after the start scrape (6.0 races the window's
    // end); every 0.5 s would be about ten.
    let inside = reads_between(&sim, ws + 1.0, we - 0.2);
    assert!(
        (2..=4).contains(&inside),
        "{inside} background reads in a 6 s window at 1.5 s"
    );
    sim.shutdown().await;
}

/// Issue 24 item 5: a `/metrics` that answers 1 s late. The server reads
/// its counters at the end of that second; the end scrape must be sent at the
/// window's end while the streams still run, or its reading falls after they
/// stopped and the server's rate reads about a quarter low on a 4 s window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_end_scrape_is_sent_before_the_streams_stop() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.faults.metrics_delay_s = 1.0).await;
    let mut cfg = config(&sim, &[2], &[0], 4.0);
    cfg.timing.metrics_interval = 0.0;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = cell(&doc, 2, 0);
    assert_eq!(r.ext.status, CellStatus::Ok, "{}", r.ext.status_reason);
    let tps = r.aggregate_tps.expect("value");
    assert!(
        within(r.server_gen_throughput, tps, 0.05),
        "server {:.1} vs client {tps:.1}",
        r.server_gen_throughput
    );
    sim.shutdown().await;
}

/// Issue 24 item 8: a window read only at its edges (`--metrics-interval
/// 0`) where the end scrape alone shows a queue (the simulator's phantom
/// queue, the first read 4 s after the streams started; the window runs
/// from about 1.2 s to 7.2 s). The verdict would rest on that one reading,
/// so the cell reads `/metrics` once more before it is final, streams still
/// running. A queue the confirming read no longer sees leaves the cell `ok`;
/// one it sees too makes it capacity-limited. The basis records the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_queue_reading_is_confirmed_or_dismissed_by_one_more_read() {
    let _serial = SERIAL.lock().await;
    for (reads, limited) in [(1, false), (2, true)] {
        let sim = start(FLAT, |s| {
            s.faults.metrics_queue_blip_after_s = 4.0;
            s.faults.metrics_queue_blip_reads = reads;
        })
        .await;
        let mut cfg = config(&sim, &[2], &[0], 6.0);
        cfg.timing.metrics_interval = 0.0;
        cfg.timing.ready_stable_seconds = 1.0;
        let (doc, _) = bench(cfg, Arc::default()).await;
        let r = cell(&doc, 2, 0);
        let basis = r.ext.server_gauge_basis.clone().expect("basis");
        assert_eq!(basis.queue_scrapes, 1, "{basis:?}");
        assert_eq!(basis.confirm_scrapes, 1, "{basis:?}");
        assert_eq!(basis.confirm_queue_scrapes, u64::from(limited), "{basis:?}");
        assert_eq!(r.sched.capacity_limited, limited, "{:?}", r.sched);
        let want = if limited {
            CellStatus::CapacityLimited
        } else {
            CellStatus::Ok
        };
        assert_eq!(r.ext.status, want, "{}", r.ext.status_reason);
        assert_eq!(sim.stats().http.injected_queue_blips, u64::from(reads));
        sim.shutdown().await;
    }
}
