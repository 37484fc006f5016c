//! The engine model against its truth.

use std::time::{Duration, Instant};

use ldb_sim::{Personality, Scenario};
use serde_json::json;

use super::client::{chat_body, post, sse, start, tiny, usage_tokens, wait_for};

/// 4 running requests at 40 steps/s with mean acceptance 2.5 → 400 tok/s ± 2%.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decode_throughput_matches_formula() {
    let sc = tiny();
    let truth = 4.0 * sc.steps_per_second(4, 0) * sc.mean_tokens_per_step();
    assert!((truth - 400.0).abs() < 1e-9, "truth {truth}");
    let sim = start(sc, None).await;
    let base = sim.base_url();
    let mut streams = Vec::new();
    for i in 0..4 {
        let body = chat_body(&format!("stream {i}"), 3000, json!({}));
        let base = base.clone();
        streams.push(tokio::spawn(async move {
            post(&base, "/v1/chat/completions", &body).await
        }));
    }
    assert!(
        wait_for(&sim, Duration::from_secs(2), |s| s.engine.running == 4
            && s.engine.generated_tokens > 20)
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Record the moments the counters change (step ends) so the window is step-aligned.
    let points = change_points(&sim, Duration::from_millis(2500)).await;
    let ((ta, a), (tb, b)) = (points.first().unwrap(), points.last().unwrap());
    let dt = (*tb - *ta).as_secs_f64();
    let rate = (b.generated_tokens - a.generated_tokens) as f64 / dt;
    let steps = (b.decode_steps - a.decode_steps) as f64 / dt;
    assert!(
        (rate / 400.0 - 1.0).abs() < 0.02,
        "rate {rate} tok/s, steps {steps}/s"
    );
    assert!((steps / 40.0 - 1.0).abs() < 0.02, "steps {steps}/s");
    for s in streams {
        s.abort();
    }
    sim.shutdown().await;
}

