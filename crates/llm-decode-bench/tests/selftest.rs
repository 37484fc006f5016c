//! `llm-decode-bench selftest` end to end: levels measured against the
//! in-process simulator's own counter, JSON output, bad flags; and the
//! open-file check of a run asking for more streams than the process may open.

mod common;

use common::{run, text};

/// The self-checks measure this machine: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The truth is the simulator's own token counter, read directly at the
/// window's edges. The client never counts (much) more than the server
/// generated; at 16 streams (2,000 tok/s, a few percent of a core) it counts all of it,
/// even on a busy machine; higher levels may fall behind on a loaded machine,
/// which is what the self-check is for, and must then say MISSED.
#[test]
fn selftest_counts_what_the_simulator_generated() {
    let _one = serial();
    let o = run(&[
        "selftest",
        "--max-streams",
        "64",
        "--window",
        "2",
        "--json",
        "--all-levels",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let levels = doc["levels"].as_array().expect("levels");
    assert_eq!(levels.len(), 2, "{doc}");
    assert_eq!(levels[0]["streams"], 16);
    assert_eq!(levels[1]["streams"], 64);
    for l in levels {
        let truth = l["truth_tokens"].as_f64().expect("truth");
        let measured = l["measured_tokens"].as_f64().expect("measured");
        let streams = l["streams"].as_f64().expect("streams");
        // the simulator's pace: 125 tok/s per stream (its own thread may fall a little short)
        let pace = truth / l["window_s"].as_f64().expect("window");
        assert!(
            pace > 0.5 * 125.0 * streams && pace < 1.02 * 125.0 * streams,
            "{l}"
        );
        // a stream's last few tokens can straddle an edge: one per stream at most
        assert!(
            measured <= truth + streams,
            "the client counted more than was generated: {l}"
        );
        assert!(l["client_cpu_us_per_token"].as_f64().is_some(), "{l}");
        assert!(l["event_loop_lag_p99"].as_f64().is_some(), "{l}");
        assert_eq!(l["failed"], 0, "{l}");
        let ratio = l["ratio"].as_f64().expect("ratio");
        let lag = l["event_loop_lag_p99"].as_f64().expect("lag");
        let verdict = (0.99..=1.01).contains(&ratio) && lag <= 0.05;
        assert_eq!(l["kept_up"], verdict, "{l}");
    }
    let first = &levels[0];
    let (t, m) = (
        first["truth_tokens"].as_f64().expect("truth"),
        first["measured_tokens"].as_f64().expect("measured"),
    );
    assert!((m - t).abs() <= 0.03 * t, "16 streams: {first}");
    assert!(
        doc["verdict"]
            .as_str()
            .expect("verdict")
            .contains("client ceiling"),
        "{doc}"
    );
}

#[test]
fn selftest_prints_a_table_and_a_verdict() {
    let _one = serial();
    let o = run(&["selftest", "--max-streams", "16", "--window", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("streams") && out.contains("truth tok/s"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("16 ")),
        "{out}"
    );
    assert!(out.contains("client ceiling"), "{out}");
}

#[test]
fn selftest_bad_flags_are_one_line_errors() {
    for args in [
        vec!["selftest", "--max-streams", "0"],
        vec!["selftest", "--window", "0.1"],
        vec!["selftest", "--window", "abc"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

/// The hard open-file limit of this process (None if unknown or unlimited).
fn hard_nofile() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(4)?.parse().ok()
}

#[test]
fn more_streams_than_open_files_is_refused_before_anything_is_sent() {
    let Some(hard) = hard_nofile() else {
        eprintln!("NOTICE: no open-file limit to test against");
        return;
    };
    let c = 100_000u64;
    if hard >= 2 * c + 256 {
        eprintln!("NOTICE: the hard open-file limit ({hard}) allows C = {c}");
        return;
    }
    let o = run(&["--sim", "--concurrency", "100000", "--dry-run"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("open files") && err.contains("ulimit -n"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// SIGTERM ends a self-check with no verdict and exit 130, as Ctrl-C does:
/// the levels already printed stay on the screen.
#[test]
fn a_stop_signal_ends_the_selftest_with_130() {
    let _one = serial();
    let child = common::bin()
        .args(["selftest", "--max-streams", "16", "--window", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("selftest starts");
    std::thread::sleep(std::time::Duration::from_secs(2));
    common::signal(&child, "-TERM");
    let o = child.wait_with_output().expect("exits");
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("selftest interrupted"),
        "{}",
        text(&o.stderr)
    );
}
