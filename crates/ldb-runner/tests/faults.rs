//! Faults injected by the simulator end in labelled cells, and the run goes
//! on: streams whose tokens stop while the connection stays open
//! (`--stream-idle-timeout`), streams cut mid-response, malformed chunks, and
//! `/metrics` failing. Other faults: `accuracy.rs` (HTTP errors on every
//! request), `fidelity.rs` (a few failures under `--max-error-rate`, slow
//! front ends).

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, config, start};
use ldb_core::result::CellStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_that_go_silent_fail_at_the_idle_limit_and_the_cell_says_why() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        // Every stream pauses for 30 s after 5 tokens, socket open.
        s.faults.stall_after_tokens = 5;
        s.faults.stall_seconds = 30.0;
    })
    .await;
    let mut cfg = config(&sim, &[2], &[0], 3.0);
    cfg.stream_idle_timeout = 1.0;
    cfg.cell_warmup_timeout = 8.0;
    let t0 = std::time::Instant::now();
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Error, "{:?}", r.ext);
    assert!(
        r.ext.status_reason.contains("no token for 1 s"),
        "{}",
        r.ext.status_reason
    );
    assert!(r.aggregate_tps.is_none());
    // Nothing waited out the 30 s stalls.
    assert!(t0.elapsed().as_secs_f64() < 25.0, "{:?}", t0.elapsed());
    sim.shutdown().await;
}

/// One C = 2 cell against the simulator with `fault` set; the cell must be
/// `error` with a reason containing `reason` (and none of `not`).
async fn error_cell_says(fault: impl FnOnce(&mut ldb_sim::Scenario), reason: &str, not: &str) {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, fault).await;
    let mut cfg = config(&sim, &[2], &[0], 2.0);
    cfg.cell_warmup_timeout = 8.0;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Error, "{:?}", r.ext);
    let why = &r.ext.status_reason;
    assert!(why.contains(reason), "{why}");
    assert!(not.is_empty() || !why.contains(not), "{why}");
    assert!(r.aggregate_tps.is_none());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_cut_mid_response_fail_and_the_cell_says_why() {
    // Every stream's connection is reset after 5 tokens, without [DONE].
    error_cell_says(
        |s| s.faults.drop_after_tokens = 5,
        "stream broken after the answer began",
        "cannot connect",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_chunks_fail_their_requests_and_the_cell_says_why() {
    // One truncated-JSON data: line after 5 tokens in every stream.
    error_cell_says(
        |s| s.faults.malformed_after_tokens = 5,
        "malformed stream chunk",
        "",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_metrics_scrapes_leave_the_client_measurement_standing() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        // Half of all /metrics requests answer HTTP 500, discovery's included.
        s.faults.metrics_fail_share = 0.5;
    })
    .await;
    let cfg = config(&sim, &[2], &[0], 2.0);
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Ok, "{:?}", r.ext);
    assert!(r.aggregate_tps.unwrap_or(0.0) > 0.0, "{r:?}");
    sim.shutdown().await;
}
