//! The fabric flags end to end: the reference's validation, the fabric-only
//! file that sends nothing to a server, a CPU fabric run before a simulator
//! benchmark, and a hanging helper that does not stop the benchmark.

mod common;

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;

use common::{assert_valid, run, text, tmp};
use serde_json::Value;

/// Small sizes: the measurement itself takes well under a second.
const SMALL: &[&str] = &[
    "--amd-fabric-size-mb",
    "2",
    "--amd-fabric-latency-mb",
    "1",
    "--amd-fabric-iters",
    "1",
    "--amd-fabric-threads",
    "1",
    "--amd-fabric-latency-iters",
    "10000",
    "--amd-fabric-max-nodes",
    "2",
];

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result file")).expect("JSON")
}

#[test]
fn out_of_bounds_fabric_values_are_one_line_with_exit_2() {
    for args in [
        &["--p2pmark-size-mb", "0"][..],
        &["--amd-fabric-only", "--amd-fabric-timeout", "0"],
        &["--p2pmark-allreduce-sizes-mb", "1,x"],
        // far above any machine's memory: refused before allocation
        &["--amd-fabric-only", "--amd-fabric-size-mb", "1000000000"],
    ] {
        let o = run(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: invalid --"), "{err}");
    }
    let err = text(&run(&["--amd-fabric-only", "--amd-fabric-size-mb", "1000000000"]).stderr);
    assert!(err.contains("MiB of memory is available"), "{err}");
}

#[test]
fn fabric_only_writes_the_fabric_file_and_contacts_no_server() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port().to_string();
    let (_d, out) = tmp("fabric.json");
    let mut args = vec![
        "--amd-fabric-only",
        "--p2pmark",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--output",
        out.to_str().expect("path"),
    ];
    args.extend_from_slice(SMALL);
    let o = run(&args);
    let stdout = text(&o.stdout);
    // no GPU peer-to-peer on CI: exit 4 says "not every diagnostic is ok"
    assert!(
        matches!(o.status.code(), Some(0 | 4)),
        "{stdout}\n{}",
        text(&o.stderr)
    );
    assert!(listener.accept().is_err(), "nothing may reach the server");
    let doc = read(&out);
    assert_eq!(doc["metadata"]["mode"], "p2pmark_amd_fabric_only");
    assert!(doc["nvidia_p2p_override"].is_object());
    assert_eq!(doc["amd_fabric"]["status"], "ok", "{}", doc["amd_fabric"]);
    assert!(
        doc["amd_fabric"]["data"]["read_gbps"][0][0]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
    let p2p = doc["p2pmark"]["status"].as_str().unwrap_or("");
    assert!(["unavailable", "ok"].contains(&p2p), "{p2p}");
    assert!(
        stdout.contains("AMD fabric: 2 MiB bw, threads=1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("NUMA fabric: CPU node -> memory node"),
        "{stdout}"
    );
    assert!(stdout.contains("P2P config: mode=all"), "{stdout}");
    // `report` prints a saved fabric-only file's report
    let o = run(&["report", out.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("NUMA fabric: CPU node -> memory node"));
}

#[test]
fn a_hanging_helper_times_out_and_the_benchmark_goes_on() {
    let (d, out) = tmp("r.json");
    let helper = d.path().join("hangs");
    std::fs::write(&helper, "#!/bin/sh\necho partial\nsleep 300\n").expect("script");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let o = run(&[
        "--sim",
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--amd-fabric",
        "--amd-fabric-bin",
        helper.to_str().expect("path"),
        "--amd-fabric-timeout",
        "0.5",
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let doc = read(&out);
    assert_valid(&doc);
    assert_eq!(doc["amd_fabric"]["status"], "timeout");
    assert_eq!(doc["metadata"]["amd_fabric_status"], "timeout");
    assert_eq!(doc["metadata"]["p2pmark_status"], "not_run");
    assert_eq!(doc["p2pmark"]["status"], "not_run");
    assert_eq!(
        doc["startup_diagnostics"]["amd_fabric"]["status"],
        "timeout"
    );
    assert!(doc["amd_fabric"]["topology"]["node_cpulists"].is_object());
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(1));
    let log = doc["event_log"].to_string();
    assert!(log.contains("startup fabric: amd_fabric timeout"), "{log}");
}

#[test]
fn compare_of_two_fabric_files_flags_the_pair_that_regressed() {
    let fixture = format!(
        "{}/../ldb-report/tests/fabric/amd_fabric_2s8n.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let block: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).expect("fixture")).expect("JSON");
    let file = |block: &Value| {
        serde_json::json!({
            "metadata": {"version": "x", "mode": "amd_fabric_only", "timestamp": "t"},
            "nvidia_p2p_override": {},
            "p2pmark": {"status": "not_run"},
            "amd_fabric": block,
        })
    };
    let mut slower = block.clone();
    let r = slower["data"]["read_gbps"][0][4].as_f64().expect("N0->N4");
    slower["data"]["read_gbps"][0][4] = serde_json::json!(r * 0.8);
    let (d, base) = tmp("base.json");
    let new = d.path().join("new.json");
    std::fs::write(&base, file(&block).to_string()).expect("base");
    std::fs::write(&new, file(&slower).to_string()).expect("new");
    let (b, n) = (base.to_str().expect("path"), new.to_str().expect("path"));
    let o = run(&["compare", b, n]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    let flagged: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("REGRESSION"))
        .collect();
    assert_eq!(flagged.len(), 1, "{stdout}");
    assert!(
        flagged[0].contains("N0->N4") && flagged[0].contains("read GB/s"),
        "{stdout}"
    );
    let o = run(&["compare", b, b]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
}

#[test]
fn the_native_p2p_without_a_driver_says_why_and_the_benchmark_goes_on() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--p2pmark",
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let doc = read(&out);
    assert_valid(&doc);
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(1));
    let p = &doc["p2pmark"];
    assert_eq!(p["binary"], "native", "{p}");
    if std::path::Path::new("/dev/nvidiactl").exists() {
        // a GPU machine: the status is whatever it measured, never a crash
        assert!(p["status"].is_string(), "{p}");
        return;
    }
    // no CUDA driver here: unavailable, the loader's reason naming libcuda
    assert_eq!(p["status"], "unavailable", "{p}");
    assert_eq!(doc["metadata"]["p2pmark_status"], "unavailable");
    let reason = p["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("the CUDA driver cannot be loaded (") && reason.contains("libcuda"),
        "{reason}"
    );
    assert!(stdout.contains("P2P config: mode=all"), "{stdout}");
    let log = doc["event_log"].to_string();
    assert!(log.contains("startup fabric: p2pmark unavailable"), "{log}");
}
