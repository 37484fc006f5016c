//! The reference tool's sample run, replayed against the `glm-5.3-flash-4gpu`
//! scenario with the same arguments (`--concurrency 1,2,4 --contexts 0,64k
//! --max-tokens 1024 --duration 10`). Cells, flags and sources must line up
//! with the reference result, except where the reference was wrong: the
//! C=1/64k cell reports the true window rate (not the last-token rate) and
//! C=4/64k reports no value taken from outside its window.

use std::sync::Arc;

use ldb_core::result::CellStatus;
use ldb_runner::{Controls, Live, RunConfig, RunHooks, run};
use ldb_sim::{Scenario, SimServer};

fn near(a: f64, b: f64, tol: f64) -> bool {
    (a / b - 1.0).abs() <= tol
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glm_scenario_lines_up_with_the_reference_result() {
    let scenario = Scenario::builtin("glm-5.3-flash-4gpu").expect("scenario");
    let sim = SimServer::start(scenario, None, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("sim");
    let cfg = RunConfig {
        target: ldb_runner::config::TargetConfig {
            base_url: sim.base_url(),
            server_label: sim.base_url(),
            ..Default::default()
        },
        matrix: ldb_runner::config::MatrixConfig {
            concurrency: vec![1, 2, 4],
            contexts: vec![0, 65536],
            max_tokens: 1024,
            duration: 10.0,
            ..Default::default()
        },
        prefill: ldb_runner::config::PrefillConfig {
            calibration_cache: None,
            ..Default::default()
        },
        ..RunConfig::default()
    };
    let (live, _rx) = Live::new();
    let hooks = RunHooks {
        live,
        controls: Arc::<Controls>::default(),
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let doc = run(cfg, hooks).await.expect("run").doc;
    let m = &doc.metadata;

    // Discovery: as in the reference, KV 884,736 = 54 × 8,192 × CP 2.
    assert_eq!(m.engine, "vllm");
    assert_eq!(m.model, "GLM-5.3-Flash-EXL3-4bpw");
    assert_eq!(m.model_context_length, Some(98_304));
    assert_eq!(m.max_total_tokens, Some(884_736));
    assert_eq!(m.cp_size, 2);
    assert_ne!(m.cp_source, "default");
    assert_eq!(m.decode_warmup_context, 65_536);

    // Prefill: 8k scout-only and 64k integrated; 128k is beyond the model context.
    let p64 = &doc.prefill[&65_536];
    assert_eq!(
        p64.method,
        Some(ldb_core::result::PrefillMethod::IntegratedScout)
    );
    assert!(
        near(p64.tok_per_sec, 4300.0, 0.03),
        "64k prefill {}",
        p64.tok_per_sec
    );
    assert_eq!(p64.server_validation.method, "prometheus:kv_computed");
    assert!(
        p64.prompt_tokens.abs_diff(65_536) <= 131,
        "64k prompt {}",
        p64.prompt_tokens
    );
    assert_eq!(
        doc.prefill[&8192].method,
        Some(ldb_core::result::PrefillMethod::ScoutOnly)
    );
    assert!(doc.prefill[&131_072].skipped);

    let cell = |c: u32, x: u64| {
        doc.results
            .iter()
            .find(|r| r.concurrency == c && r.context_tokens == x)
            .expect("cell")
    };
    // C=1/0: a valid cell, ~44 steps/s with MTP acceptance like the seed's.
    let c10 = cell(1, 0);
    assert_eq!(c10.ext.status, CellStatus::Ok);
    assert_eq!(c10.aggregate_source, "openai_continuous_usage");
    assert!(
        near(c10.spec.steps_per_s, 44.05, 0.03),
        "steps/s {}",
        c10.spec.steps_per_s
    );
    assert!(
        near(c10.spec.accept_length, 2.943, 0.06),
        "len {}",
        c10.spec.accept_length
    );
    assert_eq!(c10.spec.pos_accept.len(), 7);
    let tps = c10.aggregate_tps.expect("value");
    assert!(
        near(tps, c10.server_gen_throughput, 0.03),
        "{tps} vs server {}",
        c10.server_gen_throughput
    );

    // C=2 and C=4 at context 0: one running request at a time → capacity-limited,
    // effective concurrency 1, found early instead of after a 60 s timeout.
    for c in [2, 4] {
        let r = cell(c, 0);
        assert_eq!(r.ext.status, CellStatus::CapacityLimited, "C={c}");
        assert!(r.sched.capacity_limited && r.sched.underfilled);
        assert!((r.sched.effective_concurrency - 1.0).abs() < 0.05);
        assert!(!r.warmup_timed_out, "C={c} timed out");
        assert!(
            r.ext.ramp_seconds < 15.0,
            "C={c} ramp {}",
            r.ext.ramp_seconds
        );
        assert_eq!(r.aggregate_source, "openai_continuous_usage");
    }

    // C=1/64k: the true window rate — the client count agrees with the server's
    // generated-token counter over the same window (the reference reported 2.26×).
    let c164 = cell(1, 65_536);
    let v = c164.aggregate_tps.expect("value");
    assert!(
        near(v, c164.server_gen_throughput, 0.05),
        "{v} vs server {}",
        c164.server_gen_throughput
    );
    assert!((c164.measurement_seconds - 10.0).abs() < 0.3);

    // C=4/64k: whatever it reports comes from inside its window.
    let c464 = cell(4, 65_536);
    assert_ne!(c464.aggregate_source, "prometheus_fallback");
    match c464.aggregate_tps {
        Some(v) => assert!(
            near(v, c464.server_gen_throughput, 0.1),
            "{v} vs {}",
            c464.server_gen_throughput
        ),
        None => assert_eq!(c464.ext.status, CellStatus::NoTokens),
    }
    assert!(c464.sched.capacity_limited);
    sim.shutdown().await;
}
