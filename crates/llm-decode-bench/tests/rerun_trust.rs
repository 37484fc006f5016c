//! Issue 34, item 2: a result file from someone else never acts on its own
//! (docs/security.md, "Files never act on their own"). `rerun` of a file
//! recording a helper program, a local prompt file, output paths, a
//! listening port, a foreign server and a foreign `--metrics-url` runs no
//! program, opens no such file, opens no port, and loopback listeners
//! standing in for the foreign hosts see no request and no key; `report`
//! and `compare` of the same file act on nothing it names.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bin, text};
use serde_json::{Value, json};

/// The key in the environment that must not reach a host the file chose.
const KEY: &str = "sk-rerun-trust-test-0123456789abcdef";

/// A loopback server standing in for a stranger's host: it keeps every
/// request head it gets and answers 401, so a run that does contact it
/// ends at once (exit 3) instead of waiting.
struct Foreign {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Foreign {
    fn start() -> Foreign {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (heads.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((sock, _)) => h.lock().expect("lock").push(answer_401(sock)),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Foreign { url, heads, stop }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("lock").clone()
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Read a request head (what arrived within a second), answer 401.
fn answer_401(mut sock: TcpStream) -> String {
    sock.set_nonblocking(false).expect("blocking");
    sock.set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let _ = sock
        .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    String::from_utf8_lossy(&got).into_owned()
}

/// A result file recording `config` (what `rerun` reads back).
fn result_file(dir: &Path, config: Value) -> PathBuf {
    let path = dir.join("theirs.json");
    let doc = json!({
        "metadata": {"version": "0.1.0", "schema_version": 1, "config": config},
        "results": []
    });
    std::fs::write(&path, doc.to_string()).expect("write result");
    path
}

/// A helper program that leaves a mark when it runs.
fn helper(dir: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (script, mark) = (dir.join("helper.sh"), dir.join("helper-ran"));
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch '{}'\necho '{{}}'\n", mark.display()),
    )
    .expect("write helper");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (script, mark)
}

/// The helper's mark is absent and none of the named files exists.
fn nothing_ran_nor_was_written(mark: &Path, named: &[PathBuf]) {
    assert!(!mark.exists(), "a recorded helper program ran");
    for p in named {
        assert!(!p.exists(), "{} was written", p.display());
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn rerun_of_a_strangers_file_runs_no_program_writes_nothing_it_names_and_contacts_no_other_host() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (script, mark) = helper(d);
    let metrics = Foreign::start();
    let listen = TcpListener::bind("127.0.0.1:0").expect("bind");
    let listen_addr = listen.local_addr().expect("addr").to_string();
    drop(listen);
    let named = [
        "their.html",
        "their.jsonl",
        "their-cache.json",
        "their.json",
    ]
    .map(|n| d.join(n));
    let r = result_file(
        d,
        json!({
            "sim": "quickstart", "concurrency": "1", "contexts": "0", "max-tokens": 32,
            "duration": 1, "decode-warmup-seconds": 0, "skip-prefill": true,
            "display-mode": "plain", "no-hw-monitor": true,
            "p2pmark": true, "p2pmark-bin": s(&script), "amd-fabric-bin": s(&script),
            "html": s(&named[0]), "requests-jsonl": s(&named[1]),
            "calibration-cache": s(&named[2]), "output": s(&named[3]),
            "metrics-url": metrics.url, "metrics-listen": listen_addr,
        }),
    );
    let mut child = bin()
        .args(["rerun", &s(&r)])
        .env("LLM_BENCH_API_KEY", KEY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // while the run lasts, the recorded --metrics-listen port stays closed
    let mut listened = false;
    while child.try_wait().expect("wait").is_none() {
        listened |= TcpStream::connect(&listen_addr).is_ok();
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().expect("ends");
    let err = text(&o.stderr);
    nothing_ran_nor_was_written(&mark, &named);
    assert!(d.join("theirs-rerun.json").exists(), "{err}");
    assert!(!listened, "the recorded --metrics-listen port was opened");
    assert!(metrics.heads().is_empty(), "{:?}", metrics.heads());
    assert_eq!(o.status.code(), Some(0), "{err}");
    // each is named with its reason before the run, then the command line
    for (flag, why) in [
        ("--p2pmark-bin=", "runs a program"),
        ("--html=", "writes a local file"),
        (
            "--metrics-url=",
            "contacts an endpoint other than the server",
        ),
        ("--metrics-listen=", "opens a listening port"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("rerun: left out") && l.contains(flag) && l.contains(why)),
            "{flag}: {err}"
        );
    }
    let command = err
        .lines()
        .find(|l| l.starts_with("rerun: running: "))
        .expect("the command line is printed");
    assert!(command.contains("--concurrency=1") && !command.contains("helper.sh"));
    assert!(!err.contains(KEY));
}

#[test]
fn a_strangers_file_cannot_choose_the_server_nor_send_it_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let theirs = Foreign::start();
    let r = result_file(
        dir.path(),
        json!({"host": theirs.url, "metrics-url": theirs.url, "concurrency": "1"}),
    );
    // the recorded server is not contacted: one line, exit 2
    let o = bin()
        .args(["rerun", &s(&r), "--dry-run"])
        .env("LLM_BENCH_API_KEY", KEY)
        .output()
        .expect("runs");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("does not choose the server"), "{err}");
    // a server the user names (here the simulator) is measured instead; the
    // recorded --metrics-url is still left out
    let o = bin()
        .args(["rerun", &s(&r), "--sim", "--dry-run"])
        .env("LLM_BENCH_API_KEY", KEY)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        theirs.heads().is_empty(),
        "the stranger's host was contacted: {:?}",
        theirs.heads()
    );
    // with the opt-in, the file is trusted: its server gets the request, but
    // never the key from the environment
    let o = bin()
        .args(["rerun", "--trust-recorded-flags", &s(&r), "--dry-run"])
        .env("LLM_BENCH_API_KEY", KEY)
        .output()
        .expect("runs");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("LLM_BENCH_API_KEY is not sent"), "{err}");
    let heads = theirs.heads();
    assert!(!heads.is_empty() && !heads.iter().any(|h| h.contains(KEY)));
    // only a key typed on this command line goes there
    let o = bin()
        .args(["rerun", "--trust-recorded-flags", &s(&r), "--dry-run"])
        .args(["--api-key", KEY])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(theirs.heads().iter().any(|h| h.contains(KEY)));
}

#[test]
fn rerun_does_not_open_a_recorded_prompt_file() {
    let dir = tempfile::tempdir().expect("dir");
    // a FIFO: opening it for reading is seen by a writer's non-blocking open
    let fifo = dir.path().join("credentials");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let r = result_file(
        dir.path(),
        json!({"sim": "quickstart", "completion-stats": true, "prompt-file": s(&fifo)}),
    );
    let mut child = bin()
        .args(["rerun", &s(&r)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut opened = false;
    for _ in 0..600 {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        opened |= reader_is_waiting(&fifo);
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let o = child.wait_with_output().expect("ends");
    let err = text(&o.stderr);
    assert!(!opened, "the recorded --prompt-file was opened: {err}");
    // the mode then lacks its prompt: a one-line refusal, nothing sent
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("left out --prompt-file=") && err.contains("reads a local file"),
        "{err}"
    );
}

/// True when some process has the FIFO open for reading (a writer's
/// non-blocking open succeeds only then); the writer closes at once.
fn reader_is_waiting(fifo: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK on Linux
    const O_NONBLOCK: i32 = 0o4000;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo)
        .is_ok()
}

#[test]
fn report_and_compare_act_on_nothing_a_file_names() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (script, mark) = helper(d);
    let theirs = Foreign::start();
    let named = ["their.html", "their.jsonl", "their.csv"].map(|n| d.join(n));
    let r = result_file(
        d,
        json!({
            "host": theirs.url, "metrics-url": theirs.url, "p2pmark-bin": s(&script),
            "html": s(&named[0]), "requests-jsonl": s(&named[1]), "output": s(&named[2]),
        }),
    );
    for args in [
        vec!["report".to_string(), s(&r)],
        vec!["compare".to_string(), s(&r), s(&r)],
    ] {
        let o = bin().args(&args).output().expect("runs");
        assert!(o.status.code().is_some(), "{args:?} was killed");
    }
    nothing_ran_nor_was_written(&mark, &named);
    assert!(theirs.heads().is_empty(), "{:?}", theirs.heads());
}
