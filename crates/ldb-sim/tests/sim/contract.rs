//! Contract snapshots: streamed responses and `/metrics` per personality.

use std::time::Instant;

use ldb_sim::Personality;
use serde_json::json;

use super::client::{chat_body, client, post, sse, start, tiny};

async fn stream_lines(p: Personality, path: &str, body: serde_json::Value) -> String {
    let sim = start(tiny(), Some(p)).await;
    let r = post(&sim.base_url(), path, &body).await;
    let events = sse(r, Instant::now()).await;
    sim.shutdown().await;
    events
        .iter()
        .map(|e| e.data.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn body() -> serde_json::Value {
    chat_body(
        "Count to five.",
        5,
        json!({"model": "sim-tiny", "stream_options": {"include_usage": true, "continuous_usage_stats": true}}),
    )
}

#[tokio::test]
async fn vllm_chat_stream() {
    insta::assert_snapshot!(stream_lines(Personality::Vllm, "/v1/chat/completions", body()).await);
}

#[tokio::test]
async fn vllm_completion_stream() {
    let b = json!({"prompt": "Once", "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}});
    insta::assert_snapshot!(stream_lines(Personality::Vllm, "/v1/completions", b).await);
}

#[tokio::test]
async fn sglang_chat_stream() {
    insta::assert_snapshot!(
        stream_lines(Personality::Sglang, "/v1/chat/completions", body()).await
    );
}

#[tokio::test]
async fn llamacpp_chat_stream() {
    let text = stream_lines(Personality::LlamaCpp, "/v1/chat/completions", body()).await;
    // Timings are wall-clock: keep the keys, drop the values.
    let redacted: Vec<String> = text
        .lines()
        .map(|l| match l.find(",\"timings\":") {
            Some(i) => format!("{},\"timings\":<redacted>}}", &l[..i]),
            None => l.to_string(),
        })
        .collect();
    insta::assert_snapshot!(redacted.join("\n"));
}

#[tokio::test]
async fn openai_chat_stream() {
    insta::assert_snapshot!(
        stream_lines(Personality::OpenAi, "/v1/chat/completions", body()).await
    );
}

/// Wall-clock dependent samples (seconds histograms, throughput gauges) are redacted.
fn redact_metrics(text: &str) -> String {
    text.lines()
        .map(|l| {
            let timed = !l.starts_with('#')
                && !l.contains("_count")
                && (l.contains("_seconds")
                    || l.contains("gen_throughput")
                    || l.contains("tokens_seconds"));
            match (timed, l.rfind(' ')) {
                (true, Some(i)) => format!("{} <t>", &l[..i]),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn metrics_after_one_request(p: Personality) -> String {
    redact_metrics(&raw_metrics_after_one_request(p).await)
}

/// `/metrics` of a fresh simulator of personality `p` after one streamed request.
pub(super) async fn raw_metrics_after_one_request(p: Personality) -> String {
    let sim = start(tiny(), Some(p)).await;
    let base = sim.base_url();
    let r = post(
        &base,
        "/v1/chat/completions",
        &chat_body("Hello there.", 8, json!({})),
    )
    .await;
    let _ = sse(r, Instant::now()).await;
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    sim.shutdown().await;
    text
}

#[tokio::test]
async fn vllm_metrics() {
    insta::assert_snapshot!(metrics_after_one_request(Personality::Vllm).await);
}

#[tokio::test]
async fn sglang_metrics() {
    insta::assert_snapshot!(metrics_after_one_request(Personality::Sglang).await);
}

#[tokio::test]
async fn llamacpp_metrics() {
    insta::assert_snapshot!(metrics_after_one_request(Personality::LlamaCpp).await);
}
