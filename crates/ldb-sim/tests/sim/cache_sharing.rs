//! The simulator's prefix cache against what real engines were recorded
//! caching (`crates/ldb-client/tests/fixtures/cache-sharing/`, recorded by
//! `scripts/record-cache-sharing.py`; docs/methodology.md §16.1): each
//! recorded case is sent to a simulator with the engine's block size and a
//! template of the same head, and must find the same number of tokens
//! cached as the real engine did.

use std::path::PathBuf;

use ldb_sim::Scenario;
use serde_json::{Value, json};

use super::client::{post, start, tiny};

fn recordings() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ldb-client/tests/fixtures/cache-sharing");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no recordings in {}", dir.display());
    files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// A scenario of `block`-token blocks whose template head (the tokens two
/// unrelated user messages share) is `head` tokens, no speculative
/// decoding, 4 characters per token.
fn scenario(block: u64, head: u64) -> Scenario {
    let mut s = tiny();
    s.kv.block_size = block as u32;
    s.kv.num_blocks = (65_536 / block).max(64) as u32;
    s.spec = None;
    // quick steps: a recorded reply is a few hundred tokens
    s.step_time.base_s = 0.001;
    s.tokenizer.tokens_per_message = 1;
    s.tokenizer.tokens_per_request = head.saturating_sub(1).max(1) as u32;
    s
}

/// A user message of `tokens` tokens (4-character words) opening with
/// word `first`.
fn text(first: u64, tokens: u64) -> String {
    let mut s = format!("{:>4}", first % 10_000);
    for i in 1..tokens {
        s.push_str(&format!(" w{:02}", i % 100));
    }
    s
}

/// Sends one chat and returns (reply text, tokens served from the cache).
async fn chat(base: &str, sim: &ldb_sim::SimHandle, msgs: Value, max: u64) -> (String, u64) {
    let before = sim.stats().engine.prefix_hits;
    let body = json!({"messages": msgs, "max_tokens": max, "stream": false, "ignore_eos": true});
    let v: Value = post(base, "/v1/chat/completions", &body)
        .await
        .json()
        .await
        .unwrap();
    let reply = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (reply, sim.stats().engine.prefix_hits - before)
}

async fn head_case(block: u64, c: &Value) {
    let head = n(c, "template_head_tokens");
    let prompt = n(c, "prompt_tokens");
    let sim = start(scenario(block, head), None).await;
    let base = sim.base_url();
    let user = |k| json!([{"role": "user", "content": text(k, prompt - head)}]);
    chat(&base, &sim, user(1), 1).await;
    let (_, cached) = chat(&base, &sim, user(2), 1).await;
    assert_eq!(cached, n(c, "cached_metrics"), "block {block}: {c}");
}

async fn reply_case(block: u64, c: &Value) {
    let (prompt, generated) = (n(c, "prompt_tokens"), n(c, "generated_tokens"));
    let sim = start(scenario(block, 8), None).await;
    let base = sim.base_url();
    let first = json!([{"role": "user", "content": text(7, prompt - 8)}]);
    let (reply, _) = chat(&base, &sim, first.clone(), generated).await;
    let mut next = first.as_array().unwrap().clone();
    next.push(json!({"role": "assistant", "content": reply}));
    next.push(json!({"role": "user", "content": text(9, 40)}));
    let (_, cached) = chat(&base, &sim, Value::Array(next), 1).await;
    assert_eq!(cached, n(c, "cached_metrics"), "block {block}: {c}");
}

#[tokio::test]
async fn the_simulator_caches_what_the_engines_were_recorded_caching() {
    for rec in recordings() {
        let block = n(&rec, "block_tokens");
        for c in rec["cases"].as_array().unwrap() {
            match c["case"].as_str().unwrap() {
                "head" => head_case(block, c).await,
                // The reply was repeated token for token by the next turn
                // (no hidden special token): the simulator's replies are.
                _ if c["cached_metrics"] == c["predicted"]["prompt_and_reply_but_last"] => {
                    reply_case(block, c).await
                }
                _ => {}
            }
        }
    }
}
