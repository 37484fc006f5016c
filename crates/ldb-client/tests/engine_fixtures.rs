//! Our parsers on responses recorded from real servers
//! (`tests/fixtures/<engine>-<version>/`, see the README.md in each folder):
//! discovery against a local server that replays the recorded bodies,
//! `/metrics` through the Prometheus parser and the engine mapping, and the
//! recorded SSE bytes through the SSE decoder, the chunk parser and the
//! per-request token accounting.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use ldb_client::Http;
use ldb_client::discovery::{TokenizeKind, discover};
use ldb_core::chunk::{is_done, parse_chunk};
use ldb_core::engine::{Engine, server_snapshot};
use ldb_core::prometheus::MetricSet;
use ldb_core::sse::SseDecoder;
use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};
use serde_json::Value;

const VLLM: &str = "vllm-0.32.0";
const LLAMACPP: &str = "llamacpp-11434.0.0";

fn dir(engine: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(engine)
}

fn read(engine: &str, name: &str) -> String {
    let p = dir(engine).join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn json(engine: &str, name: &str) -> Value {
    serde_json::from_str(&read(engine, name)).expect("fixture is JSON")
}

fn metrics(engine: &str, name: &str) -> MetricSet {
    MetricSet::parse(&read(engine, name))
}

// ---------------------------------------------------------------------------
// A local server that answers with recorded bodies.

/// Serve `routes` (path → fixture file) on 127.0.0.1; every other path is a
/// 404, as on the real server. Returns the base URL. The thread lives until
/// the test process ends.
fn replay(engine: &str, routes: &[(&str, &str)]) -> String {
    let table: HashMap<String, (String, &'static str)> = routes
        .iter()
        .map(|(path, file)| {
            let kind = if file.ends_with(".txt") {
                "text/plain; version=0.0.4; charset=utf-8"
            } else {
                "application/json"
            };
            (path.to_string(), (read(engine, file), kind))
        })
        .collect();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&req);
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body, kind) = match table.get(&path) {
                Some((body, kind)) => ("200 OK", body.as_str(), *kind),
                None => (
                    "404 Not Found",
                    "{\"detail\":\"Not Found\"}",
                    "application/json",
                ),
            };
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

fn discover_replayed(base: &str) -> ldb_client::discovery::Discovery {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let http = Http::new(base, None, 2).expect("client");
        discover(&http, None).await.expect("discovery")
    })
}

// ---------------------------------------------------------------------------
// SSE streams

/// One recorded stream, decoded.
struct Stream {
    /// Every `data:` payload but `[DONE]`, in order.
    payloads: Vec<Vec<u8>>,
    done: bool,
}

/// Decode a recorded body, fed in pieces of `piece` bytes, so that lines and
/// multi-byte characters are cut at every possible place for small pieces.
fn decode(bytes: &[u8], piece: usize) -> Stream {
    let mut dec = SseDecoder::new();
    let mut out = Stream {
        payloads: Vec::new(),
        done: false,
    };
    let mut take = |p: &[u8]| {
        if is_done(p) {
            out.done = true;
        } else {
            out.payloads.push(p.to_vec());
        }
    };
    for part in bytes.chunks(piece) {
        dec.feed(part, &mut take);
    }
    dec.finish(&mut take);
    out
}

/// What a whole stream says, from the chunk parser.
#[derive(Debug, Default)]
struct Summary {
    text: String,
    /// Chunks with choices.
    chunks: u64,
    /// Chunks with choices whose usage grew while their text was empty.
    empty_with_tokens: u64,
    /// Last usage seen (completion, prompt).
    last_completion: Option<u64>,
    last_prompt: Option<u64>,
    /// The last chunk has no choices, only usage.
    usage_only_last: bool,
    /// Usage on every chunk with choices.
    usage_everywhere: bool,
    finish_reason: Option<String>,
    /// Tokens counted by the per-request accounting, window = whole stream.
    counted: u64,
    output_tokens: u64,
}

