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
    cfg.timing.stream_idle_timeout = 1.0;
    cfg.timing.cell_warmup_timeout = 8.0;
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
    cfg.timing.cell_warmup_timeout = 8.0;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_in_n_cut_leaves_the_cell_valid_with_its_error_rate() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        // A fifth of the streams (seeded draws) is reset after 5 tokens.
        s.faults.drop_after_tokens = 5;
        s.faults.drop_share = 0.2;
    })
    .await;
    let mut cfg = config(&sim, &[4], &[0], 4.0);
    // Short requests, so each stream sends many and a few are cut.
    cfg.matrix.max_tokens = 32;
    cfg.timing.max_error_rate = 0.6;
    cfg.timing.cell_warmup_timeout = 8.0;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &doc.results[0];
    // Valid: `ok`, or `capacity_limited` when the short requests and the
    // pause after each failure leave fewer than C streams running.
    assert!(
        matches!(r.ext.status, CellStatus::Ok | CellStatus::CapacityLimited),
        "{:?}",
        r.ext
    );
    assert!(
        r.ext.error_rate > 0.0 && r.ext.error_rate < 0.6,
        "{}",
        r.ext.error_rate
    );
    assert!(r.aggregate_tps.unwrap_or(0.0) > 0.0, "{r:?}");
    assert!(sim.stats().http.injected_drops > 0);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_error_page_becomes_one_clean_line_in_the_cell() {
    // Every request gets nginx's HTML 503 page instead of the engine's JSON.
    error_cell_says(
        |s| {
            s.faults.error_share = 1.0;
            s.faults.error_html = true;
        },
        "HTTP 503 from http://127.0.0.1:",
        "<",
    )
    .await;
}

/// `/metrics` breaks after discovery in `how`: the cell keeps its client
/// measurement and the metadata says since when the scrapes were lost.
async fn metrics_lost_after_discovery(how: impl FnOnce(&mut ldb_sim::Scenario), reason: &str) {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, how).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let mut cfg = config(&sim, &[2], &[0], 2.0);
    cfg.timing.cell_warmup_timeout = 8.0;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Ok, "{:?}", r.ext);
    assert!(r.aggregate_tps.unwrap_or(0.0) > 0.0, "{r:?}");
    assert_eq!(
        r.server_output_tokens, 0,
        "no server count without /metrics"
    );
    let lost = doc.metadata.metrics_lost.as_ref().expect("metrics_lost");
    assert!(lost.since_unix >= before - 1.0, "{lost:?}");
    assert!(lost.reason.contains(reason), "{lost:?}");
    assert!(lost.back_unix.is_none(), "{lost:?}");
    assert!(
        doc.event_log
            .iter()
            .any(|l| l.contains("/metrics lost since")),
        "{:?}",
        doc.event_log
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answering_garbage_after_discovery_leave_client_measurements() {
    metrics_lost_after_discovery(
        |s| s.faults.metrics_garbage_after = 2,
        "not Prometheus text",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_timing_out_after_discovery_leave_client_measurements() {
    metrics_lost_after_discovery(|s| s.faults.metrics_hang_after = 2, "timed out").await;
}

/// A server that answers HTTP 200 and then only SSE keep-alive comments
/// (`: ping`) used to hold the JIT warmup request for its 30-minute
/// first-token limit. The warmup is bounded by `--cell-warmup-timeout-seconds`
/// (else a fixed limit), the run goes on, and the file says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_comments_alone_end_the_warmup_at_its_limit_and_label_it() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.faults.keepalive_only_share = 1.0).await;
    let mut cfg = config(&sim, &[1], &[0], 1.0);
    cfg.timing.cell_warmup_timeout = 2.0;
    cfg.matrix.decode_warmup_seconds = 1.0;
    let run = bench(cfg, Arc::default());
    let (doc, _) = tokio::time::timeout(std::time::Duration::from_secs(90), run)
        .await
        .expect("the run ends: the warmup is bounded");
    let why = &doc.metadata.warmup_timeout;
    assert!(why.contains("JIT warmup request"), "{why}");
    assert!(why.contains("no token within 2 s"), "{why}");
    assert!(why.contains("decode warmup cell C=1"), "{why}");
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::NoTokens, "{:?}", r.ext);
    assert!(sim.stats().http.injected_keepalive_only >= 3);
    sim.shutdown().await;
}

/// Issue 35: the prefill warmup (request 2, after the JIT request) used the
/// 30-minute first-token limit, so a server feeding it only keep-alive
/// comments held the run. It is bounded like the JIT request and the decode
/// warmup, the run goes on to measure, and the file says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_warmup_fed_only_keep_alives_ends_at_the_warmup_limit_and_is_labelled() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.faults.keepalive_requests = vec![2]).await;
    let mut cfg = config(&sim, &[1], &[8192], 1.5);
    cfg.timing.cell_warmup_timeout = 3.0;
    cfg.timing.ready_stable_seconds = 1.0;
    let run = bench(cfg, Arc::default());
    let (doc, _) = tokio::time::timeout(std::time::Duration::from_secs(90), run)
        .await
        .expect("the run ends: the prefill warmup is bounded");
    assert_eq!(sim.stats().http.injected_keepalive_only, 1);
    let why = &doc.metadata.warmup_timeout;
    assert!(why.contains("prefill warmup request ctx=8k"), "{why}");
    assert!(why.contains("no token within 3 s"), "{why}");
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Ok, "{:?}", r.ext);
    sim.shutdown().await;
}

