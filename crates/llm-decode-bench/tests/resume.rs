//! `--resume`, signals and the output-path check, end to end against the
//! simulator: a run killed with SIGKILL and resumed ends with the same cells
//! as one that was never stopped; carried cells keep their bytes; a file that
//! cannot be continued is refused in one line and left as it was; SIGTERM and
//! SIGHUP stop like Ctrl-C; an output path that cannot be written fails before
//! any request.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};

use common::{assert_valid, bin, free_port, signal, spawn_sim, text, tmp};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A small, fast matrix on the in-process simulator: four cells, one
/// integrated prefill row (1k), one second of window each, no decode warmup.
fn matrix_args(out: &Path) -> Vec<String> {
    [
        "--sim",
        "--concurrency",
        "1,2",
        "--contexts",
        "0,1k",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--max-tokens",
        "256",
        "--prefill-contexts",
        "",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--no-calibration-cache",
        "--output",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.display().to_string()])
    .collect()
}

fn run_to_end(args: &[String]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn read(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out).expect("result file")).expect("JSON")
}

/// The (concurrency, context) of every primary cell, each finished (a
/// measured value or a planned skip: nothing failed).
fn cells(doc: &Value) -> BTreeSet<(u64, u64)> {
    let all = doc["results"].as_array().expect("results");
    for c in all {
        let st = c["status"].as_str().unwrap_or("");
        assert!(!matches!(st, "error" | "no_tokens" | ""), "{c}");
    }
    let keys: BTreeSet<(u64, u64)> = all
        .iter()
        .map(|c| {
            (
                c["concurrency"].as_u64().expect("C"),
                c["context_tokens"].as_u64().expect("ctx"),
            )
        })
        .collect();
    assert_eq!(keys.len(), all.len(), "a cell appears twice");
    keys
}

fn prefill_keys(doc: &Value) -> BTreeSet<String> {
    doc["prefill"]
        .as_object()
        .expect("prefill")
        .keys()
        .cloned()
        .collect()
}