fn summarize(stream: &Stream) -> Summary {
    let mut s = Summary {
        usage_everywhere: true,
        ..Summary::default()
    };
    let window = WindowBounds {
        start: Some(0.0),
        end: None,
    };
    let mut track = RequestTrack::new(0.0);
    let mut prev = 0u64;
    for (i, p) in stream.payloads.iter().enumerate() {
        let c = parse_chunk(p).unwrap_or_else(|e| panic!("chunk {i}: {e}"));
        assert!(c.error.is_none(), "chunk {i}: {:?}", c.error);
        let t = 0.01 * (i + 1) as f64;
        s.counted += track
            .on_chunk(ChunkEvent::from_chunk(t, &c), window)
            .new_tokens;
        if let Some(f) = &c.finish_reason {
            s.finish_reason = Some(f.to_string());
        }
        s.usage_only_last = !c.has_choices && c.completion_tokens.is_some();
        if c.has_choices {
            s.chunks += 1;
            if c.completion_tokens.is_none() {
                s.usage_everywhere = false;
            }
            if let Some(t) = &c.text {
                s.text.push_str(t);
            }
            if c.text.is_none() && c.completion_tokens.is_some_and(|n| n > prev) {
                s.empty_with_tokens += 1;
            }
        }
        if let Some(n) = c.completion_tokens {
            assert!(
                n >= prev,
                "chunk {i}: completion_tokens went back {prev} → {n}"
            );
            prev = n;
            s.last_completion = Some(n);
        }
        if c.prompt_tokens.is_some() {
            s.last_prompt = c.prompt_tokens;
        }
    }
    s.output_tokens = track.output_tokens();
    s
}

fn stream(engine: &str, name: &str) -> (Stream, Summary) {
    let bytes = std::fs::read(dir(engine).join(name)).expect("fixture");
    let whole = decode(&bytes, bytes.len().max(1));
    // The decoder gives the same payloads however the body is cut.
    for piece in [1usize, 2, 3, 7, 64] {
        let cut = decode(&bytes, piece);
        assert_eq!(
            cut.payloads, whole.payloads,
            "{name} fed in {piece}-byte pieces"
        );
        assert_eq!(cut.done, whole.done);
    }
    let sum = summarize(&whole);
    (whole, sum)
}

// ---------------------------------------------------------------------------
// vLLM 0.32.0

#[test]
fn vllm_discovery_on_recorded_responses() {
    let base = replay(
        VLLM,
        &[
            ("/v1/models", "v1-models.json"),
            ("/version", "version.json"),
            ("/metrics", "metrics-idle.txt"),
        ],
    );
    let d = discover_replayed(&base);
    assert_eq!(d.engine, Engine::Vllm);
    assert_eq!(d.engine_version, "0.32.0");
    assert_eq!(d.models, vec!["SmolLM2-135M-Instruct".to_string()]);
    assert_eq!(d.model, "SmolLM2-135M-Instruct");
    assert_eq!(d.model_context, 2048, "/v1/models max_model_len");
    assert!(d.metrics_available, "{}", d.metrics_warning);
    // 182 blocks of 128 tokens: 1 GiB of float32 KV for this model.
    assert_eq!(d.kv_blocks, Some((182, 128)));
    assert_eq!(d.kv_local_tokens, 23_296);
    assert_eq!(
        d.kv_local_source,
        "vllm:cache_config_info block_size x num_gpu_blocks"
    );
    // No context parallelism on this server: no CP labels to find.
    assert_eq!(d.cp_from_labels, None);
    assert_eq!(d.tokenize, TokenizeKind::Chat);
}

#[test]
fn vllm_version_and_models_shapes() {
    assert_eq!(json(VLLM, "version.json")["version"], "0.32.0");
    let models = json(VLLM, "v1-models.json");
    let card = &models["data"][0];
    assert_eq!(card["id"], "SmolLM2-135M-Instruct");
    assert_eq!(card["max_model_len"], 2048);
    assert_eq!(card["owned_by"], "vllm");
}

#[test]
fn vllm_tokenize_counts_the_chat_template() {
    // POST /tokenize {model, messages} → {count, max_model_len, tokens}
    let req = json(VLLM, "tokenize.request.json");
    assert!(req["messages"].is_array(), "{req}");
    let resp = json(VLLM, "tokenize.json");
    let count = resp["count"].as_u64().expect("count");
    assert_eq!(
        resp["tokens"].as_array().expect("tokens").len() as u64,
        count
    );
    assert_eq!(resp["max_model_len"], 2048);
    // The same messages streamed: vLLM's usage counts the same prompt.
    let (_, s) = stream(VLLM, "chat-stream-continuous-usage.sse");
    assert_eq!(
        s.last_prompt,
        Some(count),
        "tokenize vs usage.prompt_tokens"
    );
}

