//! The benchmark against the simulator's known truth.
//!
//! Each test starts an in-process simulator on a free loopback port with a
//! scenario whose rates follow from its formula, runs the benchmark against it,
//! and compares the measured values with the truth.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, cell, config, start, within};
use ldb_core::result::CellStatus;
use ldb_runner::{Controls, Live, RunHooks, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decode_rate_matches_truth_at_c1_c4_c16_ctx0_and_8k() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let (doc, _) = bench(config(&sim, &[1, 4, 16], &[0, 8192], 4.0), Arc::default()).await;
    for &c in &[1u32, 4, 16] {
        // C sequences emit one token each per step of base + per_seq·C seconds.
        let truth = f64::from(c) / (0.010 + 0.0002 * f64::from(c));
        for &ctx in &[0u64, 8192] {
            let r = cell(&doc, c, ctx);
            let tps = r.aggregate_tps.expect("value");
            assert!(
                within(tps, truth, 0.02),
                "C={c} ctx={ctx}: {tps:.1} vs truth {truth:.1}"
            );
            assert_eq!(
                r.ext.status,
                CellStatus::Ok,
                "C={c} ctx={ctx}: {}",
                r.ext.status_reason
            );
            assert_eq!(r.aggregate_source, "openai_continuous_usage");
            assert!((r.sched.effective_concurrency - f64::from(c)).abs() < 0.05);
            // The window is the wall window, and the server saw the same rate.
            assert!((r.measurement_seconds - 4.0).abs() < 0.3);
            assert!(
                within(r.server_gen_throughput, truth, 0.03),
                "server {}",
                r.server_gen_throughput
            );
            // Per-user rate is the step rate.
            let itl = r.latency.inter_token_latency.p50;
            assert!(within(1.0 / itl, truth / f64::from(c), 0.03), "ITL {itl}");
        }
    }
    // Prompts were sized exactly through /tokenize.
    assert_eq!(doc.metadata.token_targeting, "exact");
    let p8k = doc
        .metadata
        .prompt_tokens_by_context
        .get("8192")
        .copied()
        .unwrap_or(0);
    assert!(p8k.abs_diff(8192) <= 16, "8k prompt has {p8k} tokens");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_capped_below_c_is_flagged_within_15_s() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.scheduler.max_running = 2).await;
    let mut cfg = config(&sim, &[6], &[0], 3.0);
    cfg.timing.cell_warmup_timeout = 120.0;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = cell(&doc, 6, 0);
    assert_eq!(r.ext.status, CellStatus::CapacityLimited);
    assert!(r.sched.capacity_limited && r.sched.underfilled);
    assert!(
        (r.sched.effective_concurrency - 2.0).abs() < 0.05,
        "{}",
        r.sched.effective_concurrency
    );
    assert!(
        r.ext.ramp_seconds < 15.0,
        "flagged after {:.1} s",
        r.ext.ramp_seconds
    );
    assert!(!r.warmup_timed_out);
    assert!(
        r.ready_reason.starts_with("capacity_plateau"),
        "{}",
        r.ready_reason
    );
    // The value reported is what the server really did at 2 running.
    let truth = 2.0 / (0.010 + 0.0002 * 2.0);
    assert!(within(r.aggregate_tps.expect("value"), truth, 0.03));
    sim.shutdown().await;
}

