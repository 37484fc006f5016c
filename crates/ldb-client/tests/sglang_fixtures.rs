//! The client's discovery, Prometheus and stream parsers on responses
//! recorded from a real SGLang 0.5.23 (tests/fixtures/sglang-0.5.23, see its
//! README), and on the source-derived expositions of what a CPU run cannot
//! show (data-parallel ranks, speculative decoding).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ldb_client::Http;
use ldb_client::discovery::{TokenizeKind, discover};
use ldb_core::chunk::{is_done, parse_chunk};
use ldb_core::engine::{Engine, server_snapshot};
use ldb_core::prometheus::MetricSet;
use ldb_core::sse::SseDecoder;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sglang-0.5.23")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn metrics(name: &str) -> MetricSet {
    MetricSet::parse(&read(name))
}

fn decode_sum(m: &MetricSet) -> f64 {
    m.sum("sglang:realtime_tokens_total", &[("mode", "decode")])
        .expect("realtime_tokens_total{mode=decode}")
}

/// A server that answers GETs with recorded bodies and remembers the paths
/// asked for, in order.
async fn fixture_server(
    routes: HashMap<&'static str, String>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().expect("lock").push(path.clone());
                let (status, body) = match routes.get(path.as_str()) {
                    Some(b) => ("200 OK", b.clone()),
                    None => ("404 Not Found", "{\"detail\":\"Not Found\"}".to_string()),
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    (base, seen)
}

#[tokio::test]
async fn discovery_on_recorded_sglang() {
    let routes = HashMap::from([
        ("/v1/models", read("v1-models.json")),
        ("/get_server_info", read("get-server-info.json")),
        ("/server_info", read("server-info.json")),
        ("/model_info", read("model-info.json")),
        ("/metrics", read("metrics-idle.txt")),
    ]);
    let (base, seen) = fixture_server(routes).await;
    let http = Http::new(&base, None, 2).expect("client");
    let d = discover(&http, None).await.expect("discovery");
    assert_eq!(d.models, vec!["SmolLM2-135M-Instruct".to_string()]);
    assert_eq!(d.model, "SmolLM2-135M-Instruct");
    assert_eq!(d.engine, Engine::Sglang);
    assert_eq!(d.engine_version, "0.5.23");
    // /server_info has `context_length: null` (the unset server argument):
    // the model's context comes from /v1/models `max_model_len`.
    assert_eq!(d.model_context, 8192);
    assert_eq!(d.kv_local_tokens, 16384, "max_total_num_tokens");
    assert!(
        d.kv_local_source.contains("max_total_num_tokens"),
        "{}",
        d.kv_local_source
    );
    assert_eq!(d.max_running, 2, "max_running_requests");
    assert_eq!(d.tokenize, TokenizeKind::Chat);
    assert!(d.metrics_available, "{}", d.metrics_warning);
    // SGLang 0.5.23 answers both names and logs the old one as deprecated:
    // the new name is asked for, and with it answering the old one is not.
    let seen = seen.lock().expect("lock").clone();
    assert!(seen.iter().any(|p| p == "/server_info"), "{seen:?}");
    assert!(!seen.iter().any(|p| p == "/get_server_info"), "{seen:?}");
}

#[test]
fn server_info_names_agree() {
    let old: Value = serde_json::from_str(&read("get-server-info.json")).expect("json");
    let new: Value = serde_json::from_str(&read("server-info.json")).expect("json");
    for key in [
        "version",
        "max_total_num_tokens",
        "max_running_requests",
        "context_length",
        "dp_size",
        "tp_size",
        "enable_dp_attention",
    ] {
        assert_eq!(old[key], new[key], "{key}");
    }
    assert_eq!(new["version"], "0.5.23");
    assert_eq!(new["max_total_num_tokens"], 16384);
    assert!(new["internal_states"].is_array());
}

#[test]
fn scheduler_gauges_parse() {
    let idle = server_snapshot(Engine::Sglang, &metrics("metrics-idle.txt"));
    assert_eq!(idle.running, Some(0.0));
    assert_eq!(idle.waiting, Some(0.0));
    assert_eq!(idle.kv_usage, Some(0.0));
    let busy = server_snapshot(Engine::Sglang, &metrics("metrics-over-capacity.txt"));
    assert_eq!(
        busy.running,
        Some(2.0),
        "two running on --max-running-requests 2"
    );
    assert_eq!(busy.waiting, Some(2.0), "two of the four queued");
    assert!(busy.gen_throughput_gauge.is_some_and(|g| g > 0.0));
    // No speculation: the spec gauges are exported as 0.
    assert_eq!(busy.spec_accept_length_gauge, Some(0.0));
    assert_eq!(busy.spec_accept_rate_gauge, Some(0.0));
    let long = server_snapshot(Engine::Sglang, &metrics("metrics-long-10.txt"));
    assert_eq!(long.running, Some(1.0));
}

#[test]
fn prefill_counters_parse() {
    let before = server_snapshot(Engine::Sglang, &metrics("metrics-after-abort.txt"));
    let after = server_snapshot(Engine::Sglang, &metrics("metrics-final.txt"));
    // Four requests finished in between; each has one prefill_forward stage.
    let d = |a: Option<f64>, b: Option<f64>| b.expect("after") - a.expect("before");
    assert_eq!(d(before.request_success, after.request_success), 4.0);
    assert_eq!(d(before.prefill_time_count, after.prefill_time_count), 4.0);
    assert!(d(before.prefill_time_sum, after.prefill_time_sum) > 0.0);
    assert!(d(before.prompt_tokens, after.prompt_tokens) > 0.0);
}

/// The facts behind issue 16 item 0b, as recorded: the decode counter moves
/// with every scrape of a running request, the finished-request counter not
/// at all until the request ends.
#[test]
fn decode_counter_moves_per_step_generation_counter_at_request_end() {
    let times: Value = serde_json::from_str(&read("metrics-long-times.json")).expect("json");
    let n = times["scrape_seconds_after_request_start"]
        .as_array()
        .expect("times")
        .len();
    assert_eq!(n, 30);
    let gen_sum = |m: &MetricSet| m.sum("sglang:generation_tokens_total", &[]).expect("gen");
    let scrapes: Vec<MetricSet> = (1..=n)
        .map(|i| metrics(&format!("metrics-long-{i:02}.txt")))
        .collect();
    let decode: Vec<f64> = scrapes.iter().map(decode_sum).collect();
    assert!(
        decode.windows(2).all(|w| w[1] > w[0]),
        "decode counter grows at every scrape: {decode:?}"
    );
    assert!(
        scrapes.iter().all(|m| gen_sum(m) == gen_sum(&scrapes[0])),
        "generation_tokens_total does not move while the request runs"
    );
    let after = metrics("metrics-long-after.txt");
    let before = metrics("metrics-after-chats.txt");
    // The 300-token request: all 300 land in generation_tokens_total at its
    // end; the decode counter has 299 (the first token is made by prefill).
    assert_eq!(gen_sum(&after) - gen_sum(&before), 300.0);
    assert_eq!(decode_sum(&after) - decode_sum(&before), 299.0);
    let stream = read("chat-stream-long.sse");
    assert_eq!(final_usage(&stream), 300);
}

/// Issue 16 item 0b: the generated-token counter the client diffs over a
/// window grows while requests run. Over the 30 scrapes of one running
/// request (about 31 s, 283 tokens), the snapshot's delta is the per-step
/// decode counter's, not 0.
#[test]
fn snapshot_gen_tokens_move_during_a_request() {
    let first = metrics("metrics-long-01.txt");
    let last = metrics("metrics-long-30.txt");
    let a = server_snapshot(Engine::Sglang, &first);
    let b = server_snapshot(Engine::Sglang, &last);
    let delta = b.gen_tokens.expect("gen_tokens") - a.gen_tokens.expect("gen_tokens");
    assert_eq!(delta, decode_sum(&last) - decode_sum(&first));
    assert_eq!(delta, 283.0);
}

fn running(name: &str) -> Option<f64> {
    server_snapshot(Engine::Sglang, &metrics(&format!("source-derived/{name}"))).running
}

#[test]
fn dp_replicas_and_tp_sum_as_expected() {
    // --dp-size 2 without DP attention: tp_rank="0" in both replicas.
    assert_eq!(running("metrics-dp2-replicas.txt"), Some(8.0));
    // --tp-size 2: only rank 0 reports.
    assert_eq!(running("metrics-tp2.txt"), Some(3.0));
}

/// Issue 16 item 4: under DP attention every attention-TP rank 0 reports,
/// with its global tp_rank (0 and 2 for --tp 4 --dp 2); both DP groups count.
/// With --enable-metrics-for-all-schedulers the series of one DP group repeat
/// each other and count once.
#[test]
fn dp_attention_groups_are_all_counted_once() {
    assert_eq!(running("metrics-dp-attention-tp4-dp2.txt"), Some(8.0));
    assert_eq!(
        running("metrics-dp-attention-tp4-dp2-all-schedulers.txt"),
        Some(8.0)
    );
    let m = metrics("source-derived/metrics-dp-attention-tp4-dp2.txt");
    assert_eq!(
        m.sum("sglang:realtime_tokens_total", &[("mode", "decode")]),
        Some(5120.0 + 7936.0)
    );
}

/// Issue 24 item 11: the same DP-attention server with scheduler series that
/// carry no `dp_rank` (see source-derived/README.md, "Label sets by
/// version"). Parsed as before, the second group's series (tp_rank 2) look
/// like a repeat of the first and the running count is divided by the DP
/// size; with the server's attention-TP group size from `/server_info`, each
/// group counts once, with or without `--enable-metrics-for-all-schedulers`.
#[test]
fn dp_attention_series_without_dp_rank_count_once_per_group() {
    let text = read("source-derived/metrics-dp-attention-tp4-dp2-no-dp-rank.txt");
    let ungrouped = server_snapshot(Engine::Sglang, &MetricSet::parse(&text)).running;
    assert_eq!(ungrouped, Some(3.0), "the defect this guards against");
    let info = serde_json::json!({"tp_size": 4, "dp_size": 2, "enable_dp_attention": true});
    let groups = ldb_client::engine_info::sglang_attn_tp_size(&info);
    assert_eq!(groups, 2);
    let m = MetricSet::parse_grouped(&text, groups);
    assert_eq!(server_snapshot(Engine::Sglang, &m).running, Some(8.0));
    assert_eq!(
        m.sum("sglang:realtime_tokens_total", &[("mode", "decode")]),
        Some(5120.0 + 7936.0)
    );
    let all = read("source-derived/metrics-dp-attention-tp4-dp2-all-schedulers-no-dp-rank.txt");
    let m = MetricSet::parse_grouped(&all, groups);
    assert_eq!(server_snapshot(Engine::Sglang, &m).running, Some(8.0));
    // Labelled series (0.5.23) read the same with or without the group size.
    let labelled = read("source-derived/metrics-dp-attention-tp4-dp2-all-schedulers.txt");
    let m = MetricSet::parse_grouped(&labelled, groups);
    assert_eq!(server_snapshot(Engine::Sglang, &m).running, Some(8.0));
    // Without DP attention (the recorded 0.5.23 server, --dp-size replicas,
    // plain TP) there is no group size and nothing changes.
    let recorded: Value = serde_json::from_str(&read("server-info.json")).expect("json");
    assert_eq!(ldb_client::engine_info::sglang_attn_tp_size(&recorded), 0);
    let replicas = serde_json::json!({"tp_size": 1, "dp_size": 2, "enable_dp_attention": false});
    assert_eq!(ldb_client::engine_info::sglang_attn_tp_size(&replicas), 0);
}

#[test]
fn spec_decoding_gauges_parse() {
    let s = server_snapshot(
        Engine::Sglang,
        &metrics("source-derived/metrics-spec-decoding.txt"),
    );
    assert_eq!(s.spec_accept_length_gauge, Some(2.75));
    assert_eq!(s.spec_accept_rate_gauge, Some(0.5833333333333334));
    // SGLang exports no draft/accepted token counters.
    assert_eq!(s.spec_drafts, None);
    assert_eq!(s.spec_accepted, None);
}

/// Payloads of a recorded SSE body, `[DONE]` included.
fn payloads(body: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut dec = SseDecoder::new();
    dec.feed(body.as_bytes(), |p| out.push(p.to_vec()));
    dec.finish(|p| out.push(p.to_vec()));
    out
}

fn final_usage(body: &str) -> u64 {
    payloads(body)
        .iter()
        .filter(|p| !is_done(p))
        .filter_map(|p| parse_chunk(p).expect("chunk").completion_tokens)
        .next_back()
        .expect("usage")
}

#[test]
fn continuous_usage_stream_shape() {
    for (name, max_tokens) in [
        ("chat-stream-continuous-usage.sse", 32),
        ("chat-stream-continuous-usage-zh.sse", 48),
        ("chat-stream-long.sse", 300),
    ] {
        let p = payloads(&read(name));
        assert!(
            is_done(p.last().expect("payloads")),
            "{name}: ends with [DONE]"
        );
        let chunks: Vec<_> = p[..p.len() - 1]
            .iter()
            .map(|b| parse_chunk(b).expect("chunk"))
            .collect();
        let id = chunks[0].id.clone().expect("id");
        assert!(
            chunks.iter().all(|c| c.id.as_ref() == Some(&id)),
            "{name}: one id"
        );
        // first: role only, no usage; every text chunk: cumulative usage
        assert!(!chunks[0].has_tokens && chunks[0].completion_tokens.is_none());
        let mut last = 0;
        for c in chunks.iter().filter(|c| c.has_tokens) {
            let u = c.completion_tokens.expect("usage on every text chunk");
            assert!(u > last, "{name}: usage grows on every text chunk");
            last = u;
        }
        // finish chunk without usage, then the usage-only chunk
        let fin = &chunks[chunks.len() - 2];
        assert_eq!(fin.finish_reason.as_deref(), Some("length"), "{name}");
        assert!(fin.completion_tokens.is_none() && fin.has_choices);
        let tail = chunks.last().expect("usage chunk");
        assert!(!tail.has_choices, "{name}: usage-only chunk has no choices");
        assert_eq!(tail.completion_tokens, Some(max_tokens), "{name}");
        assert_eq!(
            last, max_tokens,
            "{name}: the last text chunk has every token"
        );
    }
}

#[test]
fn include_usage_only_puts_usage_at_the_end() {
    let p = payloads(&read("chat-stream-include-usage.sse"));
    let chunks: Vec<_> = p
        .iter()
        .filter(|b| !is_done(b))
        .map(|b| parse_chunk(b).expect("chunk"))
        .collect();
    let with_usage: Vec<_> = chunks
        .iter()
        .filter(|c| c.completion_tokens.is_some())
        .collect();
    assert_eq!(with_usage.len(), 1);
    assert!(!with_usage[0].has_choices);
    assert_eq!(with_usage[0].completion_tokens, Some(16));
    assert_eq!(chunks.iter().filter(|c| c.has_tokens).count(), 16);
}

#[test]
fn tokenize_count_matches_usage_prompt_tokens() {
    let t: Value = serde_json::from_str(&read("tokenize-chat.json")).expect("json");
    let count = t["count"].as_u64().expect("count");
    assert_eq!(t["tokens"].as_array().expect("tokens").len() as u64, count);
    let req: Value =
        serde_json::from_str(&read("chat-stream-continuous-usage.sse.request.json")).expect("json");
    let treq: Value = serde_json::from_str(&read("tokenize-chat.json.request.json")).expect("json");
    assert_eq!(req["messages"], treq["messages"], "same messages");
    let prompt = payloads(&read("chat-stream-continuous-usage.sse"))
        .iter()
        .filter(|b| !is_done(b))
        .filter_map(|b| parse_chunk(b).expect("chunk").prompt_tokens)
        .next_back()
        .expect("prompt_tokens");
    assert_eq!(prompt, count);
}

#[test]
fn aborted_stream_ends_cleanly() {
    let req: Value = serde_json::from_str(&read("abort-request.json.request.json")).expect("json");
    let p = payloads(&read("chat-stream-aborted.sse"));
    assert!(is_done(p.last().expect("payloads")));
    let chunks: Vec<_> = p
        .iter()
        .filter(|b| !is_done(b))
        .map(|b| parse_chunk(b).expect("chunk"))
        .collect();
    // The rid /abort_request took is the chunk id the client sees.
    assert_eq!(
        chunks[0].id.as_deref(),
        req["rid"].as_str(),
        "abort by chunk id"
    );
    assert!(
        chunks
            .iter()
            .any(|c| c.finish_reason.as_deref() == Some("abort"))
    );
    assert!(!chunks.last().expect("last").has_choices);
    assert!(read("abort-request.json").is_empty());
    assert!(read("abort-request.json.headers").starts_with("HTTP/1.1 200"));
}