#[test]
fn vllm_metrics_idle_and_after_two_requests() {
    let idle = metrics(VLLM, "metrics-idle.txt");
    assert!(idle.has_prefix("vllm:"));
    // Every engine series names its engine and model. The one series kept
    // by the API server in front of the engines has no engine label.
    for s in idle.samples.iter().filter(|s| s.name.starts_with("vllm:")) {
        if s.name.starts_with("vllm:admission_rejections") {
            assert_eq!(s.label("engine"), None, "{s:?}");
            continue;
        }
        assert_eq!(s.label("engine"), Some("0"), "{s:?}");
        if s.name != "vllm:cache_config_info" {
            assert_eq!(
                s.label("model_name"),
                Some("SmolLM2-135M-Instruct"),
                "{s:?}"
            );
        }
    }
    let snap = server_snapshot(Engine::Vllm, &idle);
    assert_eq!(snap.running, Some(0.0));
    assert_eq!(snap.waiting, Some(0.0));
    assert_eq!(snap.kv_usage, Some(0.0));
    assert_eq!(snap.gen_tokens, Some(0.0));
    assert_eq!(snap.request_success, Some(0.0));
    // No speculative decoding on this server.
    assert_eq!(snap.spec_drafts, None);

    // After the two recorded chats (32 and 48 tokens, prompts of 42 and 84).
    let (_, en) = stream(VLLM, "chat-stream-continuous-usage.sse");
    let (_, zh) = stream(VLLM, "chat-stream-cjk-emoji.sse");
    let generated = en.last_completion.unwrap() + zh.last_completion.unwrap();
    let prompt = en.last_prompt.unwrap() + zh.last_prompt.unwrap();
    let after = server_snapshot(Engine::Vllm, &metrics(VLLM, "metrics-after.txt"));
    assert_eq!(after.gen_tokens, Some(generated as f64));
    assert_eq!(after.prompt_tokens, Some(prompt as f64));
    assert_eq!(after.prompt_local_compute, Some(prompt as f64));
    assert_eq!(after.prefill_kv_computed, Some(prompt as f64));
    assert_eq!(after.prompt_cached, Some(0.0));
    assert_eq!(after.prefix_queries, Some(prompt as f64));
    assert_eq!(after.prefix_hits, Some(0.0));
    // request_success_total has one series per finished_reason: summed.
    assert_eq!(after.request_success, Some(2.0));
    assert_eq!(after.prefill_time_count, Some(2.0));
    assert!(after.prefill_time_sum.is_some_and(|s| s > 0.0));
    assert_eq!(after.running, Some(0.0));
}

#[test]
fn vllm_stream_with_continuous_usage() {
    let (st, s) = stream(VLLM, "chat-stream-continuous-usage.sse");
    assert!(st.done, "[DONE] at the end");
    // Usage on every chunk, then a usage-only chunk with `choices: []`.
    assert!(s.usage_everywhere);
    assert!(s.usage_only_last);
    assert_eq!(s.last_completion, Some(32));
    assert_eq!(s.finish_reason.as_deref(), Some("length"));
    // The first chunk (role, empty content, 0 tokens) and one chunk per token.
    assert_eq!(s.chunks, 1 + 32);
    // The model answers in digits: "12345678901234567891234567891234".
    assert!(s.text.starts_with("123456789"), "{:?}", s.text);
    assert_eq!(s.counted, 32, "tokens counted by the accounting");
    assert_eq!(s.output_tokens, 32);
}

#[test]
fn vllm_stream_with_chinese_and_emoji() {
    let (st, s) = stream(VLLM, "chat-stream-cjk-emoji.sse");
    assert!(st.done);
    assert!(s.usage_everywhere);
    assert_eq!(s.last_completion, Some(48));
    assert!(s.text.contains("你好，世界！"), "{:?}", s.text);
    assert!(
        s.text.contains('😀') || s.text.contains('🙂'),
        "{:?}",
        s.text
    );
    // vLLM holds back the bytes of an unfinished character: those chunks
    // have `delta.content == ""` while usage.completion_tokens grows.
    assert!(
        s.empty_with_tokens >= 5,
        "{} chunks with an empty delta and new tokens",
        s.empty_with_tokens
    );
    // Every token counts, including those of the empty-delta chunks.
    assert_eq!(s.counted, 48, "tokens counted by the accounting");
    assert_eq!(s.output_tokens, 48);
}

