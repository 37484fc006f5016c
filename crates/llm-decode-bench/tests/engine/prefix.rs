//! The prefix-cache checks the vLLM and SGLang tests share, on a server
//! they started (docs/workloads.md): two rate cells behind two shared
//! prefixes, and a 60-request trace in two prefix groups replayed at its
//! times, each with the cache reset first. The engine's own counters must
//! agree with the hit rate the prompts intended within 5 points, and the
//! first request after a reset must find nothing cached. Then the judges
//! of issue 35 (`docs/methodology.md`, "Which tokens a next request
//! reuses"): sessions whose replies the engine keeps for the next turn, and
//! a trace of unrelated prompts that share only the chat template's head,
//! intended within 3 points of achieved.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{assert_valid, f, last_lines, run_bench, s};

/// What differs between the engines.
pub struct Engine {
    /// For messages: `vLLM`, `SGLang`.
    pub name: &'static str,
    /// The prefix cache's unit in tokens (vLLM's CPU block, SGLang's page).
    pub granularity: u64,
    /// Where the benchmark reads it.
    pub granularity_source: &'static str,
    /// `server_prefix_cache_source` of a rate cell.
    pub counters: &'static str,
}

/// A run's limit; the two runs take 30–60 s each on 2 busy cores.
const LIMIT: Duration = Duration::from_secs(400);

/// Writes a Mooncake trace of `n` requests in two prefix groups: each
/// prompt is one shared 512-token block (its group's) and a short block
/// of its own (8–32 tokens, the chat template's last 6 included: little
/// to prefill, which a CPU engine needs), one output token each. The first request
/// comes alone (6 s of trace before the others), so the server's counters
/// can tell what it found cached; the rest 40 ms apart.
pub fn write_two_group_trace(path: &Path, n: u64) {
    let mut body = String::new();
    for i in 0..n {
        let at = if i == 0 { 0 } else { 6000 + i * 40 };
        let _ = writeln!(
            body,
            r#"{{"timestamp": {at}, "input_length": {}, "output_length": 1, "hash_ids": [{}, {}]}}"#,
            520 + (i % 5) * 6,
            i % 2,
            1000 + i
        );
    }
    std::fs::write(path, body).expect("write the trace");
}

/// Both checks on the server at `port`.
pub fn prefix_cache_checks(port: u16, dir: &Path, e: &Engine) {
    rate_cells(port, dir, e);
    trace_replay(port, dir, e);
    sessions(port, dir, e);
    template_only_trace(port, dir, e);
}

/// Intended and achieved rates of a replay's `prefix_cache`, printed, and
/// within `points` of each other.
fn close(e: &Engine, what: &str, pc: &Value, points: f64) -> (f64, f64) {
    let (intended, achieved) = (
        f(pc, "prefix_cache_intended"),
        f(pc, "server_prefix_cache_hit_rate"),
    );
    eprintln!(
        "{} {what} prefix cache: intended {intended:.4}, achieved {achieved:.4}; {pc}",
        e.name
    );
    assert!(
        (intended - achieved).abs() <= points / 100.0,
        "{what}: intended {intended} vs {}'s {achieved}: {pc}",
        e.name
    );
    (intended, achieved)
}

/// Two sessions of 3 turns, 100 new user tokens and 120 generated tokens
/// per turn, greedy: the second and third turns reuse the previous turn's
/// prompt *and* reply (issue 35, defect 2), so the intended rate counts
/// both and lands within 3 points of the engine's counters (prompt-only
/// counting gave about half as much on vLLM's 128-token blocks). Greedy,
/// because a sampled reply of this small model is not always tokenized back
/// into the ids it was generated as, and the engine cannot reuse past the
/// first difference (docs/methodology.md §16.1).
fn sessions(port: u16, dir: &Path, e: &Engine) {
    let t0 = Instant::now();
    let args = ["--sessions", "2", "--turns", "3", "--user-tokens", "100"];
    let (st, doc, out) = run_bench(
        port,
        dir,
        "sessions",
        LIMIT,
        &["--max-tokens", "120", "--temperature", "0"],
        &args,
    );
    assert!(st.success(), "sessions: {st}\n{}", last_lines(&out, 60));
    assert_valid("sessions", &doc);
    let r = &doc["session_results"][0];
    assert_eq!(s(r, "status"), "ok", "{r}");
    assert_eq!(r["sessions_completed"], 2, "{r}");
    let (intended, _) = close(e, "sessions", &r["prefix_cache"], 3.0);
    assert!(intended > 0.4, "{r}");
    eprintln!("{} prefix cache, sessions: {:.0?}", e.name, t0.elapsed());
}