const SPEC: &str = r#"
[spec]
num_speculative_tokens = 3
accept_probs = [0.8, 0.5, 0.25]
deterministic = true
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_fields_match_the_simulators_counters() {
    let _serial = SERIAL.lock().await;
    let toml = format!("{FLAT}{SPEC}");
    let sim = start(&toml, |_| {}).await;
    let (doc, _) = bench(config(&sim, &[4], &[0], 4.0), Arc::default()).await;
    let r = cell(&doc, 4, 0);
    let sp = &r.spec;
    // Mean tokens per step = 1 + Σ p = 2.55; steps/s = 1 / (base + 4·per_seq).
    // Like vLLM's draft counter, steps are counted per sequence (4 per engine step).
    let steps = 1.0 / (0.010 + 0.0002 * 4.0);
    assert!(
        within(sp.steps_per_s, 4.0 * steps, 0.02),
        "steps/s {} vs {}",
        sp.steps_per_s,
        4.0 * steps
    );
    assert!(
        within(sp.accept_length, 2.55, 0.02),
        "accept length {}",
        sp.accept_length
    );
    assert!(within(sp.accept_len_effective, 2.55, 0.02));
    assert!(
        within(sp.accept_rate, 1.55 / 3.0, 0.02),
        "rate {}",
        sp.accept_rate
    );
    assert_eq!(sp.pos_accept.len(), 3);
    for (got, want) in sp.pos_accept.iter().zip([0.8, 0.5, 0.25]) {
        assert!((got - want).abs() < 0.02, "pos {got} vs {want}");
    }
    // Counter identities: drafts = engine steps × sequences, k tokens per draft.
    assert_eq!(sp.draft_tokens, 3 * sp.drafts);
    assert!(within(
        r.aggregate_tps.expect("value"),
        4.0 * 2.55 * steps,
        0.02
    ));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefill_rate_matches_truth_and_is_validated_by_the_server() {
    let _serial = SERIAL.lock().await;
    // Client-visible prefill includes one decode step (10 ms) and HTTP; at
    // 5,000 tok/s an 8k prompt takes 1.6 s, so those fixed costs stay well
    // inside the tolerance (at 10,000 tok/s they took half of it).
    let sim = start(FLAT, |s| s.scheduler.prefill_tok_s = 5_000.0).await;
    let mut cfg = config(&sim, &[1], &[0, 16384], 1.0);
    cfg.prefill.prefill_contexts = vec![8192, 32768];
    let (doc, _) = bench(cfg, Arc::default()).await;
    for ctx in [8192u64, 16384, 32768] {
        let row = doc
            .prefill
            .get(&ctx)
            .unwrap_or_else(|| panic!("no prefill row {ctx}"));
        assert!(
            within(row.tok_per_sec, 5_000.0, 0.03),
            "ctx {ctx}: {} tok/s",
            row.tok_per_sec
        );
        let v = &row.server_validation;
        assert_eq!(
            v.method, "prometheus:kv_computed",
            "ctx {ctx}: {}",
            v.invalid_reason
        );
        assert!(
            within(v.tok_per_sec, 5_000.0, 0.01),
            "server {}",
            v.tok_per_sec
        );
        assert_eq!(v.token_source, "kv_computed");
        assert!(v.request_prompt_tokens > 0);
    }
    assert_eq!(
        doc.prefill[&16384].method,
        Some(ldb_core::result::PrefillMethod::IntegratedScout)
    );
    assert_eq!(
        doc.prefill[&8192].method,
        Some(ldb_core::result::PrefillMethod::ScoutOnly)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_requests_mark_the_cell_error_and_the_run_goes_on() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        s.faults.error_share = 1.0;
        s.faults.error_status = 500;
    })
    .await;
    let (doc, _) = bench(config(&sim, &[1, 2], &[0], 1.0), Arc::default()).await;
    assert_eq!(doc.results.len(), 2);
    for r in &doc.results {
        assert_eq!(r.ext.status, CellStatus::Error);
        assert!(
            r.ext.status_reason.contains("500"),
            "{}",
            r.ext.status_reason
        );
        assert!(r.aggregate_tps.is_none());
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_beyond_kv_or_model_context_are_skipped_with_the_reason() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        s.max_model_len = 12000;
        s.kv.num_blocks = 1000; // 16,000 tokens
    })
    .await;
    let mut cfg = config(&sim, &[1, 4], &[0, 8192, 16384], 1.0);
    cfg.matrix.max_tokens = 1024;
    let (doc, _) = bench(cfg, Arc::default()).await;
    assert_eq!(cell(&doc, 1, 16384).ext.status, CellStatus::SkippedContext);
    let kv = cell(&doc, 4, 8192);
    assert_eq!(kv.ext.status, CellStatus::SkippedKv);
    assert_eq!(kv.ext.kv_deficit_tokens, 4 * (8192 + 1024) - 16000);
    assert!(kv.aggregate_tps.is_none());
    assert_eq!(cell(&doc, 1, 8192).ext.status, CellStatus::Ok);
    let json = doc.to_json();
    assert!(json["summary_table"]["8192"]["4"].is_null());
    assert_eq!(json["summary_table_status"]["8192"]["4"], "skipped_kv");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_keeps_finished_cells_and_marks_the_run_interrupted() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let controls = Arc::new(Controls::default());
    let stopper = controls.clone();
    let (live, rx) = Live::new();
    let cfg = config(&sim, &[1, 2, 4], &[0], 1.0);
    tokio::spawn(async move {
        let mut rx = rx;
        // Stop once the first cell is done.
        while rx.changed().await.is_ok() {
            let done = rx.borrow().events.iter().any(|e| e.contains("cell done"));
            if done {
                stopper.stop.cancel();
                break;
            }
        }
    });
    let saved: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let saved2 = saved.clone();
    let hooks = RunHooks {
        live,
        controls,
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(move |d| *saved2.lock().expect("lock") = Some(d.to_json_string())),
        resume: None,
    };
    let out = run(cfg, hooks).await.expect("run");
    assert!(out.interrupted);
    assert!(!out.doc.results.is_empty() && out.doc.results.len() < 3);
    let last = saved.lock().expect("lock").clone().expect("saved");
    let v: serde_json::Value = serde_json::from_str(&last).expect("valid json");
    assert_eq!(v["metadata"]["run_status"], "interrupted");
    assert!(!v["event_log"].as_array().expect("events").is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_requests_restart_from_the_prefix_cache() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let mut cfg = config(&sim, &[4], &[4096], 3.0);
    // 64 tokens at ~92 tok/s per stream: every stream restarts about
    // 1.4 times a second, each time on the scout's cached prefix.
    cfg.matrix.max_tokens = 64;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = cell(&doc, 4, 4096);
    assert_eq!(
        r.ext.status,
        CellStatus::Ok,
        "{} / {}",
        r.ready_reason,
        r.ext.status_reason
    );
    let hit = r.ext.server_prefix_cache_hit_rate.expect("hit rate");
    // All but the last partial 16-token block of a ~4.1k-token prompt is cached.
    assert!(hit > 0.98, "prefix-cache hit rate {hit}");
    assert!(r.num_completed >= 8, "completed {}", r.num_completed);
    sim.shutdown().await;
}