#[test]
fn vllm_spec_decode_metrics() {
    let before = metrics(VLLM, "spec-ngram-metrics-idle.txt");
    let after = metrics(VLLM, "spec-ngram-metrics-after.txt");
    let (b, a) = (
        server_snapshot(Engine::Vllm, &before),
        server_snapshot(Engine::Vllm, &after),
    );
    assert_eq!(b.spec_drafts, Some(0.0));
    let drafts = a.spec_drafts.expect("vllm:spec_decode_num_drafts_total");
    let draft_tokens = a.spec_draft_tokens.expect("num_draft_tokens_total");
    let accepted = a.spec_accepted.expect("num_accepted_tokens_total");
    assert!(drafts > 0.0, "the recorded requests drafted");
    // num_speculative_tokens = 3
    assert!(draft_tokens <= 3.0 * drafts && draft_tokens >= drafts);
    assert!(accepted <= draft_tokens);
    // One per-position counter per draft position, adding up to the total.
    assert_eq!(
        a.spec_accepted_per_pos.len(),
        3,
        "{:?}",
        a.spec_accepted_per_pos
    );
    assert_eq!(a.spec_accepted_per_pos.iter().sum::<f64>(), accepted);
    let positions: BTreeSet<&str> = after
        .samples
        .iter()
        .filter(|s| s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total")
        .filter_map(|s| s.label("position"))
        .collect();
    assert_eq!(positions, BTreeSet::from(["0", "1", "2"]));
    // Generated tokens: each drafted step yields its accepted tokens plus one.
    let generated = a.gen_tokens.expect("generation_tokens_total");
    assert!(
        generated >= accepted + drafts,
        "generated {generated}, accepted {accepted}, drafts {drafts}"
    );
    // The streams of that server carry the same usage shape.
    let (_, s) = stream(VLLM, "spec-ngram-chat-stream-continuous-usage.sse");
    assert!(s.usage_everywhere && s.usage_only_last);
    assert_eq!(s.counted, s.last_completion.unwrap());
}

#[test]
fn vllm_data_parallel_metrics() {
    let m = metrics(VLLM, "dp2-metrics-busy.txt");
    let engines: BTreeSet<&str> = m
        .samples
        .iter()
        .filter(|s| s.name == "vllm:num_requests_running")
        .filter_map(|s| s.label("engine"))
        .collect();
    assert_eq!(engines, BTreeSet::from(["0", "1"]));
    // One cache_config_info per engine. num_gpu_blocks is the sum over the
    // engines (vLLM's front end adds them up) and the same on both;
    // kv_cache_size_tokens is each engine's own.
    let infos: Vec<_> = m
        .samples
        .iter()
        .filter(|s| s.name == "vllm:cache_config_info")
        .collect();
    assert_eq!(infos.len(), 2, "{infos:?}");
    let label = |i: usize, k: &str| -> u64 { infos[i].label(k).unwrap().parse().unwrap() };
    let (blocks, bs) = (label(0, "num_gpu_blocks"), label(0, "block_size"));
    assert_eq!(label(1, "num_gpu_blocks"), blocks);
    assert_eq!(
        blocks * bs,
        label(0, "kv_cache_size_tokens") + label(1, "kv_cache_size_tokens"),
        "num_gpu_blocks × block_size = both engines' KV"
    );
    let per_engine = |name: &str| -> Vec<f64> {
        m.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .collect()
    };
    let snap = server_snapshot(Engine::Vllm, &m);
    // Counts add up over engines.
    let running = per_engine("vllm:num_requests_running");
    assert_eq!(snap.running, Some(running.iter().sum()));
    assert_eq!(snap.running, Some(2.0), "the recording ran 2 requests");
    // A usage fraction is a fraction of the whole budget: with equal engines,
    // the mean of the engines' fractions, never their sum.
    let usage = per_engine("vllm:kv_cache_usage_perc");
    assert_eq!(usage.len(), 2);
    assert!(
        usage.iter().all(|u| *u > 0.0),
        "both engines busy: {usage:?}"
    );
    let mean = usage.iter().sum::<f64>() / usage.len() as f64;
    let got = snap.kv_usage.expect("kv usage");
    assert!(
        (got - mean).abs() < 1e-9,
        "KV usage over DP engines: got {got}, want the whole-budget fraction {mean} \
         (engines {usage:?})"
    );
    // Discovery on the same scrape.
    let base = replay(
        VLLM,
        &[
            ("/v1/models", "dp2-v1-models.json"),
            ("/version", "version.json"),
            ("/metrics", "dp2-metrics-busy.txt"),
        ],
    );
    let d = discover_replayed(&base);
    assert_eq!(d.engine, Engine::Vllm);
    assert!(d.metrics_available);
    assert_eq!(
        d.kv_local_tokens,
        blocks * bs,
        "KV budget over DP engines: {blocks} blocks (both engines) × {bs}"
    );
    assert_eq!(d.kv_blocks, Some((blocks, bs)));
}

// ---------------------------------------------------------------------------
// llama.cpp

#[test]
fn llamacpp_discovery_on_recorded_responses() {
    let base = replay(
        LLAMACPP,
        &[
            ("/v1/models", "v1-models.json"),
            ("/props", "props.json"),
            ("/metrics", "metrics-idle.txt"),
        ],
    );
    let d = discover_replayed(&base);
    let props = json(LLAMACPP, "props.json");
    assert_eq!(d.engine, Engine::LlamaCpp);
    assert_eq!(d.engine_version, props["build_info"].as_str().unwrap());
    assert_eq!(d.model, "SmolLM2-135M-Instruct");
    assert!(d.metrics_available, "{}", d.metrics_warning);
    let slots = props["total_slots"].as_u64().unwrap();
    let n_ctx = props["default_generation_settings"]["n_ctx"]
        .as_u64()
        .unwrap();
    assert_eq!(d.max_running, slots);
    assert_eq!(d.model_context, n_ctx);
    assert_eq!(d.kv_local_tokens, slots * n_ctx);
    assert_eq!(d.tokenize, TokenizeKind::Content);
}

#[test]
fn llamacpp_metrics_after_two_requests() {
    let idle = server_snapshot(Engine::LlamaCpp, &metrics(LLAMACPP, "metrics-idle.txt"));
    assert_eq!(idle.running, Some(0.0));
    assert_eq!(idle.gen_tokens, Some(0.0));
    let (_, en) = stream(LLAMACPP, "chat-stream-continuous-usage.sse");
    let (_, zh) = stream(LLAMACPP, "chat-stream-cjk-emoji.sse");
    let generated = en.last_completion.unwrap() + zh.last_completion.unwrap();
    let m = metrics(LLAMACPP, "metrics-after.txt");
    let after = server_snapshot(Engine::LlamaCpp, &m);
    assert_eq!(
        m.sum("llamacpp:tokens_predicted_total", &[]),
        Some(generated as f64),
        "finished requests' tokens"
    );
    // The live slot-step count: one step per generated token but the first,
    // which comes from the prompt batch.
    let live = after.gen_tokens.expect("live count");
    assert!(
        (live - generated as f64).abs() <= 2.0,
        "slot-steps {live} vs generated {generated}"
    );
    assert_eq!(after.running, Some(0.0));
}

#[test]
fn llamacpp_streams_usage_at_the_end_only() {
    for name in [
        "chat-stream-continuous-usage.sse",
        "chat-stream-cjk-emoji.sse",
    ] {
        let (st, s) = stream(LLAMACPP, name);
        assert!(st.done, "{name}");
        // continuous_usage_stats is ignored: usage on the last chunk only.
        assert!(!s.usage_everywhere, "{name}");
        let total = s.last_completion.expect("final usage");
        assert_eq!(s.output_tokens, total, "{name}");
        assert_eq!(s.counted, total, "{name}: tokens counted by the accounting");
    }
    let (_, zh) = stream(LLAMACPP, "chat-stream-cjk-emoji.sse");
    assert!(zh.text.contains("你好"), "{:?}", zh.text);
}

#[test]
fn llamacpp_tokenize_shape() {
    let req = json(LLAMACPP, "tokenize.request.json");
    assert!(req["content"].is_string());
    let resp = json(LLAMACPP, "tokenize.json");
    assert!(!resp["tokens"].as_array().expect("tokens").is_empty());
}