/// (time, stats) at every change of `decode_steps`, polled every millisecond.
async fn change_points(
    sim: &ldb_sim::SimHandle,
    window: Duration,
) -> Vec<(Instant, ldb_sim::EngineStats)> {
    let start = Instant::now();
    let mut out: Vec<(Instant, ldb_sim::EngineStats)> = Vec::new();
    while start.elapsed() < window {
        let s = sim.stats().engine;
        if out
            .last()
            .is_none_or(|(_, p)| p.decode_steps != s.decode_steps)
        {
            out.push((Instant::now(), s));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The first sample is not at a step boundary.
    out.remove(0);
    out
}

#[tokio::test]
async fn admission_stops_at_running_cap_and_metrics_show_queue() {
    let sim = start(tiny(), None).await;
    let base = sim.base_url();
    let mut held = Vec::new();
    for i in 0..6 {
        held.push(
            post(
                &base,
                "/v1/chat/completions",
                &chat_body(&format!("q{i}"), 3000, json!({})),
            )
            .await,
        );
    }
    assert!(
        wait_for(&sim, Duration::from_secs(2), |s| s.engine.running == 4
            && s.engine.waiting == 2)
        .await
    );
    let text = super::client::client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("vllm:num_requests_running{engine=\"0\",model_name=\"sim-tiny\"} 4.0"),
        "{text}"
    );
    assert!(text.contains("vllm:num_requests_waiting{engine=\"0\",model_name=\"sim-tiny\"} 2.0"));
    drop(held);
    assert!(
        wait_for(&sim, Duration::from_secs(1), |s| s.engine.running == 0
            && s.engine.waiting == 0)
        .await
    );
    assert_eq!(sim.stats().engine.aborted, 6);
    sim.shutdown().await;
}

fn small_kv(blocks: u32) -> Scenario {
    let mut sc = tiny();
    sc.kv.num_blocks = blocks;
    sc.step_time.base_s = 0.002;
    sc
}

#[tokio::test]
async fn kv_exhaustion_queues_then_completes() {
    // Each prompt is 8 + 4 + 100 = 112 tokens = 7 blocks of 16; 20 blocks admit two.
    let sim = start(small_kv(20), None).await;
    let base = sim.base_url();
    let text = "x".repeat(400);
    let mut held = Vec::new();
    for i in 0..3 {
        let t = format!("{i}{}", &text[1..]);
        held.push(
            post(
                &base,
                "/v1/chat/completions",
                &chat_body(&t, 3000, json!({})),
            )
            .await,
        );
    }
    assert!(
        wait_for(&sim, Duration::from_secs(2), |s| s.engine.running == 2
            && s.engine.waiting == 1)
        .await
    );
    drop(held);
    // Now three short requests that fit together after waiting for each other.
    let mut tasks = Vec::new();
    for i in 0..3 {
        let t = format!("{i}{}", &text[1..]);
        let body = chat_body(&t, 20, json!({"stream_options": {"include_usage": true}}));
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            let r = post(&base, "/v1/chat/completions", &body).await;
            usage_tokens(&sse(r, Instant::now()).await)
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), Some(20));
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn preemption_when_blocks_run_out_and_requests_still_finish() {
    // Two 112-token prompts growing by 100 tokens each need 2 × 14 blocks > 20.
    let sim = start(small_kv(20), None).await;
    let base = sim.base_url();
    let mut tasks = Vec::new();
    for i in 0..2 {
        let t = format!("{i}{}", "y".repeat(399));
        let body = chat_body(&t, 100, json!({"stream_options": {"include_usage": true}}));
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            let r = post(&base, "/v1/chat/completions", &body).await;
            usage_tokens(&sse(r, Instant::now()).await)
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), Some(100));
    }
    let s = sim.stats().engine;
    assert!(s.preemptions >= 1, "{s:?}");
    assert!(s.recomputed_tokens > 0);
    assert_eq!(s.completed, 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn disconnect_frees_slot_and_kv_at_once() {
    let sim = start(tiny(), None).await;
    let base = sim.base_url();
    let resp = post(
        &base,
        "/v1/chat/completions",
        &chat_body("bye", 3000, json!({})),
    )
    .await;
    let mut body = resp.bytes_stream();
    use futures_util::StreamExt;
    assert!(body.next().await.is_some());
    assert_eq!(sim.stats().engine.running, 1);
    assert!(sim.stats().engine.kv_blocks_used > 0);
    let t = Instant::now();
    drop(body);
    assert!(
        wait_for(&sim, Duration::from_millis(500), |s| s.engine.running == 0
            && s.engine.kv_blocks_used == 0)
        .await
    );
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(sim.stats().engine.aborted, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn prefix_cache_hit_skips_prefill() {
    let sim = start(tiny(), None).await;
    let base = sim.base_url();
    // 3000 chars → 750 + 12 tokens; 762 / 10,000 tok/s = 76 ms of prefill.
    let prompt = "z".repeat(3000);
    let ttft = |events: &[super::client::Event]| {
        events
            .iter()
            .find(|e| e.data.contains("\"content\":\"") && !e.data.contains("\"content\":\"\""))
            .map(|e| e.at)
    };
    let t1 = Instant::now();
    let r1 = post(
        &base,
        "/v1/chat/completions",
        &chat_body(&prompt, 2, json!({})),
    )
    .await;
    let first = ttft(&sse(r1, t1).await).unwrap();
    let t2 = Instant::now();
    let r2 = post(
        &base,
        "/v1/chat/completions",
        &chat_body(&prompt, 2, json!({})),
    )
    .await;
    let second = ttft(&sse(r2, t2).await).unwrap();
    assert!(first >= Duration::from_millis(70), "{first:?}");
    assert!(second * 4 < first, "first {first:?} second {second:?}");
    let s = sim.stats().engine;
    assert_eq!(s.prompt_tokens, 2 * 762);
    assert_eq!(s.prompt_tokens_cached, 752); // 47 full blocks of 16
    sim.shutdown().await;
}

#[tokio::test]
async fn prefill_time_follows_rate() {
    let sim = start(tiny(), None).await;
    let base = sim.base_url();
    let prompt = "w".repeat(12_000); // 3000 + 12 tokens at 10k tok/s = 0.301 s
    let t = Instant::now();
    let r = post(
        &base,
        "/v1/chat/completions",
        &chat_body(&prompt, 1, json!({})),
    )
    .await;
    let events = sse(r, t).await;
    let first = events
        .iter()
        .find(|e| e.data.contains("\"content\":\"T") || e.data.contains("\"content\":\" "))
        .unwrap()
        .at;
    let expect = 3012.0 / 10_000.0;
    assert!(
        (first.as_secs_f64() - expect).abs() < 0.05,
        "ttft {first:?} vs {expect}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn glm_scenario_steps_and_capacity() {
    let sc = Scenario::builtin("glm-5.3-flash-4gpu").unwrap();
    assert_eq!(sc.kv.capacity_tokens(), 884_736);
    assert_eq!(sc.scheduler.max_running, 1);
    assert!((sc.mean_tokens_per_step() - 2.9431).abs() < 1e-9);
    let sps = sc.steps_per_second(1, 600);
    assert!((sps - 44.0).abs() < 0.5, "{sps}");
    let sps64 = sc.steps_per_second(1, 65_000);
    assert!((sps64 - 41.9).abs() < 0.5, "{sps64}");
    let sim = start(sc, None).await;
    let base = sim.base_url();
    let held = post(
        &base,
        "/v1/chat/completions",
        &chat_body("Write a long article.", 1024, json!({})),
    )
    .await;
    let held2 = post(
        &base,
        "/v1/chat/completions",
        &chat_body("Write another.", 1024, json!({})),
    )
    .await;
    assert!(wait_for(&sim, Duration::from_secs(1), |s| s.engine.decode_steps > 3).await);
    let (t0, a) = (Instant::now(), sim.stats().engine);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (dt, b) = (t0.elapsed().as_secs_f64(), sim.stats().engine);
    let steps = (b.decode_steps - a.decode_steps) as f64 / dt;
    assert!((steps / sps - 1.0).abs() < 0.05, "{steps} vs {sps}");
    assert_eq!((b.running, b.waiting), (1, 1));
    drop((held, held2));
    sim.shutdown().await;
}

#[tokio::test]
async fn sglang_abort_request_frees_at_once() {
    let sim = start(tiny(), Some(Personality::Sglang)).await;
    let base = sim.base_url();
    let r = post(
        &base,
        "/v1/chat/completions",
        &chat_body("abort me", 3000, json!({"rid": "rid-1"})),
    )
    .await;
    let reader = tokio::spawn(sse(r, Instant::now()));
    assert!(
        wait_for(&sim, Duration::from_secs(1), |s| s.engine.generated_tokens
            > 3)
        .await
    );
    let resp = post(&base, "/abort_request", &json!({"rid": "rid-1"})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(sim.stats().engine.running, 0);
    let events = reader.await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.data.contains("\"finish_reason\":\"abort\""))
    );
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    assert!(
        events
            .iter()
            .all(|e| e.data == "[DONE]" || e.data.contains("\"id\":\"rid-1\""))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_open_streams_quickly() {
    let sim = start(tiny(), None).await;
    let r = post(
        &sim.base_url(),
        "/v1/chat/completions",
        &chat_body("x", 3000, json!({})),
    )
    .await;
    let reader = tokio::spawn(sse(r, Instant::now()));
    assert!(
        wait_for(&sim, Duration::from_secs(1), |s| s.engine.generated_tokens
            > 0)
        .await
    );
    let t = Instant::now();
    sim.shutdown().await;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let events = tokio::time::timeout(Duration::from_secs(2), reader)
        .await
        .unwrap()
        .unwrap();
    assert!(!events.is_empty());
}

#[tokio::test]
async fn empty_prompt_is_rejected_not_stuck() {
    let mut sc = tiny();
    sc.tokenizer.tokens_per_request = 0;
    sc.tokenizer.tokens_per_message = 0;
    let sim = start(sc, None).await;
    let body = json!({"messages": [{"role": "user", "content": ""}]});
    let r = post(&sim.base_url(), "/v1/chat/completions", &body).await;
    assert_eq!(r.status(), 400);
    sim.shutdown().await;
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server() {
    let sim = start(tiny(), None).await;
    let addr = sim.addr();
    drop(sim);
    let mut rebound = None;
    for _ in 0..100 {
        if let Ok(s) = ldb_sim::SimServer::start(tiny(), None, addr).await {
            rebound = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sim = rebound.expect("port freed after drop");
    sim.shutdown().await;
}

/// `step_time.drift_per_s`: the step time grows with the engine's age, so
/// the decode rate of a steady load falls as 1 / (1 + drift · t).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_time_drift_slows_decoding_over_time() {
    let mut sc = tiny();
    sc.step_time.drift_per_s = 0.25;
    let t0 = Instant::now();
    let sim = start(sc, None).await;
    let base = sim.base_url();
    let mut streams = Vec::new();
    for i in 0..4 {
        let body = chat_body(&format!("drift {i}"), 3000, json!({}));
        let base = base.clone();
        streams.push(tokio::spawn(async move {
            post(&base, "/v1/chat/completions", &body).await
        }));
    }
    assert!(
        wait_for(&sim, Duration::from_secs(2), |s| s.engine.running == 4
            && s.engine.decode_steps > 2)
        .await
    );
    // Steps per second over one second early and one second later on.
    let rate_over = |from: f64| {
        let sim = &sim;
        async move {
            let until = |t: f64| t0 + Duration::from_secs_f64(t);
            tokio::time::sleep_until(until(from).into()).await;
            let a = sim.stats().engine.decode_steps;
            tokio::time::sleep_until(until(from + 1.0).into()).await;
            let b = sim.stats().engine.decode_steps;
            (b - a) as f64
        }
    };
    let early = rate_over(0.5).await;
    let late = rate_over(2.5).await;
    // Truth: 40 steps/s × 1 / (1 + 0.25 t) at t ≈ 1.0 and 3.0 → 32 and 23.
    let ratio = late / early;
    let truth = (1.0 + 0.25 * 1.0) / (1.0 + 0.25 * 3.0);
    assert!(
        (ratio / truth - 1.0).abs() < 0.15,
        "early {early} steps/s, late {late} steps/s, ratio {ratio:.3} vs {truth:.3}"
    );
    for s in streams {
        s.abort();
    }
    sim.shutdown().await;
}
