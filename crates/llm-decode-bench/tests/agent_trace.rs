//! Agent traces replayed end to end against the built-in simulator
//! (docs/workloads.md, "Agent traces"), with the README's own commands:
//! the committed example `examples/agent-trace.jsonl`, checked against the
//! simulator's closed form (each turn's prompt tokens; tool turns sent with
//! their results, since after a result the simulator answers in text and
//! after a user message it calls the first tool; the think and tool times
//! waited and outside every latency; the intended prefix-cache rate on the
//! achieved one); the synthetic AgentX trace `examples/agentx-trace.json`
//! converted with `convert-trace` and replayed the same way; and an AIPerf
//! session of message arrays, converted, sending each row as recorded.

mod common;

use std::path::PathBuf;

use common::{f, run, run_to_result, text, tmp};
use serde_json::Value;

fn example(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    p.join(name).display().to_string()
}

/// `--sim` (the quickstart scenario) replaying `trace` as sessions.
fn replay(trace: &str, out: &std::path::Path, extra: &[&str]) -> Value {
    let o = out.to_str().expect("path");
    let mut args = vec![
        "--sim",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--trace",
        trace,
        "--trace-sessions",
        "--output",
        o,
    ];
    args.extend_from_slice(extra);
    run_to_result(&args, out)
}

fn per_turn(r: &Value, key: &str) -> Vec<f64> {
    let turns = r["by_turn"].as_array().expect("by_turn");
    turns
        .iter()
        .map(|t| t[key].as_f64().unwrap_or(0.0))
        .collect()
}

