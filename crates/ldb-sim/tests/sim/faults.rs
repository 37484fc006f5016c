//! Injected faults.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

use super::client::{chat_body, client, post, sse, start, tiny};

#[tokio::test]
async fn drop_after_n_tokens_cuts_the_connection() {
    let mut sc = tiny();
    sc.faults.drop_after_tokens = 5;
    sc.step_time.base_s = 0.002;
    let sim = start(sc, None).await;
    let r = post(
        &sim.base_url(),
        "/v1/chat/completions",
        &chat_body("x", 100, json!({})),
    )
    .await;
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let mut errored = false;
    while let Some(piece) = body.next().await {
        match piece {
            Ok(p) => text.push_str(&String::from_utf8_lossy(&p)),
            Err(_) => {
                errored = true;
                break;
            }
        }
    }
    assert!(errored, "stream ended cleanly: {text}");
    assert!(!text.contains("[DONE]"));
    assert!(text.contains("\"content\":\" The\""));
    assert!(super::client::wait_for(&sim, Duration::from_secs(1), |s| s.engine.running == 0).await);
    assert_eq!(sim.stats().http.injected_drops, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn error_share_is_seeded_and_uses_engine_shape() {
    let mut sc = tiny();
    sc.faults.error_share = 0.5;
    sc.faults.error_status = 503;
    let sim = start(sc.clone(), None).await;
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let r = post(
            &sim.base_url(),
            "/v1/chat/completions",
            &chat_body("x", 1, json!({"stream": false})),
        )
        .await;
        let status = r.status().as_u16();
        if status == 503 {
            let v: serde_json::Value = r.json().await.unwrap();
            assert_eq!(v["error"]["code"], 503);
        }
        statuses.push(status);
    }
    let errors = statuses.iter().filter(|&&s| s == 503).count();
    assert!((4..=16).contains(&errors), "{statuses:?}");
    assert_eq!(sim.stats().http.injected_errors, errors as u64);
    sim.shutdown().await;
    // Same seed, same order → same answers.
    let sim = start(sc, None).await;
    let mut again = Vec::new();
    for _ in 0..20 {
        let r = post(
            &sim.base_url(),
            "/v1/chat/completions",
            &chat_body("x", 1, json!({"stream": false})),
        )
        .await;
        again.push(r.status().as_u16());
    }
    assert_eq!(statuses, again);
    sim.shutdown().await;
}

#[tokio::test]
async fn stall_and_malformed_line() {
    let mut sc = tiny();
    sc.faults.stall_after_tokens = 3;
    sc.faults.stall_seconds = 0.3;
    sc.faults.malformed_after_tokens = 2;
    sc.step_time.base_s = 0.002;
    let sim = start(sc, None).await;
    let t = Instant::now();
    let r = post(
        &sim.base_url(),
        "/v1/chat/completions",
        &chat_body("x", 200, json!({})),
    )
    .await;
    let events = sse(r, t).await;
    let bad: Vec<_> = events
        .iter()
        .filter(|e| e.json().is_none() && e.data != "[DONE]")
        .collect();
    assert_eq!(bad.len(), 1, "{events:?}");
    let gaps: Vec<Duration> = events.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps.iter().any(|g| *g >= Duration::from_millis(280)),
        "{gaps:?}"
    );
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    sim.shutdown().await;
}

#[tokio::test]
async fn slow_and_failing_metrics() {
    let mut sc = tiny();
    sc.faults.metrics_delay_s = 0.2;
    sc.faults.metrics_fail_share = 1.0;
    let sim = start(sc, None).await;
    let t = Instant::now();
    let r = client()
        .get(format!("{}/metrics", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(sim.stats().http.metrics_failures, 1);
    sim.shutdown().await;
}

/// `keepalive_only_share = 1`: HTTP 200, then SSE comments only, never a
/// `data:` line, and the engine never sees the request.
#[tokio::test]
async fn keepalive_only_streams_send_comments_and_nothing_else() {
    let mut sc = tiny();
    sc.faults.keepalive_only_share = 1.0;
    sc.faults.keepalive_interval_s = 0.05;
    let sim = start(sc, None).await;
    let r = post(
        &sim.base_url(),
        "/v1/chat/completions",
        &chat_body("x", 10, json!({})),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let until = Instant::now() + Duration::from_millis(400);
    while Instant::now() < until {
        match tokio::time::timeout_at(until.into(), body.next()).await {
            Ok(Some(Ok(p))) => text.push_str(&String::from_utf8_lossy(&p)),
            _ => break,
        }
    }
    assert!(text.matches(": ping\n\n").count() >= 2, "{text:?}");
    assert!(!text.contains("data:"), "{text:?}");
    let stats = sim.stats();
    assert_eq!(stats.http.injected_keepalive_only, 1);
    assert_eq!(stats.engine.running, 0);
    sim.shutdown().await;
}
