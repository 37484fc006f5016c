//! What the end-to-end tests against real engines share: running the
//! benchmark binary with a time limit, reading its result, the schema check
//! and small accessors of result cells.

#![allow(dead_code, reason = "each engine's test uses a different subset")]

pub mod prefix;
pub mod server;
pub mod ttft;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A free loopback port for a test server.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Run the benchmark binary against 127.0.0.1:`port` with the test's `fixed`
/// flags and `args`; returns its exit status, result JSON and output.
pub fn run_bench(
    port: u16,
    dir: &Path,
    name: &str,
    limit: Duration,
    fixed: &[&str],
    args: &[&str],
) -> (ExitStatus, Value, String) {
    let out_json = dir.join(format!("{name}.json"));
    let out_log = dir.join(format!("{name}.log"));
    let host = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_llm-decode-bench"))
        .args(["--display-mode", "plain", "--host", &host])
        .args(fixed)
        .args(["--no-calibration-cache", "--output"])
        .arg(&out_json)
        .args(args)
        .current_dir(dir)
        .env("COLUMNS", "140")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_log).expect("log file"))
        .stderr(Stdio::from(
            std::fs::File::options()
                .append(true)
                .open(&out_log)
                .expect("log file"),
        ))
        .spawn()
        .expect("benchmark binary starts");
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "run {name} did not finish in {limit:?}:\n{}",
                tail(&out_log)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("run {name}: {status} in {:.0?}", t0.elapsed());
    let mut output = String::new();
    std::fs::File::open(&out_log)
        .and_then(|mut f| f.read_to_string(&mut output))
        .expect("read the run's output");
    let doc = std::fs::read_to_string(&out_json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("run {name} wrote no result JSON:\n{}", tail(&out_log)));
    (status, doc, output)
}

pub fn tail(p: &Path) -> String {
    last_lines(&std::fs::read_to_string(p).unwrap_or_default(), 60)
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn schema() -> Value {
    let p = root().join("docs/result-schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("schema file")).expect("schema JSON")
}

pub fn assert_valid(name: &str, doc: &Value) {
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "run {name}: schema errors:\n{}",
        errors.join("\n")
    );
}

pub fn f(v: &Value, key: &str) -> f64 {
    v.get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

pub fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

pub fn cell(doc: &Value, c: u64, ctx: u64) -> &Value {
    doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["concurrency"] == c && r["context_tokens"] == ctx)
        .unwrap_or_else(|| panic!("no cell C={c} ctx={ctx}"))
}

pub fn within(value: f64, reference: f64, tol: f64) -> bool {
    reference > 0.0 && (value / reference - 1.0).abs() <= tol
}
