//! Tool calls against the built-in simulator, checked against its closed
//! form (docs/workloads.md, "Tool calls"; the simulator's rule in
//! `crates/ldb-sim/src/server/tool_call.rs`): a call is 16 tokens, a
//! forced choice calls on every turn, `auto` after a user message only;
//! the tool's run time is wall time and in no request's latency; the
//! intended prefix-cache rate counts the repeated call and the result as it
//! counts text replies, and lands on the simulator's achieved rate.

mod common;

use std::path::Path;

use common::{f, run, run_to_result, text, tmp};
use serde_json::Value;

/// A fast engine with a prefix cache: every request takes milliseconds,
/// far below the tool's run time of the tests.
const FAST: &str = r#"
name = "tools-fast"
description = "test engine for the tool loop"
personality = "vllm"
model = "sim-tools"
max_model_len = 16384
seed = 5

[scheduler]
max_running = 64
prefill_tok_s = 5000000.0
prefill_chunk_tokens = 262144
stream_interval = 1

[step_time]
base_s = 0.002

[kv]
block_size = 16
num_blocks = 100000
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
"#;

const TOOLS: &str = r#"[{"name": "lookup", "description": "Look a word up",
  "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]"#;

/// Runs `--sessions 2 --turns 4` with `--tools` and `extra`; the result.
fn sessions(dir: &Path, extra: &[&str]) -> Value {
    let sim = dir.join("sim.toml");
    std::fs::write(&sim, FAST).expect("scenario");
    let tools = dir.join("tools.json");
    std::fs::write(&tools, TOOLS).expect("tools");
    let out = dir.join("r.json");
    let mut args = vec![
        "--sim",
        sim.to_str().expect("path"),
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--output",
        out.to_str().expect("path"),
        "--sessions",
        "2",
        "--turns",
        "4",
        "--user-tokens",
        "50",
        "--max-tokens",
        "32",
        "--tools",
        tools.to_str().expect("path"),
        "--tool-result-tokens",
        "20",
    ];
    args.extend_from_slice(extra);
    run_to_result(&args, &out)
}

#[test]
fn forced_calls_loop_with_the_tool_time_outside_the_latencies() {
    let (dir, _) = tmp("unused");
    let latency = 0.4;
    let doc = sessions(
        dir.path(),
        &["--tool-choice", "lookup", "--tool-latency", "0.4"],
    );
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["sessions_completed"], 2, "{r}");
    // every reply is a 16-token call; turns 2 … 4 carry the results
    let tl = &r["tool_loop"];
    assert_eq!(tl["tool_calls"], 8, "{tl}");
    assert_eq!(tl["tool_call_tokens"], 8 * 16, "{tl}");
    assert_eq!(tl["tool_result_turns"], 6, "{tl}");
    assert!((f(&tl["tool_wait_s"]) - 6.0 * latency).abs() < 1e-9, "{tl}");
    let s = &r["summary"];
    assert_eq!(s["completed"], 8, "{s}");
    // each session waited 3 tool runs: wall time, never a latency
    assert!(f(&s["wall_time"]) >= 3.0 * latency, "{s}");
    assert!(f(&s["e2e"]["p99"]) < latency, "{s}");
    assert!(f(&s["ttft"]["p99"]) < latency, "{s}");
    for t in r["by_turn"].as_array().expect("turns") {
        assert_eq!(
            (&t["tool_calls"], &t["tool_call_tokens"]),
            (&2.into(), &32.into()),
            "{t}"
        );
    }
    let pc = &r["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!(achieved > 0.5, "the calls and results are cached: {pc}");
    assert!((intended - achieved).abs() < 0.01, "{pc}");
}

#[test]
fn auto_calls_after_user_turns_and_answers_after_results() {
    let (dir, _) = tmp("unused");
    let doc = sessions(dir.path(), &[]);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    // turns: user → call, result → text (32), user → call, result → text
    let tl = &r["tool_loop"];
    assert_eq!(
        (&tl["tool_calls"], &tl["tool_result_turns"]),
        (&4.into(), &4.into()),
        "{tl}"
    );
    assert_eq!(tl["tool_call_tokens"], 4 * 16, "{tl}");
    let turns = r["by_turn"].as_array().expect("turns");
    let calls: Vec<u64> = turns
        .iter()
        .map(|t| t["tool_calls"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(calls, [2, 0, 2, 0]);
    let pc = &r["prefix_cache"];
    assert!(
        (f(&pc["prefix_cache_intended"]) - f(&pc["server_prefix_cache_hit_rate"])).abs() < 0.01,
        "{pc}"
    );
}

#[test]
fn bad_tool_files_and_flags_are_one_line_and_exit_2() {
    let (dir, tools) = tmp("tools.json");
    std::fs::write(&tools, r#"[{"type":"function","function":{"name":""}}]"#).expect("tools");
    let p = tools.to_str().expect("path");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--tools", p],
            "tools.json tool 1: the function's \"name\" is empty",
        ),
        (
            &["--tools", "/nonexistent/tools.json"],
            "/nonexistent/tools.json",
        ),
        (
            &["--tool-choice", "required"],
            "--tool-choice: needs --tools FILE",
        ),
        (
            &["--tool-latency", "1"],
            "--tool-latency: needs --tools FILE",
        ),
        (&["--tool-choice", ""], "--tool-choice: needs --tools FILE"),
        (
            &["--tools", p, "--api", "messages"],
            "--tools: is sent with --api chat only (not --api messages)",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["--host", "http://127.0.0.1:9", "--sessions", "1"];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    drop(dir);
}

/// A decode cell whose every request is a forced 16-token call: all of
/// its window tokens are tool-call tokens, none are content, and its first
/// tool-call token is its first token.
#[test]
fn a_decode_cell_of_forced_calls_counts_them_on_their_channel() {
    let (dir, tools) = tmp("tools.json");
    std::fs::write(&tools, TOOLS).expect("tools");
    let out = dir.path().join("m.json");
    let doc = run_to_result(
        &[
            "--sim",
            "--concurrency",
            "2",
            "--contexts",
            "0",
            "--duration",
            "1",
            "--max-tokens",
            "64",
            "--decode-warmup-seconds",
            "0",
            "--skip-prefill",
            "--display-mode",
            "plain",
            "--no-hw-monitor",
            "--tools",
            tools.to_str().expect("path"),
            "--tool-choice",
            "required",
            "--output",
            out.to_str().expect("path"),
        ],
        &out,
    );
    let c = &doc["results"][0];
    let total = c["total_tokens"].as_u64().expect("total");
    assert!(total > 0, "{c}");
    assert_eq!(c["tool_call_tokens"].as_u64(), Some(total), "{c}");
    assert_eq!(
        (&c["content_tokens"], &c["reasoning_tokens"]),
        (&0.into(), &0.into()),
        "{c}"
    );
    assert!((f(&c["ttftc_p50"]) - f(&c["ttft_p50"])).abs() < 1e-9, "{c}");
    let samples = c["request_samples"].as_array().expect("samples");
    let done: Vec<&Value> = samples.iter().filter(|s| s["completed"] == true).collect();
    assert!(!done.is_empty(), "{c}");
    for s in done {
        assert_eq!(s["finish_reason"], "tool_calls", "{s}");
        assert_eq!(
            (&s["output_tokens"], &s["tool_call_tokens"]),
            (&16.into(), &16.into()),
            "{s}"
        );
    }
}
