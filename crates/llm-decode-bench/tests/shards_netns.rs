//! Shards on emulated separate hosts (docs/shards.md): three network
//! namespaces made by this test, joined by a bridge — the simulator and the
//! leader in one, a follower in each of the others, one of them with a
//! known test-only clock offset (`LDB_TEST_SHARD_CLOCK_OFFSET_S`) and, where
//! the kernel has netem, a delay on its link. Needs root (CI runs as root);
//! skips with a notice otherwise. Only addresses inside the namespaces are
//! used.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_llm-decode-bench");
/// The follower's clock runs this far ahead of the leader's (test only).
const OFFSET_S: f64 = 0.75;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The namespaces and the bridge; removed on drop.
struct Net {
    names: [String; 3],
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in &self.names {
            ip(&["netns", "del", n]);
        }
    }
}

/// `ns0` holds bridge `br0` at 10.213.7.1; `ns1`, `ns2` hang off it at .2, .3.
fn make_net() -> Option<Net> {
    let pid = std::process::id();
    let names = [0, 1, 2].map(|i| format!("ldbsh{pid}n{i}"));
    let net = Net {
        names: names.clone(),
    };
    for n in &names {
        if !ip(&["netns", "add", n]) {
            return None;
        }
    }
    let ex = |ns: &str, args: &[&str]| {
        let mut all = vec!["-n", ns];
        all.extend_from_slice(args);
        ip(&all)
    };
    let ok = ex(&names[0], &["link", "add", "br0", "type", "bridge"])
        && ex(&names[0], &["addr", "add", "10.213.7.1/24", "dev", "br0"])
        && ex(&names[0], &["link", "set", "br0", "up"])
        && ex(&names[0], &["link", "set", "lo", "up"])
        && (1..3).all(|i| {
            let (a, b) = (format!("s{i}"), format!("p{i}"));
            ex(
                &names[0],
                &["link", "add", &a, "type", "veth", "peer", "name", &b],
            ) && ex(&names[0], &["link", "set", &b, "netns", &names[i]])
                && ex(&names[0], &["link", "set", &a, "master", "br0"])
                && ex(&names[0], &["link", "set", &a, "up"])
                && ex(
                    &names[i],
                    &["addr", "add", &format!("10.213.7.{}/24", i + 1), "dev", &b],
                )
                && ex(&names[i], &["link", "set", &b, "up"])
                && ex(&names[i], &["link", "set", "lo", "up"])
        });
    ok.then_some(net)
}

/// netem delay on a follower's link, when the kernel has it.
fn add_delay(ns: &str, dev: &str) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem",
        ])
        .args(["delay", "1ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn in_ns(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, BIN]).env("COLUMNS", "140");
    c
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file")).expect("JSON")
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn shards_in_separate_namespaces_align_their_windows_through_a_known_clock_offset() {
    let Some(net) = make_net() else {
        eprintln!("NOTICE: cannot make network namespaces (needs root and `ip`); test skipped");
        return;
    };
    let delayed = (1..3).all(|i| add_delay(&net.names[i], &format!("p{i}")));
    if !delayed {
        eprintln!("NOTICE: netem is not available in this kernel; the links carry no added delay");
    }
    let (dir, out) = common::tmp("r.json");
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, common::paced_50_tok_s()).expect("scenario");
    let mut sim = in_ns(&net.names[0])
        .args(["sim", "--scenario"])
        .arg(&scenario)
        .args(["--host", "0.0.0.0", "--port", "18000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("simulator");
    let flags = [
        "--host",
        "http://10.213.7.1:18000",
        "--wait-for-server",
        "30",
        "--concurrency",
        "9",
        "--contexts",
        "0",
        "--skip-prefill",
        "--duration",
        "4",
        "--decode-warmup-seconds",
        "0",
        "--max-tokens",
        "2000",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--shards",
        "3",
        "--coordinator",
        "10.213.7.1:29517",
        "--shard-join-timeout",
        "60",
    ];
    let spawn = |i: usize, offset: Option<f64>| {
        let mut c = in_ns(&net.names[i]);
        c.args(flags)
            .args(["--shard-index", &i.to_string(), "--output"])
            .arg(&out)
            .env("LDB_SHARD_SECRET", "6e65746e732d736563726574a1b2c3d4")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(o) = offset {
            c.env("LDB_TEST_SHARD_CLOCK_OFFSET_S", o.to_string());
        }
        c.spawn().expect("shard")
    };
    let kids = [spawn(0, None), spawn(1, None), spawn(2, Some(OFFSET_S))];
    let t0 = Instant::now();
    let outs: Vec<Output> = kids
        .into_iter()
        .map(|k| k.wait_with_output().expect("shard ends"))
        .collect();
    let _ = sim.kill();
    let _ = sim.wait();
    let log: String = outs
        .iter()
        .map(|o| format!("{}\n{}", common::text(&o.stdout), common::text(&o.stderr)))
        .collect();
    assert!(t0.elapsed() < Duration::from_secs(180), "bounded");
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{log}");
    }
    let cell = &read(&out)["results"][0];
    assert_eq!(cell["status"], "ok", "{cell}");
    let (client, server) = (
        num(cell, "client_output_tokens"),
        num(cell, "server_output_tokens"),
    );
    assert!(
        (client / server - 1.0).abs() <= 0.01,
        "client {client} vs simulator {server}"
    );
    let shards = cell["shards"].as_array().expect("shards");
    for (i, truth) in [(1, 0.0), (2, OFFSET_S)] {
        let (off, unc) = (
            num(&shards[i], "clock_offset_s"),
            num(&shards[i], "clock_uncertainty_s"),
        );
        eprintln!("shard {i}: offset {off:.6} ± {unc:.6} s (true {truth})");
        assert!(
            (off - truth).abs() <= unc + 1e-6,
            "shard {i}: {off} ± {unc}, true {truth}"
        );
    }
    // The offset follower's window, on its own clock, is the leader's moved
    // by the measured offset: one window.
    let rec = read(&dir.path().join("r.shard-2.json"));
    let w = &rec["cells"][0]["window_unix"];
    let start = w[0].as_f64().expect("window start");
    let lead = num(cell, "window_start_unix");
    let unc = num(&shards[2], "clock_uncertainty_s");
    assert!(
        (start - OFFSET_S - lead).abs() <= unc + 1e-3,
        "follower window {start} − {OFFSET_S} vs leader {lead}"
    );
}
