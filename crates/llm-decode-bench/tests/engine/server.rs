//! A real engine's server for one test, started and stopped by its script
//! (`scripts/vllm-server.sh`, `sglang-server.sh`, `llama-server.sh`: each
//! takes `path`, `start --port P …` and `stop --port P`, and reports
//! `healthy: pid N, log FILE` when the server answers).

use std::path::PathBuf;
use std::process::{Command, Output};

use ldb_core::prometheus::MetricSet;

use super::{free_port, root, text};

/// Runs `scripts/<script>` with `args`, and `env` for the server it starts.
pub fn script(script: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("bash")
        .arg(root().join("scripts").join(script))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("bash runs scripts/{script}: {e}"))
}

/// A server started for this test; stopped on drop, also on failure.
pub struct EngineServer {
    pub port: u16,
    /// The server's own log (the script's `log FILE`).
    pub log: PathBuf,
    script: &'static str,
}

impl EngineServer {
    /// Starts a server on a free port with the script's `start` arguments
    /// (`--port P` comes first) and `env`; `None` with a notice when the
    /// engine is not installed and this is not CI (under CI it must be: the
    /// test fails saying how to install it).
    pub fn start(
        script_name: &'static str,
        install: &str,
        start_args: &[&str],
        env: &[(&str, &str)],
    ) -> Option<EngineServer> {
        let path = script(script_name, &["path"], &[]);
        if !path.status.success() {
            let msg = format!("{script_name} finds no server: run {install} first");
            if std::env::var_os("CI").is_some() {
                panic!(
                    "{msg} (CI is set, so this test does not skip):\n{}",
                    text(&path.stderr)
                );
            }
            eprintln!("NOTICE: skipping a real-engine test: {msg}");
            return None;
        }
        let port = free_port();
        let p = port.to_string();
        let mut args = vec!["start", "--port", &p];
        args.extend_from_slice(start_args);
        // Built before the start so that a failed start still stops
        // whatever the script left running.
        let mut server = EngineServer {
            port,
            log: PathBuf::new(),
            script: script_name,
        };
        let out = script(script_name, &args, env);
        let err = text(&out.stderr);
        assert!(
            out.status.success(),
            "scripts/{script_name} start failed:\n{err}"
        );
        let log = err
            .lines()
            .find_map(|l| l.split_once(", log ").map(|(_, p)| p.trim().to_string()))
            .unwrap_or_else(|| panic!("no log path in the script's output:\n{err}"));
        server.log = PathBuf::from(log);
        Some(server)
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// GET with curl (the scripts need it anyway): the body of a 2xx answer.
    pub fn get(&self, path: &str) -> String {
        let url = self.url(path);
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "20", &url])
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "GET {url}: {}",
            text(&out.stderr).trim()
        );
        text(&out.stdout)
    }

    /// The server's `/metrics`, parsed.
    pub fn metrics(&self) -> MetricSet {
        MetricSet::parse(&self.get("/metrics"))
    }

    /// Bytes in the server's log so far (to read only what a run added).
    pub fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map_or(0, |m| m.len() as usize)
    }

    /// The server's log from byte `from` on.
    pub fn log_since(&self, from: usize) -> String {
        let log = std::fs::read(&self.log).unwrap_or_default();
        text(&log[from.min(log.len())..])
    }
}

impl Drop for EngineServer {
    fn drop(&mut self) {
        let port = self.port.to_string();
        let out = script(self.script, &["stop", "--port", &port], &[]);
        if !out.status.success() {
            eprintln!(
                "{} stop --port {port} failed: {}",
                self.script,
                text(&out.stderr)
            );
        }
    }
}