/// Wait until the saved file holds at least `n` primary cells.
fn wait_for_cells(child: &mut Child, out: &Path, n: usize) {
    let t0 = Instant::now();
    loop {
        let got = std::fs::read_to_string(out)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|d| d["results"].as_array().map(Vec::len))
            .unwrap_or(0);
        if got >= n {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the run ended ({st}) before {n} cells were saved");
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "no cell saved");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(args: &[String]) -> Child {
    bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("benchmark starts")
}

/// What an uninterrupted run of `matrix_args` records on the simulator
/// (every cell fits its KV cache and model context): all four cells, and the
/// prefill row of the one non-zero context.
fn uninterrupted() -> (BTreeSet<(u64, u64)>, BTreeSet<String>) {
    (
        [(1, 0), (1, 1024), (2, 0), (2, 1024)].into_iter().collect(),
        ["1024".to_string()].into_iter().collect(),
    )
}

/// SIGKILL after the first saved cell, then `--resume`: the same cells and
/// prefill rows as an uninterrupted run, the carried cell byte for byte,
/// and the resume recorded in the metadata. A mismatching rerun of the
/// finished file is refused with the difference and leaves it untouched; a
/// cell marked `error` is measured again on the next resume, nothing else.
#[test]
fn a_killed_run_resumed_ends_with_the_cells_of_an_uninterrupted_one() {
    let (want_cells, want_prefill) = uninterrupted();
    let (_b, out) = tmp("killed.json");
    let args = matrix_args(&out);
    let mut child = spawn(&args);
    wait_for_cells(&mut child, &out, 1);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let killed = read(&out);
    let kept = killed["results"].as_array().expect("results").clone();
    assert!(kept.len() < 4, "the kill came after the whole matrix");
    assert_eq!(killed["metadata"]["run_status"], "in_progress");

    let mut again = args.clone();
    again.push("--resume".into());
    let o = run_to_end(&again);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let doc = read(&out);
    assert_valid(&doc);
    assert_eq!(doc["metadata"]["run_status"], "complete");
    assert_eq!(cells(&doc), want_cells);
    assert_eq!(prefill_keys(&doc), want_prefill);
    // Carried cells keep every value and timestamp as they were saved.
    for (i, cell) in kept.iter().enumerate() {
        assert_eq!(
            serde_json::to_string(&doc["results"][i]).expect("cell"),
            serde_json::to_string(cell).expect("cell"),
            "carried cell {i} changed"
        );
    }
    let resumed = &doc["metadata"]["resumed"];
    assert_eq!(resumed["count"], 1, "{resumed}");
    let carried = resumed["history"][0]["carried_cells"]
        .as_array()
        .expect("carried");
    assert_eq!(carried.len(), kept.len(), "{resumed}");
    assert!(resumed["history"][0]["at_unix"].as_f64().unwrap_or(0.0) > 1.6e9);
    let log = doc["event_log"].as_array().expect("log");
    assert!(
        log.iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("resuming "))),
        "no resume line in the event log"
    );

    // The same file, resumed with another window: refused, untouched.
    let before = std::fs::read(&out).expect("file");
    let mut other = again.clone();
    let at = other.iter().position(|a| a == "--duration").expect("flag");
    other[at + 1] = "3".into();
    let o = run_to_end(&other);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("duration_per_test: file 1.0, now 3.0"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).expect("file"), before, "overwritten");

    // `--dry-run --resume` of the finished file has nothing left to measure.
    let mut dry = again.clone();
    dry.push("--dry-run".into());
    let o = run_to_end(&dry);
    let shown = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{shown}{}", text(&o.stderr));
    assert!(
        shown.contains("4 carried over from the file") && shown.contains("carried over (ok)"),
        "{shown}"
    );
    assert_eq!(std::fs::read(&out).expect("file"), before);

    // A failed cell is measured again; the prefill row its scout recorded is
    // kept as it was (the scout runs, the row is not recorded again), and so
    // is every other cell.
    let mut edited = read(&out);
    let cells_now = edited["results"].as_array().expect("results").clone();
    let at = cells_now
        .iter()
        .position(|c| c["concurrency"] == 1 && c["context_tokens"] == 1024)
        .expect("C=1 ctx=1k");
    edited["results"][at]["status"] = "error".into();
    let row = serde_json::to_string(&edited["prefill"]["1024"]).expect("row");
    std::fs::write(&out, serde_json::to_string_pretty(&edited).expect("JSON")).expect("write");
    let o = run_to_end(&again);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = read(&out);
    assert_valid(&doc);
    assert_eq!(cells(&doc), want_cells);
    assert_eq!(
        serde_json::to_string(&doc["prefill"]["1024"]).expect("row"),
        row,
        "the prefill row was measured again"
    );
    let redone = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|c| c["concurrency"] == 1 && c["context_tokens"] == 1024)
        .expect("cell");
    assert_eq!(redone["status"], "ok", "{redone}");
    assert_ne!(
        redone["window_start_unix"], cells_now[at]["window_start_unix"],
        "not measured again"
    );
    for (i, c) in cells_now.iter().enumerate().filter(|(i, _)| *i != at) {
        let kept = doc["results"]
            .as_array()
            .expect("results")
            .iter()
            .find(|k| {
                k["concurrency"] == c["concurrency"] && k["context_tokens"] == c["context_tokens"]
            })
            .expect("cell");
        assert_eq!(kept, c, "cell {i} changed");
    }
    let resumed = &doc["metadata"]["resumed"];
    assert_eq!(resumed["count"], 2, "{resumed}");
    assert_eq!(
        resumed["history"][1]["carried_cells"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "{resumed}"
    );
    assert_eq!(
        resumed["history"][1]["carried_prefill_contexts"],
        serde_json::json!([1024])
    );
}

