//! What the benchmark client discovers: models, server info, metrics labels, tokenize.

use std::time::Instant;

use ldb_sim::{Personality, Scenario};
use serde_json::{Value, json};

use super::client::{chat_body, client, post, sse, start, tiny, usage_tokens};

async fn get_json(url: String) -> (u16, Value) {
    let r = client().get(url).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn vllm_glm_discovery_matches_seed_server() {
    let sim = start(Scenario::builtin("glm-5.3-flash-4gpu").unwrap(), None).await;
    let base = sim.base_url();
    let (_, models) = get_json(format!("{base}/v1/models")).await;
    assert_eq!(models["data"][0]["max_model_len"], 98_304);
    assert_eq!(models["data"][0]["id"], "GLM-5.3-Flash-EXL3-4bpw");
    let (s, v) = get_json(format!("{base}/version")).await;
    assert_eq!(s, 200);
    assert!(v["version"].is_string());
    let (s, _) = get_json(format!("{base}/get_server_info")).await;
    assert_eq!(s, 404);
    let http = sim.stats().http;
    assert_eq!(http.requests_by_endpoint.get("GET /v1/models"), Some(&1));
    assert_eq!(http.requests_by_endpoint.get("GET /version"), Some(&1));
    assert_eq!(http.requests_by_endpoint.get("other"), Some(&1));
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let info = text
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))
        .unwrap();
    for label in [
        "block_size=\"8192\"",
        "num_gpu_blocks=\"54\"",
        "dcp_world_size=\"2\"",
        "decode_context_parallel_size=\"2\"",
        "kv_cache_size_tokens=\"884736\"",
    ] {
        assert!(info.contains(label), "{label} missing in {info}");
    }
    assert!(text.contains("vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"GLM-5.3-Flash-EXL3-4bpw\",position=\"6\"} 0.0"));
    sim.shutdown().await;
}

#[tokio::test]
async fn sglang_server_info_reports_local_pool() {
    let sim = start(Scenario::builtin("sglang-dcp").unwrap(), None).await;
    let (s, v) = get_json(format!("{}/get_server_info", sim.base_url())).await;
    assert_eq!(s, 200);
    assert_eq!(v["max_total_num_tokens"], 262_144);
    assert_eq!(v["max_running_requests"], 8);
    assert_eq!(v["context_length"], 131_072);
    assert!(v["version"].is_string());
    let text = client()
        .get(format!("{}/metrics", sim.base_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.starts_with("# HELP sglang:"));
    sim.shutdown().await;
}

#[tokio::test]
async fn llamacpp_props_slots_health() {
    let sim = start(Scenario::builtin("llamacpp-4slot").unwrap(), None).await;
    let base = sim.base_url();
    let (_, props) = get_json(format!("{base}/props")).await;
    assert_eq!(props["default_generation_settings"]["n_ctx"], 16_384);
    assert_eq!(props["total_slots"], 4);
    let (_, slots) = get_json(format!("{base}/slots")).await;
    assert_eq!(slots.as_array().map(Vec::len), Some(4));
    let (s, h) = get_json(format!("{base}/health")).await;
    assert_eq!((s, h), (200, json!({"status": "ok"})));
    let (_, models) = get_json(format!("{base}/v1/models")).await;
    assert!(models["data"][0].get("max_model_len").is_none());
    assert!(models["data"][0]["meta"]["n_ctx_train"].is_u64());
    let r = post(&base, "/tokenize", &json!({"content": "abcdefgh"})).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["tokens"].as_array().map(Vec::len), Some(3)); // 8 chars / 3.8
    sim.shutdown().await;
}

#[tokio::test]
async fn openai_proxy_has_only_v1() {
    let sim = start(tiny(), Some(Personality::OpenAi)).await;
    let base = sim.base_url();
    for path in [
        "/metrics",
        "/version",
        "/health",
        "/get_server_info",
        "/tokenize",
    ] {
        let (s, _) = get_json(format!("{base}{path}")).await;
        assert_eq!(s, 404, "{path}");
    }
    let (s, _) = get_json(format!("{base}/v1/models")).await;
    assert_eq!(s, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn tokenize_count_equals_usage_prompt_tokens() {
    let sim = start(tiny(), None).await;
    let base = sim.base_url();
    let messages = json!([
        {"role": "user", "content": "Below is a document. ".repeat(40)},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": [{"type": "text", "text": "Summarize it."}]},
    ]);
    let t: Value = post(
        &base,
        "/tokenize",
        &json!({"model": "sim-tiny", "messages": messages}),
    )
    .await
    .json()
    .await
    .unwrap();
    let count = t["count"].as_u64().unwrap();
    assert_eq!(t["max_model_len"], 4096);
    let r = post(
        &base,
        "/v1/chat/completions",
        &json!({"messages": messages, "max_tokens": 1}),
    )
    .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["usage"]["prompt_tokens"].as_u64(), Some(count));
    assert_eq!(v["usage"]["completion_tokens"], 1);
    assert_eq!(v["object"], "chat.completion");
    sim.shutdown().await;
}

#[tokio::test]
async fn vllm_usage_rules_and_reasoning_field() {
    let mut sc = tiny();
    sc.output.reasoning_tokens = 2;
    sc.server.reasoning_field = ldb_sim::ReasoningField::Both;
    let sim = start(sc, None).await;
    let base = sim.base_url();
    // `stream_options: {}` turns usage on in vLLM; continuous stays off.
    let r = post(
        &base,
        "/v1/chat/completions",
        &chat_body("x", 4, json!({"stream_options": {}})),
    )
    .await;
    let events = sse(r, Instant::now()).await;
    let with_usage: Vec<_> = events
        .iter()
        .filter(|e| e.data.contains("\"usage\""))
        .collect();
    assert_eq!(with_usage.len(), 1);
    assert!(with_usage[0].data.contains("\"choices\":[]"));
    assert!(events.iter().any(|e| {
        e.data
            .contains("\"reasoning\":\" The\",\"reasoning_content\":\" The\"")
    }));
    // No stream_options → no usage at all.
    let r = post(&base, "/v1/chat/completions", &chat_body("x", 4, json!({}))).await;
    let events = sse(r, Instant::now()).await;
    assert_eq!(usage_tokens(&events), None);
    sim.shutdown().await;
}

#[tokio::test]
async fn natural_length_without_ignore_eos() {
    let sim = start(tiny(), Some(Personality::Sglang)).await;
    let body = json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 500, "stream": true,
        "stream_options": {"include_usage": true}});
    let r = post(&sim.base_url(), "/v1/chat/completions", &body).await;
    let events = sse(r, Instant::now()).await;
    assert_eq!(usage_tokens(&events), Some(50));
    assert!(events.iter().any(|e| {
        e.data
            .contains("\"finish_reason\":\"stop\",\"matched_stop\":151645")
    }));
    sim.shutdown().await;
}

