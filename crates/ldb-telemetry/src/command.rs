//! Running external commands (`nvidia-smi`, `hostname`, `uname`) with a hard
//! time limit. A command that runs past its limit is killed; output is capped
//! so that a runaway program cannot fill memory.

use crate::error::TelemetryError;
use std::ffi::OsStr;
use std::io::Read;
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Most bytes kept from each of stdout and stderr.
pub const OUTPUT_CAP: u64 = 1 << 20;
/// How long to wait for the pipes to close once the process has ended (a
/// grandchild may keep them open).
const PIPE_GRACE: Duration = Duration::from_millis(300);

pub use ldb_core::document::CommandRecord;

/// A command's record read as its outcome.
pub trait CommandOutcome {
    /// `Ok(stdout)` for exit status 0, else the matching error.
    fn into_result(self) -> Result<String, TelemetryError>;
}

impl CommandOutcome for CommandRecord {
    fn into_result(self) -> Result<String, TelemetryError> {
        let program = self.cmd.first().cloned().unwrap_or_default();
        if self.not_found {
            return Err(TelemetryError::Spawn {
                program,
                reason: self.stderr,
            });
        }
        if self.timed_out {
            return Err(TelemetryError::Timeout {
                program,
                seconds: self.limit_s,
            });
        }
        if self.returncode != 0 {
            let detail = first_line(&self.stderr)
                .or_else(|| first_line(&self.stdout))
                .unwrap_or_default();
            return Err(TelemetryError::Failed {
                program,
                code: self.returncode,
                detail,
            });
        }
        Ok(self.stdout)
    }
}

fn first_line(s: &str) -> Option<String> {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
}

/// Runs `program args…` with stdin closed, killing it after `timeout`.
/// Never panics and never waits much longer than `timeout` (plus a short
/// grace for the pipes).
pub fn run_with_timeout<S: AsRef<OsStr>>(
    program: S,
    args: &[&str],
    timeout: Duration,
) -> CommandRecord {
    let program = program.as_ref();
    let mut record = CommandRecord {
        cmd: std::iter::once(program.to_string_lossy().into_owned())
            .chain(args.iter().map(|a| a.to_string()))
            .collect(),
        returncode: -1,
        limit_s: timeout.as_secs_f64(),
        ..CommandRecord::default()
    };
    let mut child = match ldb_sys::child::command(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            record.stderr = e.to_string();
            record.not_found = true;
            return record;
        }
    };
    let out_rx = child.stdout.take().map(spawn_reader);
    let err_rx = child.stderr.take().map(spawn_reader);
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                record.timed_out = true;
                break None;
            }
            Ok(None) => {
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                let _ = child.kill();
                record.stderr = e.to_string();
                break None;
            }
        }
    };
    let collect = |rx: Option<mpsc::Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(PIPE_GRACE).ok())
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .unwrap_or_default()
    };
    record.stdout = collect(out_rx);
    let stderr = collect(err_rx);
    if record.timed_out {
        record.stderr = format!("timed out after {:.3} s", timeout.as_secs_f64());
    } else if record.stderr.is_empty() {
        record.stderr = stderr;
    }
    if let Some(status) = status {
        record.returncode = status.code().unwrap_or(-1);
    }
    record
}

/// Reads a pipe to the end on its own thread (keeping at most
/// [`OUTPUT_CAP`] bytes) and sends what it read.
fn spawn_reader<R: Read + Send + 'static>(mut pipe: R) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut pipe).take(OUTPUT_CAP).read_to_end(&mut buf);
        let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        let _ = tx.send(buf);
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_captures() {
        let r = run_with_timeout(
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(5),
        );
        assert_eq!(
            (r.returncode, r.stdout.as_str(), r.stderr.as_str()),
            (3, "out", "err")
        );
        assert!(matches!(
            r.into_result(),
            Err(TelemetryError::Failed { code: 3, .. })
        ));
    }

    #[test]
    fn missing_program_is_reported() {
        let r = run_with_timeout(
            "/nonexistent/ldb-no-such-program",
            &[],
            Duration::from_secs(1),
        );
        assert!(r.not_found && r.returncode == -1);
        assert!(matches!(r.into_result(), Err(TelemetryError::Spawn { .. })));
    }

    #[test]
    fn hanging_program_is_killed_in_time() {
        let t = Instant::now();
        // The grandchild `sleep` keeps the pipes open after `sh` is killed.
        let r = run_with_timeout(
            "sh",
            &["-c", "echo partial; sleep 3; echo never"],
            Duration::from_millis(200),
        );
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        assert!(r.timed_out && r.returncode == -1);
        assert!(matches!(
            r.into_result(),
            Err(TelemetryError::Timeout { .. })
        ));
    }
}
