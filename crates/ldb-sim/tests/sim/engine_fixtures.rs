//! The simulator against responses recorded from the real engines
//! (`crates/ldb-client/tests/fixtures/<engine>-<version>/`): every metric the
//! benchmark reads that the real server exposes, the simulator exposes with
//! the same type and label names; streamed chunks have the same keys at every
//! level. So the simulator cannot drift from the engines it imitates while
//! the client and the simulator agree with each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use ldb_sim::Personality;
use serde_json::{Value, json};

use super::client::{chat_body, post, sse, start, tiny};
use super::contract::raw_metrics_after_one_request;

fn fixture(dir: &str, name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ldb-client/tests/fixtures")
        .join(dir)
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Family name → (type, label names) of an exposition; a family's samples
/// (`_total`, `_sum`, `_count`, `_bucket`) all count for it, `le` excluded.
fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (it.next(), it.next()) {
                out.entry(name.to_string()).or_default().0 = kind.to_string();
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        let family = ["_total", "_sum", "_count", "_bucket"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|base| out.contains_key(*base)))
            .unwrap_or(name);
        let labels: BTreeSet<String> = line[name_end..]
            .strip_prefix('{')
            .and_then(|l| l.split_once('}'))
            .map(|(l, _)| {
                l.split(',')
                    .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim().to_string()))
                    .filter(|k| k != "le")
                    .collect()
            })
            .unwrap_or_default();
        out.entry(family.to_string()).or_default().1.extend(labels);
    }
    out
}