/// Files that cannot be continued: each a one-line error, exit code 2, the
/// file as it was (no server is contacted: the port is closed).
#[test]
fn a_file_that_cannot_be_resumed_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let result =
        r#"{"metadata": {"tool": "llm-decode-bench", "schema_version": 1}, "results": []}"#;
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("missing.json", None, "does not exist"),
        (
            "other.json",
            Some(r#"{"runs": [1, 2]}"#.into()),
            "not an llm-decode-bench result",
        ),
        (
            "foreign.json",
            Some(r#"{"metadata": {"model": "m"}, "results": []}"#.into()),
            "not written by llm-decode-bench",
        ),
        ("cut.json", Some(result[..40].into()), "truncated"),
        (
            "newer.json",
            Some(result.replace("\"schema_version\": 1", "\"schema_version\": 99")),
            "newer than this build reads",
        ),
    ];
    for (name, content, want) in cases {
        let path = dir.path().join(name);
        if let Some(c) = &content {
            std::fs::write(&path, c).expect("write");
        }
        let o = bin()
            .args([
                "--host",
                "http://127.0.0.1:9",
                "--resume",
                "--no-hw-monitor",
            ])
            .args(["--display-mode", "plain", "--output"])
            .arg(&path)
            .output()
            .expect("runs");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with("error: --resume: "), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        match &content {
            Some(c) => assert_eq!(&std::fs::read_to_string(&path).expect("file"), c),
            None => assert!(!path.exists(), "{name} was created"),
        }
    }
}

/// SIGTERM and SIGHUP stop the run like Ctrl-C: exit code 130, the partial
/// report, and a valid result file whose status is `interrupted`.
#[test]
fn sigterm_and_sighup_save_the_partial_result_and_exit_130() {
    for sig in ["-TERM", "-HUP"] {
        let (_d, out) = tmp("r.json");
        let mut child = spawn(&matrix_args(&out));
        wait_for_cells(&mut child, &out, 1);
        signal(&child, sig);
        let o = child.wait_with_output().expect("ends");
        let shown = text(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(130),
            "{sig}: {shown}{}",
            text(&o.stderr)
        );
        assert!(shown.contains("Interrupted by user"), "{sig}: {shown}");
        let doc = read(&out);
        assert_valid(&doc);
        assert_eq!(doc["metadata"]["run_status"], "interrupted", "{sig}");
        assert!(!doc["results"].as_array().expect("results").is_empty());
    }
}

