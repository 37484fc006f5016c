//! An external fabric helper (`--p2pmark-bin`, `--amd-fabric-bin`): run it
//! with a timeout and read the JSON object on the last line of its output,
//! as the reference does. Every outcome is a result object with a status;
//! none of them stops the benchmark that follows.
//!
//! The helper is started as the leader of its own process group, so that a
//! timeout kills its children too (a shell script's `sleep` would otherwise
//! keep our pipes open).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use ldb_core::document::FabricStatus;

/// Output kept per stream; a helper printing more is cut (the JSON line is
/// the last one, so a cut stdout is reported as a parse failure).
const KEEP_BYTES: usize = 4 << 20;

/// How often a running helper is checked for exit.
const POLL: Duration = Duration::from_millis(20);

/// What to run.
#[derive(Debug, Clone)]
pub struct HelperRun<'a> {
    /// The helper's path.
    pub bin: &'a Path,
    /// Its arguments (the reference's flag names).
    pub args: Vec<String>,
    /// Killed after this long.
    pub timeout: Duration,
    /// What to do about a missing binary ([`missing_binary_suggestion`]).
    pub suggestion: &'a str,
    /// Short name for messages (`p2pmark`, `amd_fabric`).
    pub what: &'a str,
}

/// The hint recorded with a missing or non-executable helper named by
/// `flag` (`--amd-fabric-bin`, `--p2pmark-bin`). This project ships no helper
/// to build (the reference's `tools/…` folders are not part of it): the user
/// either fixes the path or drops the flag, and the built-in measurement runs.
pub fn missing_binary_suggestion(flag: &str) -> String {
    format!(
        "check the path given to {flag} (an executable that prints the reference's JSON \
         line), or leave {flag} out to run the built-in measurement"
    )
}

/// Is `path` a regular file with an execute bit?
fn executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Run the helper; the result object of the reference (`status`, `binary`,
/// `cmd`, `returncode`, `stdout`, `stderr`, `elapsed_seconds`, `data`,
/// `parse_error`; `timeout_seconds` on timeout; `error` when it could not
/// start; `error` + `suggestion` for a missing binary).
pub fn run_helper(h: &HelperRun<'_>) -> Value {
    let binary = h.bin.display().to_string();
    let mut out = Map::new();
    out.insert("binary".into(), json!(binary));
    if !executable(h.bin) {
        out.insert("status".into(), json!(FabricStatus::MissingBinary.as_str()));
        out.insert(
            "error".into(),
            json!(format!(
                "{} binary not found or not executable: {binary}",
                h.what
            )),
        );
        out.insert("suggestion".into(), json!(h.suggestion));
        return order(out);
    }
    let mut cmd_line = vec![binary.clone()];
    cmd_line.extend(h.args.iter().cloned());
    out.insert("cmd".into(), json!(cmd_line));
    let started = Instant::now();
    let child = ldb_sys::child::command(h.bin)
        .args(&h.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            out.insert("status".into(), json!(FabricStatus::Error.as_str()));
            out.insert("error".into(), json!(format!("cannot start {binary}: {e}")));
            return order(out);
        }
    };
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    let exit = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() >= h.timeout => break None,
            Ok(None) => std::thread::sleep(POLL),
            Err(_) => break None,
        }
    };
    if exit.is_none() {
        let _ = ldb_sys::kill_process_group(child.id());
        let _ = child.kill();
        let _ = child.wait();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (so, se) = (stdout.finish(), stderr.finish());
    out.insert("stdout".into(), json!(so));
    out.insert("stderr".into(), json!(se));
    out.insert("elapsed_seconds".into(), json!(round3(elapsed)));
    let Some(status) = exit else {
        out.insert("status".into(), json!(FabricStatus::Timeout.as_str()));
        out.insert("timeout_seconds".into(), json!(h.timeout.as_secs_f64()));
        return order(out);
    };
    let code = status.code().unwrap_or(-1);
    out.insert("returncode".into(), json!(code));
    let (data, parse_error) = match last_json_line(&so) {
        Ok(v) => (v, Value::Null),
        Err(e) => (Value::Null, json!(e)),
    };
    let ok = code == 0 && !data.is_null();
    out.insert("data".into(), data);
    out.insert("parse_error".into(), parse_error);
    let st = if ok {
        FabricStatus::Ok
    } else {
        FabricStatus::Failed
    };
    out.insert("status".into(), json!(st.as_str()));
    order(out)
}

/// `status` first, the rest as inserted.
fn order(mut m: Map<String, Value>) -> Value {
    let mut o = Map::new();
    if let Some(s) = m.remove("status") {
        o.insert("status".into(), s);
    }
    o.extend(m);
    Value::Object(o)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The last non-blank line of `stdout`, which must be a JSON object.
pub fn last_json_line(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("the helper printed nothing on stdout")?;
    match serde_json::from_str::<Value>(line.trim()) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the helper's last line is JSON but not an object".into()),
        Err(e) => Err(format!("the helper's last line is not JSON: {e}")),
    }
}

/// A pipe read to its end on a thread, into a buffer capped at
/// [`KEEP_BYTES`] (the rest is read and dropped so the helper never blocks).
struct Collector {
    buf: Arc<Mutex<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> Collector {
    let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
    let thread = pipe.map(|mut p| {
        let buf = buf.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = p.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut b = buf.lock().unwrap_or_else(|e| e.into_inner());
                let room = KEEP_BYTES.saturating_sub(b.len());
                b.extend_from_slice(&chunk[..n.min(room)]);
            }
        })
    });
    Collector { buf, thread }
}

impl Collector {
    /// The text read so far, once the pipe closed (or after a short grace
    /// when something still holds it open).
    fn finish(mut self) -> String {
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        let b = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&b).trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_line_is_the_last_non_blank_line() {
        let v = last_json_line("log\n{\"tool\":\"x\"}\n\n").expect("json");
        assert_eq!(v["tool"], "x");
        assert!(last_json_line("").is_err());
        assert!(last_json_line("[1]").is_err());
        assert!(last_json_line("garbage {").is_err());
    }
}