/// 20 prompts of 100 tokens that share nothing but the chat template's
/// head, one output token each, 50 ms apart: on SGLang's page size 1 the
/// head is reused by every prompt after the first (issue 35, defect 3), on
/// vLLM's 128-token blocks nothing is; intended within 3 points of
/// achieved on both, and the first request after the reset finds nothing.
fn template_only_trace(port: u16, dir: &Path, e: &Engine) {
    let t0 = Instant::now();
    let trace = dir.join("unrelated.jsonl");
    let mut body = String::new();
    for i in 0..20u32 {
        let at = if i == 0 {
            0.0
        } else {
            3.0 + f64::from(i) * 0.05
        };
        let _ = writeln!(
            body,
            r#"{{"timestamp": {at}, "input_tokens": 100, "output_tokens": 1}}"#
        );
    }
    std::fs::write(&trace, body).expect("write the trace");
    let (doc, out) = run(
        port,
        dir,
        "unrelated",
        &[
            "--trace",
            trace.to_str().expect("path"),
            "--reset-prefix-cache",
            "before-cell",
        ],
    );
    run_keys(e, &doc, &out);
    let t = &doc["trace_results"][0];
    assert_eq!(s(t, "status"), "ok", "{t}");
    let pc = &t["prefix_cache"];
    let (intended, _) = close(e, "template-only trace", pc, 3.0);
    if e.granularity == 1 {
        assert!(intended > 0.1, "the template's head is shared: {pc}");
    }
    assert_eq!(pc["first_request_cached_tokens"], 0, "{pc}");
    eprintln!(
        "{} prefix cache, template only: {:.0?}",
        e.name,
        t0.elapsed()
    );
}

fn run(port: u16, dir: &Path, name: &str, args: &[&str]) -> (Value, String) {
    let (st, doc, out) = run_bench(port, dir, name, LIMIT, &["--max-tokens", "2"], args);
    assert!(st.success(), "run {name}: {st}\n{}", last_lines(&out, 60));
    assert_valid(name, &doc);
    (doc, out)
}

/// The run's granularity and reset, and the reset check in its event log.
fn run_keys(e: &Engine, doc: &Value, out: &str) {
    let pc = &doc["metadata"]["prefix_cache"];
    assert_eq!(pc["granularity"]["tokens"], e.granularity, "{pc}");
    assert_eq!(s(pc, "granularity_source"), e.granularity_source, "{pc}");
    assert_eq!(s(pc, "reset"), "done", "{pc}");
    assert!(
        doc["event_log"]
            .to_string()
            .contains("the first request after it found 0 cached tokens"),
        "{}",
        last_lines(out, 60)
    );
}

