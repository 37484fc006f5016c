//! The external-helper path against helper scripts written by the test:
//! one prints the reference's JSON line, one exits non-zero, one hangs past
//! the timeout, one prints garbage, one is not executable. Each gives its
//! status; none panics or blocks past its timeout.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ldb_fabric::helper::{HelperRun, missing_binary_suggestion, run_helper};
use serde_json::Value;

fn script(dir: &Path, name: &str, body: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    p
}

fn run(bin: &Path, timeout: Duration) -> Value {
    let suggestion = missing_binary_suggestion("--amd-fabric-bin");
    run_helper(&HelperRun {
        bin,
        args: vec!["--size-mb".into(), "1".into()],
        timeout,
        suggestion: &suggestion,
        what: "amd_fabric",
    })
}

#[test]
fn each_helper_outcome_has_its_status() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let good = script(
        d,
        "good",
        r#"echo "starting"; echo '{"tool":"llm_amd_fabric","version":2,"numa_nodes":1,"args":"'"$*"'"}'"#,
        0o755,
    );
    let v = run(&good, Duration::from_secs(20));
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["returncode"], 0);
    assert_eq!(v["data"]["tool"], "llm_amd_fabric");
    assert_eq!(
        v["data"]["args"], "--size-mb 1",
        "the flags reach the helper"
    );
    assert_eq!(v["cmd"][1], "--size-mb");

    let fails = script(d, "fails", "echo 'no NUMA' >&2; exit 3", 0o755);
    let v = run(&fails, Duration::from_secs(20));
    assert_eq!(
        (v["status"].as_str(), v["returncode"].as_i64()),
        (Some("failed"), Some(3)),
        "{v}"
    );
    assert_eq!(v["stderr"], "no NUMA");

    let garbage = script(d, "garbage", "echo '{not json'", 0o755);
    let v = run(&garbage, Duration::from_secs(20));
    assert_eq!(v["status"], "failed", "{v}");
    assert!(
        v["parse_error"].as_str().unwrap_or("").contains("not JSON"),
        "{v}"
    );

    // the shell's child `sleep` holds the pipes too: the whole group dies
    let hangs = script(d, "hangs", "echo partial; sleep 300", 0o755);
    let start = Instant::now();
    let v = run(&hangs, Duration::from_millis(500));
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["timeout_seconds"], 0.5);
    assert_eq!(v["stdout"], "partial");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "the timeout was honoured"
    );

    let not_exec = script(d, "plain", "echo hi", 0o644);
    for missing in [not_exec, d.join("absent")] {
        let v = run(&missing, Duration::from_secs(20));
        assert_eq!(v["status"], "missing_binary", "{v}");
        let e = v["error"].as_str().unwrap_or("");
        assert!(e.contains(&missing.display().to_string()), "{e}");
        // The hint names the real options (this project has no tools/ to build).
        let hint = v["suggestion"].as_str().unwrap_or("");
        assert!(
            hint.contains("--amd-fabric-bin") && hint.contains("built-in"),
            "{hint}"
        );
        assert!(!hint.contains("make") && !hint.contains("tools/"), "{hint}");
    }
}
