//! The binary end to end: flags, exit codes, the result file and its schema.

mod common;

use std::path::Path;

use common::{assert_valid, bin, free_port, run, signal, spawn_sim, text, tmp};

#[test]
fn sim_run_writes_a_result_that_matches_the_schema() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--concurrency",
        "1,2",
        "--contexts",
        "0,2k",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--prefill-contexts",
        "4k",
        "--api-key",
        "sk-test-SECRET-9f8e7d",
        "--display-mode",
        "plain",
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&o.stderr)
    );
    assert!(stdout.contains("Aggregate tok/s"), "{stdout}");
    assert!(stdout.contains("Results saved to"));
    let raw = std::fs::read_to_string(&out).expect("result file");
    assert!(
        !raw.contains("SECRET-9f8e7d"),
        "the API key leaked into the JSON"
    );
    assert!(
        !stdout.contains("SECRET-9f8e7d"),
        "the API key leaked onto the screen"
    );
    let doc: serde_json::Value = serde_json::from_str(&raw).expect("valid JSON");
    assert_valid(&doc);
    assert_eq!(doc["metadata"]["run_status"], "complete");
    assert_eq!(doc["metadata"]["engine"], "vllm");
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(4));
    assert!(
        doc["prefill"]["4096"]["tok_per_sec"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
    assert!(doc["summary_table"]["2048"]["2"].as_f64().unwrap_or(0.0) > 0.0);
}

/// `--token-targeting estimate` sizes prompts from the calibration fit
/// alone; by default each context is counted exactly where the server can
/// (the simulator has /tokenize, so the 2k prompt is exactly 2,048 tokens).
#[test]
fn token_targeting_estimate_skips_the_exact_count() {
    let sized = |extra: &[&str]| {
        let (_d, out) = tmp("r.json");
        let mut args = vec![
            "--sim",
            "--concurrency",
            "1",
            "--contexts",
            "2k",
            "--duration",
            "1",
            "--decode-warmup-seconds",
            "0",
            "--skip-prefill",
            "--display-mode",
            "plain",
            "--output",
            out.to_str().expect("path"),
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
        (
            doc["metadata"]["token_targeting"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            doc["metadata"]["prompt_tokens_by_context"]["2048"].clone(),
        )
    };
    let (mode, tokens) = sized(&[]);
    assert_eq!(mode, "exact");
    assert_eq!(tokens, 2048);
    let (mode, _) = sized(&["--token-targeting", "estimate"]);
    assert_eq!(mode, "estimate");
}

/// A malformed address is a configuration error (exit 2, one line), found
/// before discovery sends anything — not "cannot connect" (exit 3).
#[test]
fn malformed_host_urls_are_exit_2_before_anything_is_sent() {
    for args in [
        &["--host", "http://[::1"][..],
        &["--host", "http://[::1", "--port", "8000"],
        &["--host", "http://127.0.0.1:99999"],
        &["cjk-watchdog", "--host", "http://[::1"],
    ] {
        let o = run(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("invalid --host"), "{err}");
    }
}

#[test]
fn malformed_lists_are_one_line_errors_with_exit_code_2() {
    for (flag, value) in [
        ("--concurrency", "8x"),
        ("--concurrency", "-1"),
        ("--contexts", ""),
        ("--contexts", "0,8k,8k"),
    ] {
        let o = run(&["--host", "127.0.0.1", "--port", "9", flag, value]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("error: invalid {flag}")), "{err}");
    }
    let o = run(&["--duration", "abc"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The interference probe runs in sustained cells only: another mode
/// refuses it before any request, with the usage exit code.
#[test]
fn mixed_prefill_contexts_outside_sustained_cells_is_exit_code_2() {
    let o = run(&[
        "--host",
        "127.0.0.1",
        "--port",
        "9",
        "--request-count",
        "8",
        "--mixed-prefill-contexts",
        "4k",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: invalid --mixed-prefill-contexts"),
        "{err}"
    );
    assert!(err.contains("--request-count"), "{err}");
}

#[test]
fn an_unreachable_server_is_a_one_line_error_naming_the_url() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--host",
        "http://127.0.0.1:9",
        "--output",
        out.to_str().expect("path"),
        "--display-mode",
        "plain",
        "--no-hw-monitor",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .expect("error line");
    assert!(line.contains("http://127.0.0.1:9/v1/models"), "{line}");
    assert!(!err.contains("panicked"));
    // Credentials in the URL never reach the screen, the error line included
    // (issue 34: it printed `user:hunter2@`).
    let o = run(&[
        "--host",
        "http://user:hunter2@127.0.0.1:9",
        "--output",
        out.to_str().expect("path"),
        "--display-mode",
        "plain",
        "--no-hw-monitor",
    ]);
    let (all, err) = (text(&o.stdout) + &text(&o.stderr), text(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(!all.contains("hunter2"), "{all}");
    assert!(
        err.contains("http://<redacted>@127.0.0.1:9/v1/models"),
        "{err}"
    );
}

#[test]
fn an_unserved_model_lists_the_served_ones() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--model",
        "nope",
        "--output",
        out.to_str().expect("path"),
        "--display-mode",
        "plain",
        "--no-hw-monitor",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("\"nope\" is not served") && err.contains("sim-quickstart"),
        "{err}"
    );
}

#[test]
fn help_lists_the_exit_codes() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let s = text(&o.stdout);
    assert!(s.contains("Exit codes:") && s.contains("130"), "{s}");
}

#[test]
fn sim_subcommand_rejects_bad_input_in_one_line() {
    let o = run(&["sim", "--engine", "tgi"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr).trim().lines().count(),
        1,
        "{}",
        text(&o.stderr)
    );
    let o = run(&["sim", "--scenario", "no-such-scenario"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).starts_with("error:"));
}

#[test]
fn a_wrong_api_key_is_a_one_line_error_pointing_at_the_flag() {
    let (dir, out) = tmp("r.json");
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/quickstart.toml"),
    )
    .expect("scenario");
    assert!(
        base.trim_end().ends_with('"'),
        "[server] must be the last table of quickstart.toml"
    );
    let scenario = dir.path().join("keyed.toml");
    std::fs::write(&scenario, format!("{base}\napi_key = \"right-key\"\n")).expect("write");
    let common = [
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--duration",
        "1",
    ];
    let o = bin()
        .args([
            "--sim",
            scenario.to_str().expect("path"),
            "--api-key",
            "wrong-key",
            "--output",
            out.to_str().expect("path"),
        ])
        .args(common)
        .output()
        .expect("runs");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("HTTP 401") && err.contains("check --api-key") && err.contains("/v1/models"),
        "{err}"
    );
    assert!(!err.contains("wrong-key"));
    let o = bin()
        .args([
            "--sim",
            scenario.to_str().expect("path"),
            "--api-key",
            "right-key",
            "--output",
            out.to_str().expect("path"),
        ])
        .args(common)
        .args(["--decode-warmup-seconds", "0", "--prefill-contexts", ""])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn wait_for_server_rides_out_a_server_that_is_still_starting() {
    let port = free_port();
    let (_d, out) = tmp("r.json");
    let host = format!("http://127.0.0.1:{port}");
    let common = [
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--max-tokens",
        "64",
        "--skip-prefill",
        "--decode-warmup-seconds",
        "0",
        "--output",
        out.to_str().expect("path"),
    ];
    // Nothing listens: without waiting long enough, exit 3 after the wait.
    let t = std::time::Instant::now();
    let o = bin()
        .args(["--host", &host, "--wait-for-server", "1.5"])
        .args(common)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(t.elapsed().as_secs_f64() >= 1.4);
    // The server comes up 2 s after the benchmark started.
    let bench = bin()
        .args(["--host", &host, "--wait-for-server", "60"])
        .args(common)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("benchmark starts");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut sim = spawn_sim(port);
    let o = bench.wait_with_output().expect("benchmark ends");
    let _ = sim.kill();
    let _ = sim.wait();
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(all.contains("server not ready"), "{all}");
}

/// One plain-mode run of a single C=2, ctx=0 cell against a simulator of
/// its own, its output going to a log file the test watches while it
/// freezes or starves the benchmark from outside.
struct WatchedRun {
    sim: std::process::Child,
    bench: std::process::Child,
    _dir: tempfile::TempDir,
    log: std::path::PathBuf,
    out: std::path::PathBuf,
}

impl WatchedRun {
    fn start(duration: &str) -> WatchedRun {
        let port = free_port();
        let sim = spawn_sim(port);
        let (dir, out) = tmp("r.json");
        let log = dir.path().join("run.log");
        let host = format!("http://127.0.0.1:{port}");
        let bench = bin()
            .args(["--host", &host, "--wait-for-server", "30"])
            .args(["--display-mode", "plain", "--no-hw-monitor"])
            .args([
                "--concurrency",
                "2",
                "--contexts",
                "0",
                "--duration",
                duration,
            ])
            .args(["--max-tokens", "4096", "--skip-prefill"])
            .args(["--decode-warmup-seconds", "0", "--output"])
            .arg(&out)
            .env("COLUMNS", "140")
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("benchmark starts");
        WatchedRun {
            sim,
            bench,
            _dir: dir,
            log,
            out,
        }
    }

    fn shown(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait (at most 60 s) until the log holds `needle`.
    fn wait_for(&self, needle: &str) {
        let t0 = std::time::Instant::now();
        while !self.shown().contains(needle) {
            assert!(
                t0.elapsed().as_secs() < 60,
                "no {needle:?} within 60 s:\n{}",
                self.shown()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn running(&mut self) -> bool {
        self.bench.try_wait().ok().flatten().is_none()
    }

    /// Wait for the end: exit code, the log, the result file.
    fn finish(mut self) -> (Option<i32>, String, serde_json::Value) {
        let st = self.bench.wait().expect("benchmark ends");
        let _ = self.sim.kill();
        let _ = self.sim.wait();
        let shown = self.shown();
        let doc = serde_json::from_str(&std::fs::read_to_string(&self.out).expect("result"))
            .expect("JSON");
        (st.code(), shown, doc)
    }
}

/// The benchmark frozen (SIGSTOP) for 3 s inside its window, as a starved or
/// paused client would be: the cell driver sees the gap, says so, and measures
/// the cell again; the kept window is clean.
#[test]
fn a_frozen_benchmark_is_caught_and_the_cell_measured_again() {
    let run = WatchedRun::start("5");
    run.wait_for("ready C=2");
    signal(&run.bench, "-STOP");
    std::thread::sleep(std::time::Duration::from_secs(3));
    signal(&run.bench, "-CONT");
    let (code, shown, doc) = run.finish();
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("client stall") && shown.contains("measuring the cell again"),
        "{shown}"
    );
    // The event says when the stalled window ran, to line it up with other logs.
    assert!(
        shown.contains(" UTC") && shown.contains("; window "),
        "no window time in the stall event:\n{shown}"
    );
    assert_valid(&doc);
    let cell = &doc["results"][0];
    assert_eq!(cell["measure_attempts"], 2, "{cell}");
    assert_eq!(cell["status"], "ok", "{cell}");
    let stall = cell["client_stall_max_s"].as_f64().expect("stall");
    assert!(stall < 2.0, "the kept window stalled too: {cell}");
    // The process's own load over the window, from /proc on Linux.
    if cfg!(target_os = "linux") {
        assert!(cell["client_runqueue_wait_s"].as_f64().is_some(), "{cell}");
        assert!(cell["client_major_faults"].as_u64().is_some(), "{cell}");
    }
    assert!(
        cell["aggregate_tps"].as_f64().unwrap_or(0.0) > 0.0,
        "{cell}"
    );
}

/// The benchmark frozen (SIGSTOP) for 4 s during ramp-up, just before its
/// window would open: tokens pile up unread in its sockets. Readiness must
/// start its hold again after the gap, so the backlog is read before the
/// window and the window's rate still matches the server's own counter (a
/// window opened at once would count 4 s of backlog in 5 s: about +80 %).
#[test]
fn a_freeze_during_ramp_up_does_not_leak_into_the_window() {
    let run = WatchedRun::start("5");
    run.wait_for("cell start C=2");
    // inside the ramp (the simulator answers the scout at once)
    std::thread::sleep(std::time::Duration::from_millis(600));
    signal(&run.bench, "-STOP");
    std::thread::sleep(std::time::Duration::from_secs(4));
    signal(&run.bench, "-CONT");
    let (code, shown, doc) = run.finish();
    assert_eq!(code, Some(0), "{shown}");
    assert_valid(&doc);
    let cell = &doc["results"][0];
    assert_eq!(cell["status"], "ok", "{cell}");
    let client = cell["aggregate_tps"].as_f64().expect("aggregate");
    let server = cell["server_gen_throughput"].as_f64().expect("server rate");
    assert!(
        (client - server).abs() <= 0.05 * server && cell["server_client_mismatch"].is_null(),
        "client {client:.1} tok/s vs the simulator's counter {server:.1} tok/s:\n{shown}"
    );
    // the freeze was before the window: the window itself kept up
    assert!(cell.get("client_limited").is_none(), "{cell}");
    assert!(cell["event_loop_lag_p99"].as_f64().is_some(), "{cell}");
    assert!(
        shown.contains("not running for") && shown.contains("during ramp-up"),
        "no ramp-up freeze event:\n{shown}"
    );
}

/// A client starved inside its window: stopped for 100 ms out of every
/// 150 ms (SIGSTOP/SIGCONT), as a client sharing a saturated core would be.
/// No single gap reaches the 2 s stall limit, but its event loop runs late
/// all the time: the cell is marked `client_limited` and the report says so.
#[test]
fn a_starved_client_is_marked_client_limited() {
    let mut run = WatchedRun::start("4");
    run.wait_for("ready C=2");
    // starve it for the whole window (and a little beyond)
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < until && run.running() {
        signal(&run.bench, "-STOP");
        std::thread::sleep(std::time::Duration::from_millis(100));
        signal(&run.bench, "-CONT");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, shown, doc) = run.finish();
    assert_eq!(code, Some(0), "{shown}");
    assert_valid(&doc);
    let cell = &doc["results"][0];
    assert_eq!(cell["client_limited"], true, "{cell}");
    let lag = cell["event_loop_lag_p99"].as_f64().expect("lag");
    assert!(lag > 0.05, "{cell}");
    assert!(
        shown.contains("the benchmark itself was the bottleneck") && shown.contains("selftest"),
        "no client-limited warning in the report:\n{shown}"
    );
}

/// `--dry-run` discovers the server, prints the plan with its skips and an
/// estimate, exits 0, and sends no generation request (the simulator's
/// counters stay at zero).
#[test]
fn dry_run_prints_the_plan_and_generates_nothing() {
    let port = free_port();
    let mut sim = spawn_sim(port);
    let host = format!("http://127.0.0.1:{port}");
    let o = bin()
        .args(["--host", &host, "--wait-for-server", "30", "--dry-run"])
        .args(["--concurrency", "1,64", "--contexts", "0,16k,128k"])
        .args(["--prefill-contexts", "1k,256k", "--max-tokens", "512"])
        .output()
        .expect("runs");
    let metrics = http_get(port, "/metrics");
    let _ = sim.kill();
    let _ = sim.wait();
    let shown = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{shown}{}", text(&o.stderr));
    for want in [
        "Run plan",
        "prompts sized: 0, 1k, 16k",
        "prefill: integrated 16k; scout-only 1k; standalone none",
        "prefill ctx=256k skipped: context 262144 exceeds the prefill limit",
        "cells: 6 in order, 4 measured, 2 skipped",
        "1. C=1 ctx=0  measure",
        "C=64 ctx=128k  skip: context 131584 tokens",
        "estimated time: at least",
        "dry run: nothing was generated",
    ] {
        assert!(shown.contains(want), "missing {want:?} in:\n{shown}");
    }
    let generated: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("vllm:prompt_tokens_total")
                || l.starts_with("vllm:generation_tokens_total")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(metrics.contains("vllm:prompt_tokens_total"), "{metrics}");
    assert_eq!(
        generated, 0.0,
        "the dry run generated something:\n{metrics}"
    );
}

/// A plain HTTP/1.1 GET on loopback, the body as text.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    out
}

/// An open-loop run against the built-in simulator: rate cells in the JSON
/// (valid against the schema, settings recorded) and in the report.
#[test]
fn an_open_loop_run_writes_rate_cells() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--request-rate",
        "4,16",
        "--request-count",
        "12",
        "--contexts",
        "0",
        "--max-tokens",
        "16",
        "--skip-prefill",
        "--output",
        out.to_str().expect("path"),
    ]);
    let shown = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{shown}{}", text(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    let rows = doc["rate_results"].as_array().expect("rate_results");
    assert_eq!(rows.len(), 2, "{doc}");
    for (row, rate) in rows.iter().zip([4.0, 16.0]) {
        assert_eq!(row["request_rate"], rate, "{row}");
        assert_eq!(row["status"], "ok", "{row}");
        assert_eq!(row["completed"], 12, "{row}");
        assert!(row["ttft_p50"].as_f64().is_some_and(|t| t > 0.0), "{row}");
    }
    let ol = &doc["metadata"]["open_loop"];
    assert_eq!(ol["arrival"], "poisson", "{ol}");
    assert_eq!(ol["seed"], 42, "{ol}");
    assert!(
        doc["results"].as_array().is_some_and(Vec::is_empty),
        "{doc}"
    );
    assert!(shown.contains("Open-loop cells"), "{shown}");
}