/// Two rate cells of 12 requests, each its own nonce behind one of two
/// ~400-token prefixes, the cache reset before each cell: the first
/// request after the second reset finds nothing cached (the runner reads
/// that from the same counters).
fn rate_cells(port: u16, dir: &Path, e: &Engine) {
    let t0 = Instant::now();
    let (doc, out) = run(
        port,
        dir,
        "prefix",
        &[
            "--request-rate",
            "1,2",
            "--request-count",
            "12",
            "--contexts",
            "512",
            "--shared-prefix-tokens",
            "384",
            "--prefix-groups",
            "2",
            "--reset-prefix-cache",
            "before-cell",
            "--skip-prefill",
            "--decode-warmup-seconds",
            "0",
        ],
    );
    run_keys(e, &doc, &out);
    let rows = doc["rate_results"].as_array().expect("rate cells");
    assert_eq!(rows.len(), 2);
    for r in rows {
        let (intended, achieved) = (
            f(r, "prefix_cache_intended"),
            f(r, "server_prefix_cache_hit_rate"),
        );
        eprintln!(
            "{} rate cell prefix cache: intended {intended:.4}, achieved {achieved:.4}",
            e.name
        );
        assert!(
            (intended - achieved).abs() <= 0.05,
            "intended {intended} vs {}'s {achieved}: {r}",
            e.name
        );
        assert!(intended > 0.5, "{r}");
        assert_eq!(s(r, "server_prefix_cache_source"), e.counters);
        assert_eq!(s(r, "prefix_cache_reset"), "done");
    }
    eprintln!("{} prefix cache, rate cells: {:.0?}", e.name, t0.elapsed());
}

/// Rows of the two-group trace: enough that the two cold first requests
/// weigh little (58 of 60 prompts hit), few enough for a CPU engine.
const TRACE_ROWS: u64 = 60;

/// The two-group trace, replayed at its own times with the cache reset before
/// it: the hit rate the engine's counters give is the intended one within
/// 5 points, every request came back with its trace length, and the first
/// request found nothing cached.
fn trace_replay(port: u16, dir: &Path, e: &Engine) {
    let t0 = Instant::now();
    let trace = dir.join("two-groups.jsonl");
    write_two_group_trace(&trace, TRACE_ROWS);
    let (doc, out) = run(
        port,
        dir,
        "trace",
        &[
            "--trace",
            trace.to_str().expect("path"),
            // At its own times: the first request (520 tokens, nothing
            // cached) has 6 s alone, so the counters give its hits (SGLang
            // reports none in its answer); twice as fast left it 3 s, short
            // on a CPU SGLang.
            "--trace-speed",
            "1",
            "--trace-tokenize-checks",
            "20",
            "--reset-prefix-cache",
            "before-cell",
            // SGLang's CPU engine on two cores takes ~1.5 s a request here;
            // the default limit (the span + 120 s) is for real servers.
            "--replay-limit",
            "300",
        ],
    );
    run_keys(e, &doc, &out);
    let t = &doc["trace_results"][0];
    let sum = &t["summary"];
    assert_eq!(s(t, "status"), "ok", "{t}");
    assert_eq!(
        (f(sum, "completed"), f(sum, "errors")),
        (TRACE_ROWS as f64, 0.0),
        "{t}"
    );
    let l = &t["lengths"];
    assert!(f(l, "reported_max_error") <= 1.0, "{l}");
    assert!(f(l, "tokenized_max_error") <= 1.0, "{l}");
    let pc = &t["prefix_cache"];
    let (intended, achieved) = (
        f(pc, "prefix_cache_intended"),
        f(pc, "server_prefix_cache_hit_rate"),
    );
    eprintln!(
        "{} trace prefix cache: intended {intended:.4}, achieved {achieved:.4}; {pc}",
        e.name
    );
    assert_eq!(pc["granularity"]["tokens"], e.granularity, "{pc}");
    assert_eq!(s(pc, "achieved_source"), e.counters, "{pc}");
    // 58 of 60 prompts find their group's 512 tokens cached: about 0.93
    // (a shared part cut short of the block, as a chat template's trailing
    // tokens once did, would give 384 of 532 tokens on vLLM: 0.71)
    assert!(intended > 0.9, "{pc}");
    assert!(
        (intended - achieved).abs() <= 0.05,
        "intended {intended} vs {}'s {achieved}: {pc}",
        e.name
    );
    assert_eq!(s(pc, "prefix_cache_reset"), "done", "{pc}");
    assert_eq!(pc["first_request_cached_tokens"], 0, "{pc}");
    assert!(!s(pc, "first_request_cached_source").is_empty(), "{pc}");
    eprintln!("{} prefix cache, trace: {:.0?}", e.name, t0.elapsed());
}
