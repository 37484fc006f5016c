//! Faults injected by the simulator end in labelled cells, and the run goes
//! on: here, streams whose tokens stop while the connection stays open
//! (`--stream-idle-timeout`). Other faults: `accuracy.rs` (HTTP errors),
//! `fidelity.rs` (drops, malformed lines, slow front ends).

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
