//! Sessions over coordinated shards (`--sessions`, `--trace-sessions` with
//! `--shards N`; docs/shards.md, "Sessions") as separate processes on
//! loopback against one paced simulator (5 ms a token, 16-token cache
//! blocks): the same run in one process and
//! over two shards (counts and intended hit rates equal, latencies within
//! the simulator's run-to-run spread), every session's turns on one shard
//! (from the follower's record), the tool loop and the session header over
//! shards, and a follower killed mid-run.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Sim, bin, paced_scenario, shard_logs, sim_serving, start_shards, text, tmp, wait};
use serde_json::Value;

/// How far a turn's TTFT p50 may differ between a sharded run and one
/// process, seconds: the run-to-run spread of one process on the paced
/// simulator (a turn's sessions are sent together, so their TTFT moves
/// with the phase of the simulator's 5 ms step; six runs: up to 7 ms
/// apart; docs/shards.md, "Sessions").
const TTFT_TOLERANCE_S: f64 = 0.010;
/// How far the achieved hit rate and the session goodput may differ,
/// relative (six runs of one process: the hit rate equal, the goodput
/// within 0.8 %; a sharded run's turns cross one more process).
const RATE_TOLERANCE: f64 = 0.03;

const TOOLS: &str = r#"[{"name": "lookup", "description": "Look a word up",
  "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]"#;

fn sim() -> Sim {
    sim_of(1_048_576)
}

/// The paced simulator as its own process (5 ms a token, instant prefill,
/// 16-token blocks so a session's turns share cached blocks) serving a
/// model of `context` tokens; killed on drop.
fn sim_of(context: u64) -> Sim {
    let (dir, scenario) = tmp("paced-5ms.toml");
    let body = paced_scenario(0.005, 256, 65536)
        .replace("block_size = 256", "block_size = 16")
        .replace(
            "max_model_len = 1048576",
            &format!("max_model_len = {context}"),
        );
    std::fs::write(&scenario, body).expect("scenario");
    sim_serving(dir, &scenario)
}

/// `--host url`, the run's own flags, a plain display and no hardware
/// monitor.
fn flags(url: &str, run: &[&str]) -> Vec<String> {
    ["--host", url]
        .iter()
        .chain(run)
        .chain(&["--display-mode", "plain", "--no-hw-monitor"])
        .map(|s| s.to_string())
        .collect()
}