/// Issue 24 item 2: the first scout of a context fails (one transient 503);
/// its cell goes on and its streams put the prompt in the prefix cache. The
/// next cell's scout must not be timed on that cached prompt: it is sent
/// with a fresh uniqueness prefix and measures the cold prefill (10 000
/// tok/s on this server; from the cache it would read hundreds of thousands).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scout_retried_after_a_failure_measures_a_cold_prompt() {
    let _serial = SERIAL.lock().await;
    // Requests 1 and 2 are the start-up and prefill warmups; 3 is the
    // first cell's scout (the event log below checks that it failed).
    let sim = start(FLAT, |s| s.faults.error_requests = vec![3]).await;
    let cfg = config(&sim, &[1, 2], &[8192], 1.5);
    let (doc, _) = bench(cfg, Arc::default()).await;
    let log = doc.event_log.join("\n");
    assert!(
        log.contains("integrated prefill failed ctx=8k"),
        "the first scout did not fail:\n{log}"
    );
    let row = doc.prefill.get(&8192).expect("a prefill row for 8k");
    let v = &row.server_validation;
    assert!(
        v.cached_tokens * 2 < row.prompt_tokens,
        "{} of {} prompt tokens came from the cache",
        v.cached_tokens,
        row.prompt_tokens
    );
    assert!(
        row.client_tok_per_sec > 6000.0 && row.client_tok_per_sec < 12000.0,
        "prefill {} tok/s, the server computes 10 000",
        row.client_tok_per_sec
    );
    sim.shutdown().await;
}

/// Issue 24: the scout before a regular cell used the 30-minute first-token
/// limit, so a server that sends only keep-alive comments to it held the
/// run. Only the scout (request 3, after the start-up and prefill warmups)
/// hangs here; it is bounded like the warmup (`--cell-warmup-timeout-seconds`
/// when given), the cell goes on and measures, and the cell says its scout
/// ran into the limit. The prefill row is not recorded from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scout_fed_only_keep_alives_ends_at_the_warmup_limit_and_is_labelled() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.faults.keepalive_requests = vec![3]).await;
    let mut cfg = config(&sim, &[1], &[8192], 1.5);
    cfg.timing.cell_warmup_timeout = 5.0;
    cfg.timing.ready_stable_seconds = 1.0;
    let run = bench(cfg, Arc::default());
    let (doc, _) = tokio::time::timeout(std::time::Duration::from_secs(90), run)
        .await
        .expect("the run ends: the scout is bounded");
    assert_eq!(sim.stats().http.injected_keepalive_only, 1);
    let r = &doc.results[0];
    assert_eq!(r.ext.status, CellStatus::Ok, "{:?}", r.ext);
    assert!(r.aggregate_tps.is_some_and(|v| v > 0.0));
    let why = r.ext.scout_timeout.as_deref().unwrap_or_default();
    assert!(why.contains("no token within 5 s"), "{why:?}");
    let log = doc.event_log.join("\n");
    assert!(log.contains("integrated prefill failed ctx=8k"), "{log}");
    assert!(!doc.prefill.contains_key(&8192), "{:?}", doc.prefill);
    sim.shutdown().await;
}