#[tokio::test]
async fn vllm_request_id_header_becomes_chunk_id() {
    let sim = start(tiny(), None).await;
    let r = client()
        .post(format!("{}/v1/chat/completions", sim.base_url()))
        .header("X-Request-Id", "bench-42")
        .json(&chat_body("x", 2, json!({})))
        .send()
        .await
        .unwrap();
    let events = sse(r, Instant::now()).await;
    let ids: Vec<_> = events
        .iter()
        .filter_map(|e| e.json())
        .map(|v| v["id"].clone())
        .collect();
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|id| id == "chatcmpl-bench-42"), "{ids:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn non_streaming_answers_in_every_personality() {
    for p in Personality::ALL {
        let sim = start(tiny(), Some(p)).await;
        let base = sim.base_url();
        let chat = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 7, "ignore_eos": true});
        let v: Value = post(&base, "/v1/chat/completions", &chat)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["object"], "chat.completion", "{p}: {v}");
        assert_eq!(v["usage"]["completion_tokens"], 7, "{p}");
        assert_eq!(v["choices"][0]["finish_reason"], "length", "{p}");
        assert!(
            v["choices"][0]["message"]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(" The"))
        );
        let comp = json!({"prompt": "Once upon", "max_tokens": 3});
        let v: Value = post(&base, "/v1/completions", &comp)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["object"], "text_completion", "{p}: {v}");
        assert_eq!(v["usage"]["completion_tokens"], 3, "{p}");
        assert_eq!(v["choices"][0]["text"], " The engine keeps", "{p}");
        sim.shutdown().await;
    }
}

/// The reference client's estimate-mode calibration (whole-prompt chars / tokens at 8k, three
/// messages) lands near the seed's 6.18 chars/token on the GLM scenario.
#[test]
fn glm_calibration_matches_seed() {
    use ldb_sim::{ChatMessage, encode_chat};
    let sc = Scenario::builtin("glm-5.3-flash-4gpu").unwrap();
    let ask = "Write an extremely detailed encyclopedia article on the complete history of \
               mathematics, from the earliest counting in Mesopotamia and Egypt through Greek \
               geometry, Indian and Islamic algebra, the calculus, analysis and abstract algebra, \
               up to the computer age and the year 2025. Cover people, ideas and proofs in depth. \
               Do not summarize.";
    let padding =
        "Urban planners study how streets, parks and buildings shape daily life. ".repeat(2000);
    let tokens_for = |chars: usize| {
        let doc = format!(
            "Below is a large reference document. Read it carefully, then answer the question \
             that follows.\n\n--- BEGIN REFERENCE DOCUMENT ---\n{}\n--- END REFERENCE DOCUMENT ---",
            &padding[..chars]
        );
        let msgs = [
            ChatMessage {
                role: "user",
                content: &doc,
            },
            ChatMessage {
                role: "assistant",
                content: "I have read the entire reference document. Please ask your question.",
            },
            ChatMessage {
                role: "user",
                content: ask,
            },
        ];
        encode_chat(&sc.tokenizer, &msgs).len()
    };
    let mut cpt = 4.0;
    for _ in 0..3 {
        let chars = (8192.0 * cpt) as usize;
        cpt = chars as f64 / tokens_for(chars) as f64;
    }
    assert!((cpt - 6.18).abs() < 0.02, "calibrated {cpt}");
    let ask_only = encode_chat(
        &sc.tokenizer,
        &[ChatMessage {
            role: "user",
            content: ask,
        }],
    )
    .len();
    // The seed's ~60-word prompt was 78 tokens; this ~57-word one is a few less.
    assert!(
        (60..=85).contains(&ask_only),
        "generation prompt {ask_only} tokens (seed: 78)"
    );
}

#[tokio::test]
async fn stream_interval_groups_tokens() {
    let mut sc = tiny();
    sc.spec = None;
    sc.scheduler.stream_interval = 4;
    sc.step_time.base_s = 0.001;
    let sim = start(sc, Some(Personality::Sglang)).await;
    let body = chat_body(
        "x",
        10,
        json!({"stream_options": {"continuous_usage_stats": true}}),
    );
    let r = post(&sim.base_url(), "/v1/chat/completions", &body).await;
    let events = sse(r, Instant::now()).await;
    let counts: Vec<u64> = events
        .iter()
        .filter_map(|e| e.json())
        .filter(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        })
        .filter_map(|v| v["usage"]["completion_tokens"].as_u64())
        .collect();
    // First token at once, then every 4, then the rest at the end.
    assert_eq!(counts, vec![1, 5, 9, 10]);
    sim.shutdown().await;
}