/// Six sessions of three turns, the tool loop forced (every reply a
/// 16-token call, every later turn a result), under a session header and
/// a generous `--slo` (every session counts for the goodput).
fn session_flags(url: &str, tools: &Path, think: &str) -> Vec<String> {
    flags(
        url,
        &[
            "--sessions",
            "6",
            "--turns",
            "3",
            "--user-tokens",
            "100",
            "--max-tokens",
            "16",
            "--think-time",
            think,
            "--tools",
            tools.to_str().expect("path"),
            "--tool-choice",
            "lookup",
            "--tool-latency",
            "0.1",
            "--tool-result-tokens",
            "20",
            "--session-header",
            "x-session-id",
            "--slo",
            "ttft_p99=1",
        ],
    )
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file")).expect("JSON")
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Runs `flags` over `n` shards; every shard must exit 0: the leader's
/// result and the logs.
fn run_shards(dir: &Path, flags: &[String], n: u32) -> (Value, String) {
    let mut kids = start_shards(dir, flags, n);
    let codes: Vec<Option<i32>> = kids
        .iter_mut()
        .map(|k| wait(k, Duration::from_secs(120)))
        .collect();
    let all = shard_logs(dir, n);
    assert!(codes.iter().all(|c| *c == Some(0)), "{codes:?}\n{all}");
    (read(&dir.join("r.json")), all)
}

/// One process with the same flags: its result.
fn alone(flags: &[String], out: &Path) -> Value {
    let o = bin()
        .args(flags)
        .arg("--output")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .expect("binary runs");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    read(out)
}

/// The session ids of the turns a follower's record holds, with the
/// number of turns of each.
fn follower_sessions(dir: &Path, i: u32) -> Vec<(u64, usize)> {
    let rec = read(&dir.join(format!("r.shard-{i}.json")));
    let turns = rec["cells"][0]["sessions"]["turns"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut by: std::collections::BTreeMap<u64, usize> = Default::default();
    for t in &turns {
        *by.entry(t["session"].as_u64().expect("session"))
            .or_default() += 1;
    }
    by.into_iter().collect()
}

/// Asserts the figures that must be equal between two runs of the same
/// sessions, and those within the measured spread.
fn assert_like(sharded: &Value, one: &Value) {
    for k in ["sessions", "turns", "sessions_completed"] {
        assert_eq!(sharded[k], one[k], "{k}: {sharded}\n{one}");
    }
    let (a, b) = (&sharded["by_turn"], &one["by_turn"]);
    let turns = a.as_array().expect("by_turn");
    assert_eq!(turns.len(), b.as_array().map_or(0, Vec::len));
    for (x, y) in turns.iter().zip(b.as_array().expect("by_turn")) {
        assert_eq!(x["requests"], y["requests"], "{x}\n{y}");
        let d = num(&x["ttft"], "p50") - num(&y["ttft"], "p50");
        eprintln!("turn {} TTFT p50 sharded − one: {:.4} s", x["turn"], d);
        assert!(d.abs() <= TTFT_TOLERANCE_S, "turn {}: {d}", x["turn"]);
    }
    let (pa, pb) = (&sharded["prefix_cache"], &one["prefix_cache"]);
    assert_eq!(
        pa["prefix_cache_intended"], pb["prefix_cache_intended"],
        "the same prompts' sharing"
    );
    for (k, x, y) in [
        (
            "achieved hit rate",
            num(pa, "server_prefix_cache_hit_rate"),
            num(pb, "server_prefix_cache_hit_rate"),
        ),
        (
            "session goodput",
            num(sharded, "session_goodput"),
            num(one, "session_goodput"),
        ),
    ] {
        let r = x / y;
        eprintln!("sharded/one {k}: {r:.4}");
        assert!((r - 1.0).abs() <= RATE_TOLERANCE, "{k} {x} vs {y}");
    }
}

#[test]
fn two_shards_run_sessions_like_one_process() {
    let s = sim();
    let (dir, tools) = tmp("tools.json");
    std::fs::write(&tools, TOOLS).expect("tools");
    let f = session_flags(&s.url, &tools, "0.2");
    let (doc, all) = run_shards(dir.path(), &f, 2);
    common::assert_valid(&doc);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}\n{all}");
    assert_eq!(
        (num(r, "sessions"), num(r, "sessions_completed")),
        (6.0, 6.0)
    );
    // The tool loop over shards: every reply a call, turns 2 and 3 results.
    let tl = &r["tool_loop"];
    assert_eq!(
        (num(tl, "tool_calls"), num(tl, "tool_result_turns")),
        (18.0, 12.0)
    );
    // Dealt by conversation: sessions 0, 2, 4 on the leader, 1, 3, 5 on
    // the follower, each with its three turns in the follower's record.
    let shards = r["shards"].as_array().expect("shards");
    let dealt: Vec<(f64, f64)> = shards
        .iter()
        .map(|s| (num(s, "concurrency"), num(s, "requests")))
        .collect();
    assert_eq!(dealt, [(3.0, 9.0), (3.0, 9.0)], "{r}");
    assert_eq!(follower_sessions(dir.path(), 1), [(1, 3), (3, 3), (5, 3)]);
    assert!(num(&shards[1], "clock_uncertainty_s") <= 0.002, "{r}");
    // The session header went with every turn of every shard.
    assert_eq!(num(&r["router"], "turns"), 18.0, "{r}");
    let (_d, out) = tmp("one.json");
    let one = alone(&f, &out);
    let o = &one["session_results"][0];
    assert_eq!(o["status"], "ok", "{o}");
    assert_eq!(o["tool_loop"], r["tool_loop"], "the same calls and results");
    assert_like(r, o);
}

/// `--trace-sessions` over two shards: conversation `k` of the trace (in
/// the order of its first row) on shard `k mod 2`, each turn at its time.
#[test]
fn two_shards_replay_trace_sessions_like_one_process() {
    let s = sim();
    let (dir, trace) = tmp("conversations.jsonl");
    let rows: String = (0..12u32)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_tokens\": 120, \"output_tokens\": 10, \
                 \"session_id\": \"c{}\"}}\n",
                f64::from(i) * 0.15,
                i % 4
            )
        })
        .collect();
    std::fs::write(&trace, rows).expect("trace");
    let p = trace.to_str().expect("path");
    let f = flags(
        &s.url,
        &["--trace", p, "--trace-sessions", "--slo", "ttft_p99=1"],
    );
    let (doc, all) = run_shards(dir.path(), &f, 2);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "ok", "{r}\n{all}");
    assert_eq!((num(r, "sessions"), num(r, "turns")), (4.0, 3.0), "{r}");
    assert_eq!(follower_sessions(dir.path(), 1), [(1, 3), (3, 3)]);
    let (_d, out) = tmp("one.json");
    let one = alone(&f, &out);
    assert_like(r, &one["session_results"][0]);
}