/// Two sessions of four turns each. The simulator counts 8 tokens a
/// request, 4 a message, and a message's text at 4 characters a token (a
/// built word is 4 characters); a streamed call is 16 tokens whose text
/// repeats as the words it generated, and a reply of n tokens repeats as the
/// text of its n pieces (24 of them: 127 characters, 32 tokens).
///
/// 1. system 200 + user 300: 8 + 204 + 304 = 516; the reply calls a tool;
/// 2. the recorded call (20 words + `read_file{"path":"src/lib.rs"}`, 110
///    characters: 4 + 28) stands in for that reply, then the result (4 +
///    500): 516 + 32 + 504 = 1052; after a result the reply is 24 tokens of
///    text;
/// 3. that reply resent (4 + 32) and 100 user tokens (4 + 100): 1192; the
///    reply calls a tool again;
/// 4. that call resent (its 16 tokens' words, 86 characters: 4 + 22) and
///    its result (4 + 400): 1622.
#[test]
fn the_example_agent_trace_replays_with_exact_lengths_tools_and_waits() {
    let (_dir, out) = tmp("agent.json");
    let doc = replay(&example("agent-trace.jsonl"), &out, &[]);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(
        (r["sessions"].as_u64(), r["turns"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(r["sessions_completed"], 2, "{r}");
    let s = &r["summary"];
    assert_eq!(
        (s["completed"].as_u64(), s["errors"].as_u64()),
        (Some(8), Some(0)),
        "{s}"
    );
    assert_eq!(
        per_turn(r, "prompt_tokens_mean"),
        [516.0, 1052.0, 1192.0, 1622.0],
        "{r}"
    );
    // a call after the user's message, text after each tool's result
    assert_eq!(per_turn(r, "tool_calls"), [2.0, 0.0, 2.0, 0.0], "{r}");
    // two 16-token calls a turn: sessions ask for usage only at the end and
    // the scenario's MTP puts several tokens in a chunk, so the calls take
    // their share of the chunks on the usage's scale (docs/methodology.md §7.4)
    let call_tokens = per_turn(r, "tool_call_tokens");
    assert_eq!(call_tokens, [32.0, 0.0, 32.0, 0.0], "{r}");
    // 0.3 + 0.5 + 0.2 s waited by each session after its replies: wall
    // time, in no latency; the rest of the wall is the turns' own time
    let (wall, e2e_max) = (f(&s["wall_time"]), f(&s["e2e"]["max"]));
    assert!(wall >= 1.0, "the waits were cut short: {s}");
    assert!(
        wall < 0.05 + 1.0 + 4.0 * e2e_max + 0.3,
        "waited more than the trace says: {s}"
    );
    let pc = &r["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!(achieved > 0.55, "the conversations are cached: {pc}");
    assert!((intended - achieved).abs() < 0.01, "{pc}");
}

/// The synthetic AgentX trace: three conversations (the main one, a side
/// request sharing nothing with it, a subagent); each first turn's prompt
/// is the trace's `in` exactly (640, 100, 300); the tool's result and the
/// user's message follow the server's own replies, which the intended rate
/// counts as the simulator caches them. Later turns, by the simulator's
/// rule: the main conversation's 40-token reply (213 characters) resent
/// with an empty call to `tool` (4 + 55) and the 200-token result (4 + 200)
/// make 903; its 30-token reply (161 characters: 4 + 41) and the user's 90
/// (4 + 90) make 1,042; the subagent's 20-token reply (109 characters:
/// 4 + 28) and 50 new tokens (4 + 50) make 386 (the trace says 880, 1,000
/// and 370: the simulator's reply text is longer than its tokens).
#[test]
fn a_converted_agentx_trace_replays_as_its_conversations() {
    let (dir, conv) = tmp("agentx.jsonl");
    let c = conv.to_str().expect("path");
    let o = run(&[
        "convert-trace",
        "--from",
        "agentx",
        &example("agentx-trace.json"),
        "--output",
        c,
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("6 rows in 3 conversations"), "{err}");
    let out = dir.path().join("r.json");
    let doc = replay(c, &out, &["--trace-speed", "4"]);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["sessions"], 3, "{r}");
    assert_eq!(r["sessions_completed"], 3, "{r}");
    assert_eq!(r["summary"]["completed"], 6, "{r}");
    let prompts = per_turn(r, "prompt_tokens_mean");
    let want = [(640.0 + 100.0 + 300.0) / 3.0, (903.0 + 386.0) / 2.0, 1042.0];
    assert_eq!(prompts.len(), 3, "{r}");
    for (got, want) in prompts.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{got} against {want}: {r}");
    }
    let pc = &r["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    assert!((intended - achieved).abs() < 0.01, "{pc}");
    // a bad source is one line naming the file and line, exit 2
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        "{\"id\": \"x\", \"block_size\": 0, \"requests\": []}\n",
    )
    .expect("write");
    let o = run(&[
        "convert-trace",
        "--from",
        "agentx",
        bad.to_str().expect("path"),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.json:1: trace \"x\": block_size"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Bad agent input is one line and exit 2 before any request: a row that
/// breaks a rule names its file and line; tool rows with another API than
/// chat are refused.
#[test]
fn bad_agent_rows_and_tools_over_another_api_are_refused_in_one_line() {
    let (_dir, trace) = tmp("bad.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"session_id\": \"a\", \"input_tokens\": 50, \"output_tokens\": 4}\n\
         {\"timestamp\": 1, \"session_id\": \"a\", \"output_tokens\": 4, \
          \"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"tool\", \"tokens\": 9}]}\n",
    )
    .expect("trace");
    let t = trace.to_str().expect("path");
    let example = example("agent-trace.jsonl");
    for (args, want) in [
        (
            vec!["--trace", t, "--trace-sessions"],
            "bad.jsonl:2: message 2: a tool message needs tool_call_id",
        ),
        (
            vec!["--trace", &example, "--trace-sessions", "--api", "messages"],
            "8 rows offer tools or carry tool calls or reasoning",
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

/// Tokens of a message's text under the simulator's rule (4 characters a
/// token).
fn tokens(text: &str) -> f64 {
    text.chars().count().div_ceil(4) as f64
}

/// An AIPerf session of message arrays (synthetic, in the schema of the
/// `aiperf` 0.13.0 package's `MooncakeTrace`): each row holds the whole
/// conversation, recorded reply included. Converted, each turn adds what
/// its row adds; the recorded reply stands in for the server's, so each
/// turn's prompt is the row's whole array, to the token: 8 a request, then
/// 4 a message plus its text (an assistant message's call as its name and
/// arguments).
#[test]
fn a_converted_aiperf_session_sends_each_row_as_recorded() {
    let (dir, src) = tmp("aiperf.jsonl");
    let (system, user) = (
        "You are a careful coding agent.",
        "Fix the failing test in the parser module.",
    );
    let (said, args, result) = (
        "I will read the parser first.",
        "{\"path\":\"parser.rs\"}",
        "fn parse(input: &str) -> Ast { todo!() }",
    );
    let first = serde_json::json!([{"role": "system", "content": system},
                                   {"role": "user", "content": user}]);
    let mut second = first.clone();
    let second_list = second.as_array_mut().expect("array");
    second_list.push(
        serde_json::json!({"role": "assistant", "content": said, "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": args}}]}),
    );
    second_list.push(serde_json::json!({"role": "tool", "tool_call_id": "t1", "content": result}));
    let rows = [
        serde_json::json!({"session_id": "s", "timestamp": 0, "output_length": 8, "messages": first}),
        serde_json::json!({"session_id": "s", "delay": 200, "output_length": 8, "messages": second}),
    ];
    let body: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&src, body).expect("source");
    let conv = dir.path().join("s.jsonl");
    let c = conv.to_str().expect("path");
    let o = run(&[
        "convert-trace",
        "--from",
        "aiperf",
        src.to_str().expect("path"),
        "-o",
        c,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = replay(c, &dir.path().join("r.json"), &[]);
    let r = &doc["session_results"][0];
    assert_eq!(r["sessions_completed"], 1, "{r}");
    let p1 = 8.0 + 4.0 + tokens(system) + 4.0 + tokens(user);
    let call = format!("{said}read_file{args}");
    let p2 = p1 + 4.0 + tokens(&call) + 4.0 + tokens(result);
    assert_eq!(per_turn(r, "prompt_tokens_mean"), [p1, p2], "{r}");
    // literal text: the tool did not build it, so no intended rate
    assert!(r["prefix_cache"]["prefix_cache_intended"].is_null(), "{r}");
}

/// AIPerf's agentic sessions open with prefix blocks they share (synthetic
/// rows in its schema): converted, each session's first prompt is built
/// from its blocks, so three sessions whose first 1,100-token prompts share
/// two 512-token blocks share them on the server (a second apart, so each
/// finds the one before it cached on a loaded machine too). Intended: 1,024 of the
/// second and third first prompts, then each second turn its first prompt
/// and the reply but its last token (1,107, 1,104 in 16-token blocks):
/// (2 × 1,024 + 3 × 1,104) ÷ (3 × 1,100 + 3 × 1,179) = 78.4 %; the
/// simulator's counters say the same.
#[test]
fn converted_aiperf_sessions_share_their_first_blocks() {
    let (dir, src) = tmp("agentic.jsonl");
    let mut body = String::new();
    for k in 0..3u64 {
        body.push_str(&format!(
            "{{\"session_id\": \"s{k}\", \"timestamp\": {}, \"input_length\": 1100, \"output_length\": 8, \"hash_ids\": [1, 2, {}], \"group_id\": 0}}\n",
            k * 1000,
            100 + k
        ));
    }
    for k in 0..3u64 {
        body.push_str(&format!(
            "{{\"session_id\": \"s{k}\", \"delay\": 50, \"input_length\": 60, \"output_length\": 8, \"hash_ids\": [{}]}}\n",
            200 + k
        ));
    }
    std::fs::write(&src, body).expect("source");
    let conv = dir.path().join("s.jsonl");
    let c = conv.to_str().expect("path");
    let o = run(&[
        "convert-trace",
        "--from",
        "aiperf",
        src.to_str().expect("path"),
        "-o",
        c,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = replay(c, &dir.path().join("r.json"), &[]);
    let r = &doc["session_results"][0];
    assert_eq!(r["sessions_completed"], 3, "{r}");
    assert_eq!(per_turn(r, "prompt_tokens_mean"), [1100.0, 1179.0], "{r}");
    let pc = &r["prefix_cache"];
    let (intended, achieved) = (
        f(&pc["prefix_cache_intended"]),
        f(&pc["server_prefix_cache_hit_rate"]),
    );
    let truth = (2.0 * 1024.0 + 3.0 * 1104.0) / (3.0 * 1100.0 + 3.0 * 1179.0);
    assert!((intended - truth).abs() < 1e-9, "{pc}");
    assert!((achieved - truth).abs() < 0.01, "{pc}");
}
