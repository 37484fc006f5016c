//! `cjk-watchdog` against the simulator: exit 2 exactly when a Han
//! ideograph is streamed, 0 after one clean iteration, the key never shown,
//! one-line errors for bad flags.

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{bin, free_port, run, signal, text, tmp};

fn scenario(han_at_token: u32, api_key: Option<&str>) -> String {
    let key = api_key.map_or(String::new(), |k| format!("api_key = \"{k}\"\n"));
    format!(
        r#"name = "watchdog-test"
personality = "vllm"
model = "sim-watch"
max_model_len = 4096

[scheduler]
max_running = 4
prefill_tok_s = 50000.0

[step_time]
base_s = 0.005

[kv]
block_size = 16
num_blocks = 4096

[tokenizer]
chars_per_token = 4.0

[output]
natural_length = 30
reasoning_tokens = 5
han_at_token = {han_at_token}

[server]
{key}"#
    )
}

/// The simulator as its own process, killed when dropped.
struct Sim {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sim(han_at_token: u32, api_key: Option<&str>) -> Sim {
    let (dir, path) = tmp("sc.toml");
    std::fs::write(&path, scenario(han_at_token, api_key)).expect("scenario");
    let port = free_port();
    let child = bin()
        .args([
            "sim",
            "--scenario",
            path.to_str().expect("path"),
            "--port",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("simulator starts");
    let until = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "simulator did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Sim {
        child,
        port,
        _dir: dir,
    }
}

fn watchdog(s: &Sim, extra: &[&str]) -> (Option<i32>, String, String) {
    let port = s.port.to_string();
    let mut args = vec![
        "cjk-watchdog",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--max-tokens",
        "40",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

#[test]
fn a_clean_stream_exits_0_after_one_iteration() {
    let s = sim(0, None);
    let (code, out, err) = watchdog(&s, &[]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("=== Iteration #1 ==="), "{out}");
    assert!(!out.contains("Iteration #2"), "{out}");
    assert!(out.contains("30 completion tokens"), "{out}");
    assert!(out.contains("CJK: 0"), "{out}");
    // The echoed text (simulated words) is there, reasoning included.
    assert!(out.contains("engine"), "{out}");

    // A URL without a port gets --port; one with a port keeps it.
    let port = s.port.to_string();
    let url = format!("http://127.0.0.1:{port}");
    for host in ["http://127.0.0.1", url.as_str()] {
        let other_port = if host == url { "9" } else { port.as_str() };
        let o = run(&["cjk-watchdog", "--host", host, "--port", other_port]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{host}: {out}{}", text(&o.stderr));
        assert!(out.contains(&format!("server {url},")), "{out}");
    }
}

#[test]
fn a_han_ideograph_exits_2_and_loop_stops_that_stream() {
    let s = sim(12, None);
    let (code, out, err) = watchdog(&s, &[]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(out.contains("1 Han ideograph(s) in iteration #1"), "{out}");
    assert!(!out.contains("aborted early"), "{out}");
    assert!(out.contains('\u{6C34}'), "{out}");

    let (code, out, err) = watchdog(&s, &["--loop", "--no-overlay"]);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(out.contains("(stream aborted early)"), "{out}");
    assert!(!out.contains("Iteration #2"), "{out}");
    assert!(out.contains("Summary: 1 iteration(s)"), "{out}");
    assert!(out.contains("Han ideograph in iteration #1"), "{out}");
    // Stopped at the ideograph: nothing of the answer after it was read.
    assert!(!out.contains("30 completion tokens"), "{out}");
}

#[test]
fn the_api_key_is_sent_but_never_printed() {
    let key = "sk-watchdog-secret-123";
    let s = sim(0, Some(key));
    let (code, out, err) = watchdog(&s, &["--api-key", key]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(!out.contains(key) && !err.contains(key));

    let wrong = "sk-wrong-key-456";
    let (code, out, err) = watchdog(&s, &["--api-key", wrong, "--model", "sim-watch"]);
    assert_eq!(code, Some(3), "{out}\n{err}");
    assert!(
        out.contains("[ERR]") || err.contains("error"),
        "{out}\n{err}"
    );
    assert!(!out.contains(wrong) && !err.contains(wrong));
}

#[test]
fn an_unreachable_server_is_one_error_line_and_exit_3() {
    let port = free_port().to_string();
    let o = run(&[
        "cjk-watchdog",
        "--host",
        "http://127.0.0.1",
        "--port",
        &port,
        "--model",
        "m",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    assert!(out.contains("[ERR]"), "{out}");
}

#[test]
fn bad_flags_are_one_line_errors_with_exit_2() {
    for args in [
        &["cjk-watchdog", "--max-tokens", "0"][..],
        &["cjk-watchdog", "--port", "seventy"],
        &["cjk-watchdog", "--no-such-flag"],
    ] {
        let o = run(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("error:"), "{err}");
    }
    let o = run(&["cjk-watchdog", "--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains(env!("CARGO_PKG_VERSION")));
}

/// `cjk-watchdog --loop` against `s`, its output piped.
fn looping_watchdog(s: &Sim) -> Child {
    bin()
        .args([
            "cjk-watchdog",
            "--host",
            "127.0.0.1",
            "--port",
            &s.port.to_string(),
            "--max-tokens",
            "40",
            "--loop",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watchdog starts")
}

#[test]
fn ctrl_c_ends_a_clean_loop_with_130_and_a_summary() {
    let s = sim(0, None);
    let child = looping_watchdog(&s);
    // A clean scenario loops until stopped: let it run a few iterations.
    std::thread::sleep(Duration::from_secs(3));
    signal(&child, "-INT");
    let o = child.wait_with_output().expect("exits");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{out}{}", text(&o.stderr));
    assert!(out.contains("Iteration #2"), "{out}");
    assert!(out.contains("stopped: interrupted (Ctrl-C"), "{out}");
}

/// SIGTERM (what `kill`, systemd, Kubernetes send) stops the watchdog as
/// Ctrl-C does, and the simulator closes in order and exits 0 (both take
/// their signals from the one place every command shares).
#[test]
fn sigterm_stops_the_watchdog_and_the_simulator_in_order() {
    let mut s = sim(0, None);
    let child = looping_watchdog(&s);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "-TERM");
    let o = child.wait_with_output().expect("exits");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{out}{}", text(&o.stderr));
    assert!(out.contains("stopped: interrupted"), "{out}");
    signal(&s.child, "-TERM");
    let status = s.child.wait().expect("simulator exits");
    assert_eq!(
        status.code(),
        Some(0),
        "the simulator was killed, not stopped"
    );
}