/// A second signal exits at once with 130; the file on disk is still a
/// complete, readable result and no temporary file is left beside it.
/// (Two signals sent back to back can merge into one in the kernel, so the
/// second follows after a moment; the graceful stop takes longer, since it
/// waits for the server to drain.)
#[test]
fn a_second_signal_exits_at_once_leaving_a_valid_file() {
    let (d, out) = tmp("r.json");
    let mut child = spawn(&matrix_args(&out));
    wait_for_cells(&mut child, &out, 1);
    signal(&child, "-TERM");
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, "-TERM");
    let o = child.wait_with_output().expect("ends");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted again: stopped at once"), "{err}");
    assert!(
        !text(&o.stdout).contains("Results saved"),
        "the graceful path ran"
    );
    assert_valid(&read(&out));
    let temps: Vec<String> = std::fs::read_dir(d.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

/// The simulator's request counters, from its own `/metrics`.
fn sim_requests(port: u16) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response");
    assert!(body.contains("vllm:prompt_tokens_total"), "{body}");
    body.lines()
        .filter(|l| {
            l.starts_with("vllm:prompt_tokens_total")
                || l.starts_with("vllm:generation_tokens_total")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A directory this process cannot create files in: a read-only temporary
/// directory, or, for a user who writes there anyway (root), `/proc`.
fn unwritable_dir(base: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let ro = base.join("ro");
    std::fs::create_dir(&ro).expect("dir");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    if std::fs::write(ro.join("probe"), "x").is_err() {
        return ro;
    }
    PathBuf::from("/proc/self")
}

/// An output path that cannot be written fails with exit code 5 and one
/// line before any request: the simulator saw no prompt and no generation.
#[test]
fn an_unwritable_output_fails_with_exit_5_before_any_request() {
    let port = free_port();
    let mut sim = spawn_sim(port);
    let base = tempfile::tempdir().expect("tempdir");
    let file = base.path().join("plain-file");
    std::fs::write(&file, "x").expect("write");
    let targets = [
        unwritable_dir(base.path()).join("r.json"),
        file.join("sub").join("r.json"),
    ];
    let host = format!("http://127.0.0.1:{port}");
    for target in &targets {
        let o = bin()
            .args([
                "--host",
                &host,
                "--wait-for-server",
                "30",
                "--no-hw-monitor",
            ])
            .args([
                "--display-mode",
                "plain",
                "--concurrency",
                "1",
                "--contexts",
                "0",
            ])
            .arg("--output")
            .arg(target)
            .output()
            .expect("runs");
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(5), "{}: {err}", target.display());
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: cannot create") && err.contains(&*target.to_string_lossy()),
            "{err}"
        );
    }
    // The simulator is up (wait for it) and counted nothing.
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "simulator not up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent = sim_requests(port);
    let _ = sim.kill();
    let _ = sim.wait();
    assert_eq!(sent, 0.0, "a request was sent");
    let left: Vec<_> = std::fs::read_dir(base.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 2, "junk left behind: {left:?}");
}

/// The size of the result file after each number of saved cells, watched
/// while a run of `args` goes to its end.
fn sizes_by_cell_count(args: &[String], out: &Path) -> Vec<u64> {
    let mut child = spawn(args);
    let mut sizes: Vec<u64> = Vec::new();
    let t0 = Instant::now();
    loop {
        let done = child.try_wait().expect("wait").is_some();
        if let Ok(s) = std::fs::read_to_string(out)
            && let Ok(doc) = serde_json::from_str::<Value>(&s)
        {
            let n = doc["results"].as_array().map_or(0, Vec::len);
            if sizes.len() <= n {
                sizes.resize(n + 1, 0);
            }
            // the largest file seen with n cells: later saves of the same
            // cells only add (events, prefill rows, the final metadata)
            sizes[n] = sizes[n].max(s.len() as u64);
        }
        if done {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "run did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
    sizes
}

/// A save that fails after the first cells (here: the file-size limit of
/// the process, which also stops root; the disk-full case looks the same to
/// the benchmark) keeps the last complete file, lets the run go on, and
/// ends with exit code 5 and the save error in one line.
#[test]
fn a_save_that_fails_later_keeps_the_previous_file_and_exits_5() {
    let (dir, out) = tmp("r.json");
    let args = matrix_args(&out);
    let sizes = sizes_by_cell_count(&args, &out);
    assert!(sizes.len() >= 3, "cell counts seen: {sizes:?}");
    let (one, two) = (sizes[1], sizes[2]);
    // bash's `ulimit -f` counts 1024-byte blocks; the limit must fall
    // between a one-cell and a two-cell file with room for small changes
    assert!(two > one + 3 * 1024, "a cell adds too little: {sizes:?}");
    let limit_kib = (one + two) / 2 / 1024;
    std::fs::remove_file(&out).expect("remove");

    // SIGXFSZ would kill the process at the limit; ignored, the write fails
    // with EFBIG instead (an ignored signal stays ignored across exec).
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            r#"trap '' XFSZ; ulimit -f {limit_kib}; exec "$0" "$@""#
        ))
        .arg(env!("CARGO_BIN_EXE_llm-decode-bench"))
        .args(&args)
        .output()
        .expect("bash runs");
    let err = text(&o.stderr);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(5), "{err}\n{stdout}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("r.json"),
        "{err}"
    );
    // the file on disk is the last complete save: valid, with one cell
    let doc = read(&out);
    assert_valid(&doc);
    assert_eq!(doc["results"].as_array().map(Vec::len), Some(1), "{doc}");
    // nothing half-written left next to it
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "r.json")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // the run went on to the end: the report covers every cell
    // the report is printed, but does not claim the results were saved
    assert!(stdout.contains("Aggregate decode tok/s"), "{stdout}");
    assert!(!stdout.contains("Results saved"), "{stdout}");
}