/// A follower killed mid-run: its sessions are reported lost, never
/// dropped; the leader exits 0 (the result says `error`), or 6 under
/// `--on-shard-loss stop`.
#[test]
fn a_follower_killed_mid_run_has_its_sessions_reported_lost() {
    let s = sim();
    for (on_loss, exit) in [("continue", 0), ("stop", 6)] {
        let (dir, tools) = tmp("tools.json");
        std::fs::write(&tools, TOOLS).expect("tools");
        // The first turns are due 2 s after the start: the follower is
        // killed before its sessions end.
        let mut f = session_flags(&s.url, &tools, "2");
        f.extend(["--on-shard-loss".to_string(), on_loss.to_string()]);
        let mut kids = start_shards(dir.path(), &f, 2);
        let out = dir.path().join("shard-0.out");
        let t0 = Instant::now();
        while !std::fs::read_to_string(&out).is_ok_and(|t| t.contains("sessions over 2 shards")) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{}",
                shard_logs(dir.path(), 2)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1500));
        let _ = kids[1].kill();
        let _ = kids[1].wait();
        let leader = wait(&mut kids[0], Duration::from_secs(120));
        let all = shard_logs(dir.path(), 2);
        assert_eq!(leader, Some(exit), "{on_loss}: {all}");
        let doc = read(&dir.path().join("r.json"));
        common::assert_valid(&doc);
        let r = &doc["session_results"][0];
        assert_eq!(r["status"], "error", "{r}");
        assert_eq!(r["shards_lost"], serde_json::json!([1]), "{r}");
        assert_eq!(num(r, "sessions_lost"), 3.0, "{r}");
        let why = r["status_reason"].as_str().unwrap_or_default();
        assert!(why.starts_with("shards_lost: shard 1"), "{why}");
        // The leader's three sessions counted, the lost shard's not.
        assert_eq!(
            (num(r, "sessions"), num(r, "sessions_completed")),
            (6.0, 3.0)
        );
        let shards = r["shards"].as_array().expect("shards");
        assert_eq!(shards[1]["lost"], true, "{r}");
        assert_eq!(num(&shards[1], "concurrency"), 3.0, "{r}");
        assert_eq!(num(&r["summary"], "sent"), num(&shards[0], "requests"));
    }
}

/// The model's context holds on every shard: four sessions whose third
/// turn (about 330 tokens with its output) would not fit a 300-token
/// model all stop there, the follower's two as the leader's, and the
/// leader's result lists all four.
#[test]
fn every_shard_stops_its_sessions_at_the_models_context() {
    let s = sim_of(300);
    let (dir, _) = tmp("unused");
    let f = flags(
        &s.url,
        &[
            "--sessions",
            "4",
            "--turns",
            "5",
            "--user-tokens",
            "100",
            "--max-tokens",
            "16",
        ],
    );
    let (doc, all) = run_shards(dir.path(), &f, 2);
    let r = &doc["session_results"][0];
    assert_eq!(
        num(r, "sessions_stopped_at_context_limit"),
        4.0,
        "{r}\n{all}"
    );
    let stops = r["context_limit_stops"].as_array().expect("stops");
    let at: Vec<(u64, u64)> = stops
        .iter()
        .map(|x| {
            (
                x["session"].as_u64().unwrap_or(9),
                x["turn"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(at, [(0, 3), (1, 3), (2, 3), (3, 3)], "{r}");
    assert_eq!(num(&r["summary"], "sent"), 8.0, "{r}");
    let rec = read(&dir.path().join("r.shard-1.json"));
    let theirs = rec["cells"][0]["sessions"]["stops"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(theirs, 2, "the follower's own stops: {rec}");
}

/// `--replay-limit` holds on every shard: first turns due 3 s after the
/// start under a 1 s limit are sent by no shard, each follower reports
/// that its limit came, and the run is an error that says so.
#[test]
fn every_shard_keeps_the_runs_limit() {
    let s = sim();
    let (dir, _) = tmp("unused");
    let f = flags(
        &s.url,
        &[
            "--sessions",
            "4",
            "--turns",
            "2",
            "--think-time",
            "3",
            "--replay-limit",
            "1",
        ],
    );
    let t0 = Instant::now();
    let (doc, all) = run_shards(dir.path(), &f, 2);
    let r = &doc["session_results"][0];
    assert_eq!(r["status"], "error", "{r}\n{all}");
    let why = r["status_reason"].as_str().unwrap_or_default();
    assert!(why.contains("--replay-limit"), "{why}");
    assert_eq!(num(&r["summary"], "sent"), 0.0, "{r}");
    let rec = read(&dir.path().join("r.shard-1.json"));
    assert_eq!(rec["cells"][0]["sessions"]["timed_out"], true, "{rec}");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}
