//! Trace replay and multi-turn sessions against the built-in simulator,
//! checked against its own bookkeeping (docs/workloads.md): scheduled
//! arrivals, exact prompt lengths, shared blocks that the simulator's prefix
//! cache recognises (intended hit rate = the simulator's within 1 point),
//! literal prompts, BurstGPT filters, TTFT by turn, and bad input.

mod common;

use std::fmt::Write as _;
use std::path::Path;

use common::{assert_valid, f, run, run_to_result, text, tmp};
use serde_json::Value;

/// A fast engine with room for every block of the tests: prefill and steps
/// so quick that each request's prefix is cached before its sharers arrive.
const FAST: &str = r#"
name = "workload-fast"
description = "test engine for trace replay"
personality = "vllm"
model = "sim-trace"
max_model_len = 16384
seed = 5

[scheduler]
max_running = 512
prefill_tok_s = 5000000.0
prefill_chunk_tokens = 262144
stream_interval = 1

[step_time]
base_s = 0.002

[kv]
block_size = 16
num_blocks = 400000
cp = 1
prefix_caching = true

[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4

[output]
natural_length = 0

[server]
version = "0.11.0-sim"
cache_reset_enabled = true
"#;

fn scenario(dir: &Path, prefill_tok_s: f64) -> String {
    let p = dir.join(format!("s{prefill_tok_s}.toml"));
    let body = FAST.replace("5000000.0", &format!("{prefill_tok_s:.1}"));
    std::fs::write(&p, body).expect("scenario");
    p.display().to_string()
}

/// One replay at a time: the TTFT-by-turn checks have a 10 % margin that
/// another replay's load on a shared 2-core machine can break.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs a replay against the simulator; the result document.
fn replay(dir: &Path, prefill_tok_s: f64, args: &[&str]) -> Value {
    replay_on(dir, &scenario(dir, prefill_tok_s), args)
}

/// [`replay`] against the simulator scenario file `sim`.
fn replay_on(dir: &Path, sim: &str, args: &[&str]) -> Value {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = dir.join("r.json");
    let mut all = vec![
        "--sim",
        sim,
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--output",
        out.to_str().expect("path"),
    ];
    all.extend_from_slice(args);
    run_to_result(&all, &out)
}

/// 2,000 Mooncake requests in 50 prefix groups (two shared 512-token blocks,
/// then a block of their own), 10 ms apart in the trace, replayed 2.5× faster.
#[test]
fn a_mooncake_trace_replays_on_schedule_with_the_intended_sharing() {
    let (dir, trace) = tmp("mooncake.jsonl");
    let mut body = String::new();
    for i in 0..2000u64 {
        let g = i % 50;
        let len = 1100 + (i % 13) * 15;
        let _ = writeln!(
            body,
            r#"{{"timestamp": {}, "input_length": {len}, "output_length": 2, "hash_ids": [{}, {}, {}]}}"#,
            i * 10,
            g * 2,
            g * 2 + 1,
            1000 + i
        );
    }
    std::fs::write(&trace, body).expect("trace");
    let doc = replay(
        dir.path(),
        5e6,
        &[
            "--trace",
            trace.to_str().expect("path"),
            "--trace-speed",
            "2.5",
        ],
    );
    let t = &doc["trace_results"][0];
    let s = &t["summary"];
    assert_eq!(t["status"], "ok", "{t}");
    assert_eq!(
        (s["scheduled"].as_u64(), s["completed"].as_u64()),
        (Some(2000), Some(2000))
    );
    assert_eq!(t["source"]["format"], "mooncake");
    // A replay sizes its own prompts: no calibration probe before it, and
    // the metadata says the prompts are sized by the word model.
    let log = doc["event_log"].to_string();
    assert!(!log.contains("calibrat"), "{log}");
    assert_eq!(doc["metadata"]["token_targeting"], "estimate");
    assert_eq!(doc["metadata"]["chars_per_token"], 4.0);
    assert_eq!(t["source"]["sha256"].as_str().map(str::len), Some(64));
    // Arrivals on the scaled schedule: 20 s of trace in 8 s, 250 due per
    // second, and sent close to their times (loose: a loaded machine;
    // the tight figure is bench/trace-replay.sh's).
    let buckets = s["buckets"].as_array().expect("buckets");
    let due: Vec<u64> = buckets
        .iter()
        .map(|b| b["scheduled"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(due.iter().sum::<u64>(), 2000);
    // (a request due on a second's boundary may land either side of it)
    assert!(due[..8].iter().all(|&n| n.abs_diff(250) <= 1), "{due:?}");
    assert!(f(&s["dispatch_lag"]["p50"]) < 0.5, "{s}");
    // Prompt lengths: every reported length within 1 token of the trace's.
    let l = &t["lengths"];
    assert_eq!(l["reported"], 2000, "{l}");
    assert!(
        l["reported_max_error"].as_u64().is_some_and(|e| e <= 1),
        "{l}"
    );
    assert!(
        l["tokenized_max_error"].as_u64().is_some_and(|e| e <= 1),
        "{l}"
    );
    assert_eq!(l["output_short"], 0, "{l}");
    // Shared blocks hash alike on the simulator: its own hit counters give
    // the intended rate within 1 point.
    let pc = &t["prefix_cache"];
    let (want, got) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!(want > 0.6, "{pc}");
    assert!((want - got).abs() < 0.01, "{pc}");
    assert_eq!(pc["achieved_source"], "vllm_counters");
    assert_eq!(pc["differs"], false);
}

/// Running text of `words` words of varied length (a corpus written by the
/// test: sentences drawn from a small vocabulary, no filler).
fn corpus_text(words: usize) -> String {
    const VOCAB: [&str; 24] = [
        "the",
        "harbour",
        "was",
        "quiet",
        "before",
        "dawn,",
        "and",
        "fishermen",
        "mended",
        "their",
        "nets",
        "while",
        "gulls",
        "circled",
        "overhead.",
        "Nobody",
        "expected",
        "weather",
        "to",
        "turn;",
        "yet",
        "clouds",
        "gathered",
        "slowly.",
    ];
    let mut state = 17u64;
    let mut out = String::new();
    for i in 0..words {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        out.push_str(VOCAB[(state >> 33) as usize % VOCAB.len()]);
        out.push(if i % 13 == 12 { '\n' } else { ' ' });
    }
    out
}

/// `--prompt-corpus`: a Mooncake trace whose prompts are cut from a corpus
/// keeps every length within 1 token and the sharing exact (the simulator's
/// hit counters equal the intended rate within 1 point); the corpus's name
/// and SHA-256 are recorded. A bad corpus is one line and exit 2.
#[test]
fn a_prompt_corpus_keeps_lengths_and_sharing_exact() {
    let (dir, trace) = tmp("corpus-trace.jsonl");
    let corpus = dir.path().join("harbour.txt");
    std::fs::write(&corpus, corpus_text(20_000)).expect("corpus");
    let mut body = String::new();
    for i in 0..300u64 {
        let g = i % 10;
        let len = 1100 + (i % 7) * 31;
        let _ = writeln!(
            body,
            r#"{{"timestamp": {}, "input_length": {len}, "output_length": 2, "hash_ids": [{}, {}, {}]}}"#,
            i * 10,
            g * 2,
            g * 2 + 1,
            1000 + i
        );
    }
    std::fs::write(&trace, body).expect("trace");
    let (t, c) = (
        trace.to_str().expect("path"),
        corpus.to_str().expect("path"),
    );
    let doc = replay(
        dir.path(),
        5e6,
        &["--trace", t, "--trace-speed", "4", "--prompt-corpus", c],
    );
    let r = &doc["trace_results"][0];
    assert_eq!(r["summary"]["completed"], 300, "{r}");
    let pc = &r["prompt_corpus"];
    assert_eq!(pc["name"], "harbour.txt", "{pc}");
    assert_eq!(pc["sha256"].as_str().map(str::len), Some(64), "{pc}");
    assert_eq!(pc["counted_by"], "tokenize", "{pc}");
    assert!(pc["chunks"].as_u64().is_some_and(|n| n >= 300), "{pc}");
    let l = &r["lengths"];
    assert_eq!(l["reported"], 300, "{l}");
    for key in ["reported_max_error", "tokenized_max_error"] {
        assert!(l[key].as_u64().is_some_and(|e| e <= 1), "{key}: {l}");
    }
    let p = &r["prefix_cache"];
    let (want, got) = (
        f(&p["prefix_cache_intended"]),
        f(&p["server_prefix_cache_hit_rate"]),
    );
    assert!(want > 0.5 && (want - got).abs() < 0.01, "{p}");
    // bad corpora, and a corpus without a replay
    let short = dir.path().join("short.txt");
    std::fs::write(&short, "far too short").expect("short");
    for (args, want) in [
        (
            vec!["--trace", t, "--prompt-corpus", "/nonexistent/c.txt"],
            "--prompt-corpus /nonexistent/c.txt: ",
        ),
        (
            vec!["--trace", t, "--prompt-corpus", short.to_str().expect("p")],
            "too short",
        ),
        (
            vec!["--prompt-corpus", c],
            "only applies to --trace or --sessions",
        ),
    ] {
        let mut all = vec!["--host", "http://127.0.0.1:9"];
        all.extend(args);
        let o = run(&all);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// `--reset-prefix-cache` before a replay: the first request finds nothing
/// cached, by the simulator's counters around it while it runs alone; when
/// the second request is due before the first one ends, nothing is claimed.
#[test]
fn the_first_request_after_a_reset_is_cold() {
    let (dir, trace) = tmp("alone.jsonl");
    let p = trace.to_str().expect("path");
    let write = |gap_ms: u64| {
        let body: String = (0..20u64)
            .map(|i| {
                let at = if i == 0 { 0 } else { gap_ms + i * gap_ms / 150 };
                format!(
                    "{{\"timestamp\": {at}, \"input_length\": 600, \"output_length\": 2, \
                     \"hash_ids\": [{}, {}]}}\n",
                    i % 2,
                    100 + i
                )
            })
            .collect();
        std::fs::write(&trace, body).expect("trace");
    };
    let reset = ["--trace", p, "--reset-prefix-cache", "before-run"];
    write(1500);
    let doc = replay(dir.path(), 5e6, &reset);
    let pc = &doc["trace_results"][0]["prefix_cache"];
    assert_eq!(pc["prefix_cache_reset"], "done", "{pc}");
    assert_eq!(pc["first_request_cached_tokens"], 0, "{pc}");
    assert_eq!(pc["first_request_cached_source"], "metrics", "{pc}");
    assert!(f(&pc["server_prefix_cache_hit_rate"]) > 0.7, "{pc}");
    let log = doc["event_log"].to_string();
    assert!(
        log.contains("the first request after it found 0 cached tokens"),
        "{log}"
    );
    // all at once: the counters cannot single the first request out
    write(0);
    let doc = replay(dir.path(), 5e6, &reset);
    let pc = &doc["trace_results"][0]["prefix_cache"];
    assert_eq!(pc["prefix_cache_reset"], "done", "{pc}");
    assert!(pc.get("first_request_cached_tokens").is_none(), "{pc}");
}

/// The binary with `args` against the simulator scenario `sim`, killed if it
/// runs past `wall` (a wait without a deadline shows as that failure, not
/// as a hung test); its exit code, the result and the seconds it took.
fn bounded(dir: &Path, sim: &str, args: &[&str], wall: f64) -> (Option<i32>, Value, f64) {
    let out = dir.join("bounded.json");
    let t0 = std::time::Instant::now();
    let mut child = common::bin()
        .args(["--sim", sim, "--display-mode", "plain", "--no-hw-monitor"])
        .args(["--output", out.to_str().expect("path")])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("binary runs");
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if t0.elapsed().as_secs_f64() > wall {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {wall} s: a wait without a deadline");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let took = t0.elapsed().as_secs_f64();
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    (code, doc, took)
}

/// A server that accepts every request and never answers (keep-alive
/// comments only), with `--stream-idle-timeout 0`: a one-request trace
/// after a reset, whose first-request check waits for that request, and a
/// session run both end at `--replay-limit`, the open request an error.
#[test]
fn every_replay_wait_ends_at_the_run_limit() {
    let (dir, trace) = tmp("one.jsonl");
    let sim = dir.path().join("mute.toml");
    let body = format!("{FAST}\n[faults]\nkeepalive_only_share = 1.0\n");
    std::fs::write(&sim, body).expect("scenario");
    let sim = sim.to_str().expect("path");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 4, \"hash_ids\": [1, 2]}\n",
    )
    .expect("trace");
    let common = ["--stream-idle-timeout", "0", "--replay-limit", "3"];
    let mut args = vec![
        "--trace",
        trace.to_str().expect("path"),
        "--reset-prefix-cache",
        "before-run",
    ];
    args.extend(common);
    let (_, doc, took) = bounded(dir.path(), sim, &args, 60.0);
    let t = &doc["trace_results"][0];
    assert_eq!(t["status"], "error", "{t}");
    assert_eq!(t["summary"]["errors"], 1, "{t}");
    assert!(took < 30.0, "took {took:.1} s");
    let mut args = vec!["--sessions", "2", "--turns", "2", "--user-tokens", "50"];
    args.extend(common);
    let (_, doc, took) = bounded(dir.path(), sim, &args, 60.0);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "error", "{r}");
    let why = r["status_reason"].as_str().unwrap_or_default();
    assert!(why.contains("limit of 3 s"), "{why}");
    assert_eq!(r["summary"]["errors"], 2, "{r}");
    assert!(took < 30.0, "took {took:.1} s");
}

/// Three one-turn conversations a second apart, each over long before the
/// next: a session run measures its token gaps and the turns in flight
/// (1, not the 3 sessions), and its throughput over time holds every token
/// the turns received.
#[test]
fn sessions_measure_token_gaps_and_turns_in_flight() {
    let (dir, trace) = tmp("apart.jsonl");
    let rows: String = (0..3)
        .map(|s| {
            format!(
                "{{\"timestamp\": {s}, \"input_tokens\": 100, \"output_tokens\": 8, \"session_id\": \"s{s}\"}}\n"
            )
        })
        .collect();
    std::fs::write(&trace, rows).expect("trace");
    let p = trace.to_str().expect("path");
    let doc = replay(dir.path(), 5e6, &["--trace", p, "--trace-sessions"]);
    let r = &doc["session_results"][0];
    assert_eq!(r["sessions"], 3, "{r}");
    let s = &r["summary"];
    assert_eq!(s["completed"], 3, "{s}");
    assert_eq!(s["max_in_flight"], 1, "{s}");
    assert!(f(&s["token_gap_p99"]) > 0.0, "{s}");
    let by_arrival: u64 = s["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["output_tokens"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(by_arrival, 24, "{s}");
}

/// BurstGPT with its filters, and our JSONL with literal prompts, sent as
/// they are.
#[test]
fn burstgpt_and_literal_jsonl_traces_round_trip() {
    let (dir, csv) = tmp("burst.csv");
    let mut body =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for i in 0..30u64 {
        let model = if i % 3 == 0 { "GPT-4" } else { "ChatGPT" };
        // every 10th request failed in the log: 0 response tokens
        let out = if i % 10 == 5 { 0 } else { 3 };
        let _ = writeln!(
            body,
            "{},{model},{},{out},0,Conversation log",
            i / 10,
            200 + i
        );
    }
    std::fs::write(&csv, body).expect("csv");
    let doc = replay(
        dir.path(),
        5e6,
        &[
            "--trace",
            csv.to_str().expect("path"),
            "--trace-model",
            "ChatGPT",
        ],
    );
    let t = &doc["trace_results"][0];
    // 20 ChatGPT rows, 2 of them failed in the log: 18 sent
    assert_eq!(t["summary"]["completed"], 18, "{t}");
    assert_eq!(t["source"]["rows"]["filtered"], 12, "{t}");
    assert!(
        t["lengths"]["reported_max_error"]
            .as_u64()
            .is_some_and(|e| e <= 1),
        "{t}"
    );
    let jsonl = dir.path().join("lit.jsonl");
    std::fs::write(
        &jsonl,
        "{\"timestamp\": 0, \"prompt\": \"Say hello.\", \"output_tokens\": 3}\n\
         {\"timestamp\": 0.1, \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, \
         {\"role\": \"user\", \"content\": \"Hi\"}], \"output_tokens\": 4, \"session_id\": 1}\n",
    )
    .expect("jsonl");
    let doc = replay(dir.path(), 5e6, &["--trace", jsonl.to_str().expect("path")]);
    let t = &doc["trace_results"][0];
    assert_eq!(t["source"]["format"], "jsonl");
    assert_eq!(t["summary"]["completed"], 2, "{t}");
    // the tool did not build these prompts: no intended rate
    assert!(t["prefix_cache"]["prefix_cache_intended"].is_null(), "{t}");
}

/// Each turn's TTFT follows the part of its prompt not cached: with a slow
/// prefill, turn 4 (4× turn 1's prompt) costs about what turn 1 did. One
/// session, so no other prefill shares the engine's steps; its user
/// messages are cut from a corpus.
#[test]
fn session_ttft_grows_with_the_uncached_part_only() {
    let (dir, _) = tmp("x");
    let corpus = dir.path().join("harbour.txt");
    std::fs::write(&corpus, corpus_text(20_000)).expect("corpus");
    let doc = replay(
        dir.path(),
        5_000.0,
        &[
            "--sessions",
            "1",
            "--turns",
            "4",
            "--user-tokens",
            "2000",
            "--max-tokens",
            "8",
            "--prompt-corpus",
            corpus.to_str().expect("path"),
        ],
    );
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["prompt_corpus"]["name"], "harbour.txt", "{r}");
    assert_eq!(r["sessions_completed"], 1, "{r}");
    let turns = r["by_turn"].as_array().expect("by_turn");
    assert_eq!(turns.len(), 4);
    let prompt = |t: usize| f(&turns[t]["prompt_tokens_mean"]);
    let ttft = |t: usize| f(&turns[t]["ttft"]["mean"]);
    // The simulator's truth: turn t prefills what turn t−1's prompt did not
    // hold (its blocks are cached), at 5,000 tok/s plus one step.
    for t in 1..4 {
        let uncached = prompt(t) - prompt(t - 1);
        let truth = ttft(0) * uncached / prompt(0);
        assert!(
            (ttft(t) - truth).abs() < 0.1 * truth,
            "turn {}: TTFT {:.3} s, truth {truth:.3} s ({r})",
            t + 1,
            ttft(t)
        );
    }
    assert!(prompt(3) > 3.5 * prompt(0), "{r}");
    let pc = &r["prefix_cache"];
    assert!(
        (f(&pc["prefix_cache_intended"]) - f(&pc["server_prefix_cache_hit_rate"])).abs() < 0.02,
        "{pc}"
    );
    every_output_shows_the_sessions(dir.path());
}

/// The fast scenario with KV blocks of `block` tokens.
fn scenario_blocks(dir: &Path, block: u32) -> String {
    let p = dir.join(format!("b{block}.toml"));
    let body = FAST.replace("block_size = 16", &format!("block_size = {block}"));
    std::fs::write(&p, body).expect("scenario");
    p.display().to_string()
}

/// Issue 35, defect 2, with its numbers: 4 sessions × 3 turns of 200 user
/// tokens, 256-token replies, 128-token blocks. The simulator now keeps
/// each reply's blocks for the next turn, as vLLM and SGLang do (recorded
/// in `crates/ldb-client/tests/fixtures/cache-sharing/`); the intended
/// rate counts them too and lands on the achieved one (counting the
/// previous prompt only gave about 40 % against about 64 %).
#[test]
fn a_session_turn_reuses_the_previous_reply() {
    let (dir, _) = tmp("unused");
    let sim = scenario_blocks(dir.path(), 128);
    let doc = replay_on(
        dir.path(),
        &sim,
        &[
            "--sessions",
            "4",
            "--turns",
            "3",
            "--user-tokens",
            "200",
            "--max-tokens",
            "256",
        ],
    );
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    let pc = &r["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!(achieved > 0.55, "the replies are cached: {pc}");
    assert!((intended - achieved).abs() < 0.01, "{pc}");
}

/// Issue 35, defect 3: 40 unrelated prompts of 100 tokens on a cache of
/// single tokens (SGLang's page size 1) share the chat template's head
/// (the simulator's 12 tokens): intended 12 × 39 ÷ 4000 ≈ 11.7 %, as
/// achieved, and no flag; counted as unique it was 0 %.
#[test]
fn unrelated_prompts_share_the_template_head() {
    let (dir, trace) = tmp("unrelated.jsonl");
    let mut body = String::new();
    for i in 0..40u32 {
        let _ = writeln!(
            body,
            r#"{{"timestamp": {}, "input_tokens": 100, "output_tokens": 1}}"#,
            f64::from(i) * 0.01
        );
    }
    std::fs::write(&trace, body).expect("trace");
    let sim = scenario_blocks(dir.path(), 1);
    let doc = replay_on(
        dir.path(),
        &sim,
        &["--trace", trace.to_str().expect("path")],
    );
    let pc = &doc["trace_results"][0]["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!((intended - 12.0 * 39.0 / 4000.0).abs() < 0.005, "{pc}");
    assert!((intended - achieved).abs() < 0.005, "{pc}");
}

/// The CSV, JSON lines, HTML page and `compare` of a session run carry its
/// sessions and turns (docs/workloads.md, "Where replays show").
fn every_output_shows_the_sessions(dir: &Path) {
    let path = |n: &str| dir.join(n).display().to_string();
    let (result, csv, html, jsonl) = (
        path("r.json"),
        path("r.csv"),
        path("r.html"),
        path("r.jsonl"),
    );
    let o = run(&[
        "report",
        &result,
        "--csv",
        &csv,
        "--html",
        &html,
        "--requests-jsonl",
        &jsonl,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let read = |p: &str| std::fs::read_to_string(p).expect("written");
    let csv = read(&csv);
    assert!(
        csv.contains("\nsessions,") && csv.matches("\nsession_turn,").count() == 4,
        "{csv}"
    );
    let html = read(&html);
    assert!(html.contains("id=\"chart-session-ttft-by-turn\""));
    assert!(html.contains("id=\"chart-replay-throughput\""));
    let jsonl = read(&jsonl);
    assert_eq!(
        jsonl.matches("\"layer\":\"session_turn\"").count(),
        4,
        "{jsonl}"
    );
    let o = run(&["compare", "--format", "json", &result, &result]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let cmp: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let replay = &cmp["comparisons"][0]["replays"][0];
    assert_eq!(replay["kind"], "sessions", "{cmp}");
    assert_eq!(replay["verdict"], "unchanged", "{cmp}");
    assert_eq!(replay["turns"].as_array().map(Vec::len), Some(4), "{cmp}");
}

/// `--trace-sessions`: the rows of one `session_id` are the turns of one
/// conversation, sent in order with everything before them; TTFT by turn
/// follows the uncached part only (the simulator's truth, as for
/// `--sessions`). A Mooncake trace, which has no session ids, is refused.
#[test]
fn trace_sessions_resend_the_conversation_turn_by_turn() {
    let (dir, trace) = tmp("sessions.jsonl");
    let rows: String = (0..4)
        .map(|t| {
            format!(
                "{{\"timestamp\": {}, \"input_tokens\": 2000, \"output_tokens\": 8, \"session_id\": \"a\"}}\n",
                f64::from(t) * 0.01
            )
        })
        .collect();
    std::fs::write(&trace, rows).expect("trace");
    let p = trace.to_str().expect("path");
    let doc = replay(dir.path(), 5_000.0, &["--trace", p, "--trace-sessions"]);
    assert!(
        doc["trace_results"].is_null(),
        "a session run, not a replay"
    );
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(
        (r["sessions"].as_u64(), r["turns"].as_u64()),
        (Some(1), Some(4)),
        "{r}"
    );
    assert_eq!(r["sessions_completed"], 1, "{r}");
    assert_eq!(r["trace"]["format"], "jsonl", "{r}");
    let turns = r["by_turn"].as_array().expect("by_turn");
    let prompt = |t: usize| f(&turns[t]["prompt_tokens_mean"]);
    let ttft = |t: usize| f(&turns[t]["ttft"]["mean"]);
    assert!(
        prompt(3) > 3.5 * prompt(0),
        "the conversation is resent: {r}"
    );
    for t in 1..4 {
        let truth = ttft(0) * (prompt(t) - prompt(t - 1)) / prompt(0);
        assert!((ttft(t) - truth).abs() < 0.1 * truth, "turn {}: {r}", t + 1);
    }
    let mooncake = dir.path().join("m.jsonl");
    std::fs::write(
        &mooncake,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}\n",
    )
    .expect("trace");
    let o = run(&[
        "--host",
        "http://127.0.0.1:9",
        "--trace",
        mooncake.to_str().expect("path"),
        "--trace-sessions",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("mooncake traces carry no session id"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A session turn whose own tokens exceed the model's context (16,384 in
/// the scenario) is cut with the rest of its conversation before any text
/// of it is built, and the event log says where; the other conversation
/// runs whole (issue 34: before, the turn was built and sent, and failed).
#[test]
fn trace_session_turns_past_the_context_are_cut_before_they_are_built() {
    let (dir, trace) = tmp("long.jsonl");
    let rows = [
        ("a", 1000),
        ("b", 1000),
        ("a", 1000),
        ("b", 20_000),
        ("b", 100),
    ];
    let body: String = rows
        .iter()
        .enumerate()
        .map(|(i, (id, n))| {
            format!(
                "{{\"timestamp\": {}, \"input_tokens\": {n}, \"output_tokens\": 4, \"session_id\": \"{id}\"}}\n",
                i as f64 * 0.01
            )
        })
        .collect();
    std::fs::write(&trace, body).expect("trace");
    let p = trace.to_str().expect("path");
    let doc = replay(dir.path(), 5_000_000.0, &["--trace", p, "--trace-sessions"]);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["sessions_completed"], 2, "{r}");
    assert_eq!(r["summary"]["completed"], 3, "{r}");
    assert_eq!(r["summary"]["errors"], 0, "{r}");
    let log = doc["event_log"].to_string();
    assert!(
        log.contains("2 turns of 1 conversations not sent")
            && log.contains("context (16384 tokens), first at line 4"),
        "{log}"
    );
}

/// A row that does not parse, timestamps going backwards and an empty
/// trace: one line naming the file and line, exit 2, nothing sent.
#[test]
fn bad_traces_are_refused_before_any_request() {
    let (dir, trace) = tmp("bad.jsonl");
    let p = trace.to_str().expect("path");
    let good = r#"{"timestamp": 0, "input_length": 10, "output_length": 2}"#;
    let later = r#"{"timestamp": 900, "input_length": 10, "output_length": 2}"#;
    let refuse = |body: String, want: &str| {
        std::fs::write(&trace, body).expect("trace");
        let o = run(&["--host", "http://127.0.0.1:9", "--trace", p]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    };
    refuse(format!("{good}\nnot json\n"), &format!("{p}:2: "));
    refuse(
        format!("{later}\n{good}\n"),
        &format!("{p}:2: timestamp goes backwards"),
    );
    refuse("\n".into(), "no request to replay");
    // a run limit that is no limit, or one without a replay to limit
    for (args, want) in [
        (vec!["--trace", p, "--replay-limit", "0"], "--replay-limit"),
        (
            vec!["--replay-limit", "5"],
            "only applies to --trace or --sessions",
        ),
    ] {
        std::fs::write(&trace, format!("{good}\n")).expect("trace");
        let o = run(&[&["--host", "http://127.0.0.1:9"][..], &args].concat());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // skipped and counted instead
    std::fs::write(&trace, format!("{good}\nnot json\n{later}\n")).expect("trace");
    let doc = replay(dir.path(), 5e6, &["--trace", p, "--trace-skip-bad"]);
    let t = &doc["trace_results"][0];
    assert_eq!(t["source"]["rows"]["bad_skipped"], 1, "{t}");
    assert_eq!(t["summary"]["completed"], 2, "{t}");
    // --dry-run shows the replay, not a matrix plan
    let o = run(&["--sim", "--trace", p, "--trace-skip-bad", "--dry-run"]);
    let shown = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{shown}");
    assert!(shown.contains("Replay plan: trace"), "{shown}");
    assert!(shown.contains("2 requests over 0.9 s"), "{shown}");
}

/// `--api`: a trace replayed over the Responses and Messages APIs sends
/// every row with the trace's prompt length (the server's usage agrees
/// within a token), as over chat.
#[test]
fn a_trace_replays_over_each_api_with_its_lengths() {
    let (dir, _) = tmp("unused");
    let trace = dir.path().join("t.jsonl");
    let rows: String = (0..6)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_tokens\": 120, \"output_tokens\": 8}}\n",
                f64::from(i) * 0.05
            )
        })
        .collect();
    std::fs::write(&trace, rows).expect("trace");
    for api in ["chat", "responses", "messages"] {
        let doc = replay(
            dir.path(),
            5e6,
            &["--trace", trace.to_str().expect("path"), "--api", api],
        );
        assert_eq!(doc["metadata"]["api"], api);
        let t = &doc["trace_results"][0];
        assert_eq!(t["summary"]["completed"], 6, "{api}: {t}");
        assert_eq!(t["summary"]["errors"], 0, "{api}: {t}");
        assert!(
            t["lengths"]["reported_max_error"]
                .as_u64()
                .is_some_and(|e| e <= 1),
            "{api}: {t}"
        );
        assert!(f(&t["summary"]["output_tps"]) > 0.0, "{api}: {t}");
    }
}

/// `--api`: the sessions of `a_session_turn_reuses_the_previous_reply`
/// over the Responses and Messages APIs get the chat run's truth: every
/// turn ok, the same intended and achieved cache rates (the cached tokens
/// come from each API's own usage), the API in the metadata.
#[test]
fn sessions_over_each_api_keep_the_chat_truth() {
    let (dir, _) = tmp("unused");
    let sim = scenario_blocks(dir.path(), 128);
    let rates = |api: &str| {
        let doc = replay_on(
            dir.path(),
            &sim,
            &[
                "--sessions",
                "4",
                "--turns",
                "3",
                "--user-tokens",
                "200",
                "--max-tokens",
                "256",
                "--api",
                api,
            ],
        );
        assert_eq!(doc["metadata"]["api"], api);
        let r = &doc["session_results"][0];
        assert_eq!(r["status"], "ok", "{api}: {r}");
        let pc = &r["prefix_cache"];
        (
            f(&pc["prefix_cache_intended"]),
            f(&pc["server_prefix_cache_hit_rate"]),
        )
    };
    let chat = rates("chat");
    for api in ["responses", "messages"] {
        let (intended, achieved) = rates(api);
        assert!(
            (intended - chat.0).abs() < 0.01,
            "{api}: {intended} vs chat {chat:?}"
        );
        assert!(
            (achieved - chat.1).abs() < 0.01,
            "{api}: {achieved} vs chat {chat:?}"
        );
    }
}