/// The runner's live events, applied, give the dashboard what happened: the
/// server and the matrix, a measuring stage with tokens counted, and at the
/// end every cell done with its rate and the phase done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_follows_the_run_to_its_end() {
    use ldb_core::live::{CellStage, MatrixCellState, Phase};
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let (live, rx) = Live::new();
    let mut watch = rx.clone();
    let seen = tokio::spawn(async move {
        let mut measuring = false;
        while watch.changed().await.is_ok() {
            let s = watch.borrow();
            measuring |= s
                .current
                .as_ref()
                .is_some_and(|c| c.stage == CellStage::Window && c.window_tokens > 0);
            if s.phase == Phase::Done {
                break;
            }
        }
        measuring
    });
    let hooks = RunHooks {
        live,
        controls: Arc::default(),
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let out = run(config(&sim, &[1, 2], &[0], 1.0), hooks)
        .await
        .expect("run");
    assert!(
        seen.await.expect("watcher"),
        "a window with tokens was shown"
    );
    let s = rx.borrow().clone();
    assert_eq!((s.phase, s.model.as_str()), (Phase::Done, "sim-flat"));
    assert!(s.current.is_none());
    assert_eq!(s.matrix.len(), 2);
    for m in &s.matrix {
        let cell = cell(&out.doc, m.concurrency, m.context);
        match &m.state {
            MatrixCellState::Done { tps, .. } => assert_eq!(*tps, cell.aggregate_tps),
            other => panic!("C={} not done: {other:?}", m.concurrency),
        }
    }
    assert!(s.events.iter().any(|e| e.contains("cell done")));
    sim.shutdown().await;
}
