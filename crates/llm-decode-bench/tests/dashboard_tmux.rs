//! End-to-end test of the live dashboard inside tmux.
//!
//! Runs the binary against the built-in simulator in screen mode inside a
//! detached tmux session of a fixed size (the pane is a real tty), reads the
//! screen with `tmux capture-pane`, presses `q` once the first cell is done,
//! and checks the exit code, the partial report left on the normal screen and
//! the saved JSON.
//!
//! Without tmux the test prints a notice and passes, except when `CI` is set:
//! then a missing tmux is a failure (CI must install it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Pane size: wide enough for the wide layout.
const COLS: u16 = 160;
const ROWS: u16 = 45;
/// Upper bound for the whole test.
const BUDGET: Duration = Duration::from_secs(85);
const POLL: Duration = Duration::from_millis(200);

/// A tmux server on its own socket; killed on drop, whatever happened.
struct Tmux {
    /// Socket path inside the test's temporary directory, so it never
    /// touches other tmux servers and is removed with the directory.
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        // Own socket and no user configuration; never talk to the tmux we
        // may be running inside of.
        c.arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .env_remove("TMUX");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("tmux {args:?}: {e}"))
    }

    /// The pane, including the scrollback (`-S -`) so that lines scrolled
    /// off the top of the normal screen are kept.
    fn capture(&self, with_history: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "ldb"];
        if with_history {
            args.extend(["-S", "-"]);
        }
        let out = self.run(&args);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Single-quote `p` for `sh`.
fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Poll `probe` until it returns `Some`, or panic with `what` and the last
/// screen once `deadline` has passed.
fn wait_for<T>(
    deadline: Instant,
    what: &str,
    tmux: &Tmux,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    loop {
        if let Some(v) = probe() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out waiting for {what}; the pane shows:\n{}",
                tmux.capture(true)
            );
        }
        std::thread::sleep(POLL);
    }
}

#[test]
fn dashboard_q_stops_with_partial_report_and_json() {
    if !tmux_available() {
        if std::env::var_os("CI").is_some() {
            panic!("tmux is not installed, but CI is set: install tmux (apt-get install -y tmux)");
        }
        eprintln!("notice: tmux is not installed; skipping the dashboard end-to-end test");
        return;
    }
    let deadline = Instant::now() + BUDGET;
    let dir = tempfile::tempdir().expect("tempdir");
    let json: PathBuf = dir.path().join("r.json");
    let rc_file: PathBuf = dir.path().join("rc");
    let bin = Path::new(env!("CARGO_BIN_EXE_llm-decode-bench"));

    // Small matrix, no decode warmup cell (so the first `cell done` is a
    // real cell); the shell keeps the pane alive after the binary exits so
    // that its final output can still be read.
    let script = format!(
        "{bin} --sim --concurrency 1,2 --contexts 0 --duration 3 \
         --decode-warmup-seconds 0 --no-hw-monitor --display-mode screen \
         --output {json}; echo $? > {rc}; exec sleep 300",
        bin = sh_quote(bin),
        json = sh_quote(&json),
        rc = sh_quote(&rc_file),
    );
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    let cols = COLS.to_string();
    let rows = ROWS.to_string();
    let out = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "ldb",
        "-x",
        &cols,
        "-y",
        &rows,
        "-c",
        &dir.path().display().to_string(),
        &format!("sh -c {}", sh_quote(Path::new(&script))),
    ]);
    assert!(
        out.status.success(),
        "tmux new-session failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 1. The dashboard is up: header with the simulator's model, the panels.
    let screen = wait_for(deadline, "the dashboard", &tmux, || {
        let s = tmux.capture(false);
        (s.contains("sim-quickstart-8b") && s.contains("EVENTS") && s.contains("DECODE"))
            .then_some(s)
    });
    assert!(screen.contains("llm-decode-bench"), "no title:\n{screen}");
    assert!(
        screen.contains("simulator: quickstart"),
        "no server:\n{screen}"
    );
    assert!(screen.contains("q stop"), "no key hints:\n{screen}");
    let first = screen.lines().next().unwrap_or_default();
    assert!(
        first.chars().count() <= usize::from(COLS),
        "wider than the pane: {first:?}"
    );

    // 2. The first cell is done.
    wait_for(deadline, "the first cell to finish", &tmux, || {
        tmux.capture(false)
            .contains("cell done C=1 ctx=0")
            .then_some(())
    });
    assert!(
        !rc_file.exists(),
        "the run ended before q was pressed:\n{}",
        tmux.capture(true)
    );

    // 3. q stops the run gracefully.
    let out = tmux.run(&["send-keys", "-t", "ldb", "q"]);
    assert!(out.status.success(), "tmux send-keys failed");
    let rc: i32 = wait_for(deadline, "the binary to exit", &tmux, || {
        let s = std::fs::read_to_string(&rc_file).ok()?;
        s.trim().parse().ok()
    });
    let pane = tmux.capture(true);
    assert_eq!(rc, 130, "exit code after q; the pane shows:\n{pane}");
    assert!(
        pane.contains("Interrupted"),
        "no interruption notice:\n{pane}"
    );
    assert!(
        pane.contains("Aggregate"),
        "no aggregate table in the partial report:\n{pane}"
    );
    assert!(pane.contains("Results saved to"), "no save line:\n{pane}");
    // The alternate screen is gone: the dashboard's panels are not on the
    // normal screen.
    assert!(
        !pane.contains("╭ EVENTS"),
        "dashboard left on screen:\n{pane}"
    );

    // 4. The saved JSON holds the partial run.
    let text = std::fs::read_to_string(&json).expect("result JSON written");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("result JSON parses");
    assert_eq!(
        doc["metadata"]["run_status"], "interrupted",
        "metadata.run_status"
    );
    let results = doc["results"].as_array().expect("results array");
    assert!(!results.is_empty(), "no finished cell in the JSON");
    assert_eq!(results[0]["concurrency"], 1);
}
