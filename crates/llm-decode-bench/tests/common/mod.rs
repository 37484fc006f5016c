//! What the binary's end-to-end tests against the simulator share: running
//! the binary, reading its output, checking a result against the schema, a
//! free loopback port and a temporary folder. (The tests against real
//! engines share `engine/mod.rs`.)

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The binary, with a fixed terminal width so reports do not depend on the caller's.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_llm-decode-bench"));
    c.env("COLUMNS", "140");
    c
}

/// Run the binary to its end.
pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    bin().args(args).output().expect("binary runs")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The result file's JSON schema (docs/result-schema.json).
pub fn schema() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/result-schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("schema file")).expect("schema JSON")
}

/// Fail with every schema error of `doc`.
pub fn assert_valid(doc: &Value) {
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "schema errors:\n{}", errors.join("\n"));
}

/// Run the binary with `args` (which write the result to `out`), fail with
/// its output unless it exits 0, and return the result, checked against the
/// schema.
pub fn run_to_result<S: AsRef<std::ffi::OsStr>>(args: &[S], out: &Path) -> Value {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out).expect("result")).expect("JSON");
    assert_valid(&doc);
    doc
}

/// A number of a result, or a failure naming the value.
pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A loopback port nothing listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// `llm-decode-bench sim` (quickstart) as its own process on `port`.
pub fn spawn_sim(port: u16) -> Child {
    bin()
        .args([
            "sim",
            "--scenario",
            "quickstart",
            "--port",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("simulator starts")
}

/// `name` inside a new temporary folder (kept while the guard lives).
pub fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join(name);
    (dir, p)
}

/// Send `sig` (e.g. `-TERM`) to a child process.
pub fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(st.success(), "kill {sig} {}", child.id());
}

/// A vLLM simulator scenario whose every stream makes one token per
/// `step_s` (one token per chunk) with instant prefill, up to
/// `max_running` streams in a KV cache of `num_blocks` 256-token blocks: a
/// known truth (1 / `step_s` tok/s a stream) for the shard and scale tests.
pub fn paced_scenario(step_s: f64, max_running: u32, num_blocks: u64) -> String {
    format!(
        r#"
name = "paced"
description = "vLLM personality, {step_s} s step, instant prefill (paced tests)"
personality = "vllm"
model = "sim-paced"
max_model_len = 1048576
seed = 1

[scheduler]
max_running = {max_running}
prefill_tok_s = 1.0e12
prefill_chunk_tokens = 1048576
stream_interval = 1

[step_time]
base_s = {step_s}

[kv]
block_size = 256
num_blocks = {num_blocks}
cp = 1
prefix_caching = true

[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4

[server]
created = 1700000000
"#
    )
}

/// The shard tests' simulator: every stream 50 tok/s (a 20 ms step).
pub fn paced_50_tok_s() -> String {
    paced_scenario(0.02, 256, 65536)
}

/// Wait (at most 30 s) until something accepts connections on loopback
/// `port`: a simulator just started.
pub fn wait_listening(port: u16) {
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "nothing listens on port {port} after 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The shard tests' paced simulator ([`paced_50_tok_s`]) as its own
/// process; killed on drop.
pub struct Sim {
    child: Child,
    /// Its base URL.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sim() -> Sim {
    let dir = tempfile::tempdir().expect("tmp");
    let scenario = dir.path().join("shard-paced.toml");
    std::fs::write(&scenario, paced_50_tok_s()).expect("scenario");
    sim_serving(dir, &scenario)
}

/// `llm-decode-bench sim` serving the scenario file `scenario` (kept in
/// `dir` for the process's life) on a free port, once it listens.
pub fn sim_serving(dir: tempfile::TempDir, scenario: &std::path::Path) -> Sim {
    let port = free_port();
    let child = bin()
        .args(["sim", "--scenario"])
        .arg(scenario)
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("simulator starts");
    wait_listening(port);
    Sim {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// Wait for a child with a bound (a hang fails the test instead of CI).
pub fn wait(child: &mut Child, limit: std::time::Duration) -> Option<i32> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("a shard did not end within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The join secret the coordinated-shard tests share (128 bits of hex).
pub const SHARD_SECRET: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// One shard of a run as a process joining through `coordinator`, its
/// result in `dir/r.json`, stdout and stderr in `dir/shard-INDEX.{out,err}`.
pub fn shard(
    dir: &Path,
    flags: &[String],
    shards: u32,
    index: u32,
    coordinator: &str,
    extra: &[&str],
) -> Child {
    let log = |k: &str| std::fs::File::create(dir.join(format!("shard-{index}.{k}"))).expect("log");
    bin()
        .args(flags)
        .args([
            "--shards",
            &shards.to_string(),
            "--shard-index",
            &index.to_string(),
        ])
        .args(["--coordinator", coordinator, "--shard-join-timeout", "60"])
        .args(["--output"])
        .arg(dir.join("r.json"))
        .args(extra)
        .env("LDB_SHARD_SECRET", SHARD_SECRET)
        .stdout(log("out"))
        .stderr(log("err"))
        .spawn()
        .expect("shard starts")
}

/// `n` shard processes with `flags` through one coordinator.
pub fn start_shards(dir: &Path, flags: &[String], n: u32) -> Vec<Child> {
    let coord = format!("127.0.0.1:{}", free_port());
    (0..n)
        .map(|i| shard(dir, flags, n, i, &coord, &[]))
        .collect()
}

/// Every shard's stdout and stderr, for a failure's message.
pub fn shard_logs(dir: &Path, n: u32) -> String {
    (0..n)
        .map(|i| {
            let r = |k: &str| {
                std::fs::read_to_string(dir.join(format!("shard-{i}.{k}"))).unwrap_or_default()
            };
            format!("--- shard {i}\n{}\n{}", r("out"), r("err"))
        })
        .collect()
}