/// The families the benchmark reads (`ldb_core::engine`), that the real
/// server exposes, must look the same in the simulator.
fn same_families(engine: &str, real: &str, sim: &str, read: &[&str], allowed_extra: &[&str]) {
    let (real, sim) = (families(real), families(sim));
    let mut problems = Vec::new();
    for name in read {
        let Some((kind, labels)) = real.get(*name) else {
            continue;
        };
        match sim.get(*name) {
            None => problems.push(format!("{name}: missing in the simulator")),
            Some((sk, sl)) => {
                if sk != kind {
                    problems.push(format!("{name}: type {sk}, real {kind}"));
                }
                let extra: Vec<_> = sl
                    .difference(labels)
                    .filter(|l| !allowed_extra.contains(&l.as_str()))
                    .collect();
                // An info metric's labels are the engine's whole configuration;
                // the simulator carries the ones the benchmark reads and
                // invents none.
                let missing: Vec<_> = if name.ends_with("_info") {
                    Vec::new()
                } else {
                    labels.difference(sl).collect()
                };
                if !extra.is_empty() || !missing.is_empty() {
                    problems.push(format!(
                        "{name}: labels {sl:?}, real {labels:?} (extra {extra:?}, missing {missing:?})"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{engine}:\n{}", problems.join("\n"));
}

const VLLM_READ: &[&str] = &[
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:generation_tokens",
    "vllm:prompt_tokens",
    "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:request_success",
    "vllm:request_prefill_time_seconds",
    "vllm:request_prefill_kv_computed_tokens",
    "vllm:cache_config_info",
];

const SGLANG_READ: &[&str] = &[
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:utilization",
    "sglang:gen_throughput",
    "sglang:realtime_tokens",
    "sglang:generation_tokens",
    "sglang:prompt_tokens",
    "sglang:cached_tokens",
    "sglang:num_requests",
    "sglang:per_stage_req_latency_seconds",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
];

const LLAMACPP_READ: &[&str] = &[
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:kv_cache_usage_ratio",
    "llamacpp:n_decode_total",
    "llamacpp:n_busy_slots_per_decode",
    "llamacpp:tokens_predicted_total",
    "llamacpp:prompt_tokens_total",
    "llamacpp:prompt_seconds_total",
];

#[tokio::test]
async fn vllm_metrics_match_the_real_server() {
    let real = fixture("vllm-0.32.0", "metrics-after.txt");
    let sim = raw_metrics_after_one_request(Personality::Vllm).await;
    same_families("vLLM 0.32.0", &real, &sim, VLLM_READ, &[]);
}

#[tokio::test]
async fn sglang_metrics_match_the_real_server() {
    let real = fixture("sglang-0.5.23", "metrics-after-chats.txt");
    let sim = raw_metrics_after_one_request(Personality::Sglang).await;
    same_families("SGLang 0.5.23", &real, &sim, SGLANG_READ, &[]);
}

#[tokio::test]
async fn llamacpp_metrics_match_the_real_server() {
    let real = fixture("llamacpp-11434.0.0", "metrics-after.txt");
    let sim = raw_metrics_after_one_request(Personality::LlamaCpp).await;
    same_families("llama.cpp", &real, &sim, LLAMACPP_READ, &[]);
}

/// Key paths of a JSON value (`a`, `a.b`, `choices[].delta.content`), values left out.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// Key paths of a stream's chunks, split into chunks with text and the
/// usage-only chunk (`choices: []`), the two shapes the client measures.
fn stream_shapes(payloads: &[Value]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut text, mut usage_only) = (BTreeSet::new(), BTreeSet::new());
    for v in payloads {
        let choices = v.get("choices").and_then(Value::as_array);
        let has_text = choices.is_some_and(|c| {
            c.iter().any(|ch| {
                ch.pointer("/delta/content")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
            })
        });
        if has_text {
            key_paths(v, "", &mut text);
        } else if choices.is_some_and(Vec::is_empty) {
            key_paths(v, "", &mut usage_only);
        }
    }
    (text, usage_only)
}

fn recorded_payloads(dir: &str) -> Vec<Value> {
    fixture(dir, "chat-stream-continuous-usage.sse")
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("recorded chunk is JSON"))
        .collect()
}

async fn sim_payloads(p: Personality) -> Vec<Value> {
    let sim = start(tiny(), Some(p)).await;
    let body = chat_body(
        "Count to five.",
        8,
        json!({"stream_options": {"include_usage": true, "continuous_usage_stats": true}}),
    );
    let events = sse(
        post(&sim.base_url(), "/v1/chat/completions", &body).await,
        Instant::now(),
    )
    .await;
    sim.shutdown().await;
    events.iter().filter_map(|e| e.json()).collect()
}

/// Chunk keys the simulator may lack: fields no part of the benchmark reads.
fn same_shapes(engine: &str, real: &[Value], sim: &[Value], ignore: &[&str]) {
    let (rt, ru) = stream_shapes(real);
    let (st, su) = stream_shapes(sim);
    let keep = |s: &BTreeSet<String>| -> BTreeSet<String> {
        s.iter()
            .filter(|k| !ignore.iter().any(|i| k.starts_with(i)))
            .cloned()
            .collect()
    };
    assert_eq!(
        keep(&st),
        keep(&rt),
        "{engine}: text chunk keys (simulator left, real right)"
    );
    assert_eq!(
        keep(&su),
        keep(&ru),
        "{engine}: usage-only chunk keys (simulator left, real right)"
    );
}

#[tokio::test]
async fn vllm_stream_chunks_have_the_real_shape() {
    let real = recorded_payloads("vllm-0.32.0");
    let sim = sim_payloads(Personality::Vllm).await;
    same_shapes("vLLM 0.32.0", &real, &sim, &[]);
}

#[tokio::test]
async fn sglang_stream_chunks_have_the_real_shape() {
    let real = recorded_payloads("sglang-0.5.23");
    let sim = sim_payloads(Personality::Sglang).await;
    same_shapes("SGLang 0.5.23", &real, &sim, &[]);
}

#[tokio::test]
async fn llamacpp_stream_chunks_have_the_real_shape() {
    let real = recorded_payloads("llamacpp-11434.0.0");
    let sim = sim_payloads(Personality::LlamaCpp).await;
    same_shapes("llama.cpp", &real, &sim, &[]);
}
