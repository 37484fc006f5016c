//! The server dies mid-run (`--server-down-grace`) or restarts between
//! cells: the simulator runs as its own process on a fixed port and is
//! killed, and sometimes started again, while the benchmark runs.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{assert_valid, bin, free_port, spawn_sim, text, tmp};
use serde_json::Value;

/// The benchmark against the simulator on `port`: three C = 1, 2, 3 cells of
/// two seconds at context 0 (one second of pause between cells).
/// A measured cell: `capacity_limited` is a valid measurement too (on a
/// loaded machine a stream can sit between two requests for a moment).
fn measured(status: &str) -> bool {
    matches!(status, "ok" | "capacity_limited")
}

fn bench(port: u16, out: &Path, grace: &str) -> Child {
    bin()
        .args([
            "--host",
            &format!("http://127.0.0.1:{port}"),
            "--wait-for-server",
            "30",
            "--server-down-grace",
            grace,
            "--concurrency",
            "1,2,3",
            "--contexts",
            "0",
            "--duration",
            "2",
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
        ])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("benchmark starts")
}

fn read(out: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(out).ok()?).ok()
}

/// Wait until the saved result holds `n` cells (at most 90 s).
fn wait_for_cells(out: &Path, n: usize) {
    let t0 = Instant::now();
    loop {
        let cells = read(out).map_or(0, |d| d["results"].as_array().map_or(0, Vec::len));
        if cells >= n {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "no cell saved");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait for the benchmark to end (at most 120 s); its exit code, stdout, stderr.
fn finish(child: Child) -> (Option<i32>, String, String) {
    let o = child.wait_with_output().expect("benchmark ends");
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

fn statuses(doc: &Value) -> Vec<String> {
    doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .collect()
}

fn reasons(doc: &Value) -> Vec<String> {
    doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|c| c["status_reason"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Kill the simulator after the first cell and never start it again: the
/// run waits out the grace once, labels the cells left without running
/// them, saves a valid file holding the first cell as it was, and exits 3.
#[test]
fn a_server_that_dies_and_stays_dead_ends_the_run_with_exit_3() {
    let port = free_port();
    let mut sim = spawn_sim(port);
    let (_dir, out) = tmp("down.json");
    let run = bench(port, &out, "3");
    wait_for_cells(&out, 1);
    let first = read(&out).expect("saved")["results"][0].clone();
    sim.kill().expect("kill simulator");
    let _ = sim.wait();
    let t0 = Instant::now();
    let (code, _stdout, stderr) = finish(run);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("server down since"), "{stderr}");
    // One grace, not one per cell, and no cell waited out its own limits.
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let doc = read(&out).expect("valid JSON");
    assert_valid(&doc);
    let st = statuses(&doc);
    assert!(measured(&st[0]), "{st:?} {:?}", reasons(&doc));
    assert_eq!(&st[1..], ["error", "error"], "{:?}", reasons(&doc));
    assert_eq!(
        doc["results"][0], first,
        "the finished cell is kept as it was"
    );
    for why in &reasons(&doc)[1..] {
        assert!(why.contains("server down since"), "{why}");
    }
    let outages = doc["metadata"]["server_outages"]
        .as_array()
        .expect("outages");
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0]["back_unix"].is_null(), "{outages:?}");
    assert!(doc["results"][2]["aggregate_tps"].is_null());
}

/// Kill the simulator after the first cell and start it again on the same
/// port 10 s later, within the grace: the cell that ran into the outage is
/// `error` naming it, the run goes on, the outage and the restart are in
/// the metadata.
#[test]
fn a_server_that_comes_back_within_the_grace_lets_the_run_finish() {
    let port = free_port();
    let mut sim = spawn_sim(port);
    let (_dir, out) = tmp("back.json");
    let run = bench(port, &out, "40");
    wait_for_cells(&out, 1);
    sim.kill().expect("kill simulator");
    let _ = sim.wait();
    std::thread::sleep(Duration::from_secs(10));
    let mut sim = spawn_sim(port);
    let (code, _stdout, stderr) = finish(run);
    let _ = sim.kill();
    let _ = sim.wait();
    let doc = read(&out).expect("valid JSON");
    assert_valid(&doc);
    let st = statuses(&doc);
    assert_eq!(st.len(), 3, "{st:?}");
    assert!(
        measured(&st[0]) && measured(&st[2]),
        "{st:?} {:?}",
        reasons(&doc)
    );
    assert_eq!(code, Some(4), "one cell failed: {stderr}");
    assert!(
        reasons(&doc)[1].contains("server down at"),
        "{:?}",
        reasons(&doc)
    );
    let outages = doc["metadata"]["server_outages"]
        .as_array()
        .expect("outages");
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0]["back_unix"].is_number(), "{outages:?}");
    let restarts = doc["metadata"]["server_restarts"]
        .as_array()
        .expect("restarts");
    assert_eq!(restarts.len(), 1, "{restarts:?}");
}

/// The simulator restarted in the pause between two cells as a new version
/// (a new process, counters from 0): the restart is noted with its evidence
/// (the process start time and the version change), the run goes on, and no server count is negative. On a
/// loaded machine the new process may still be starting when the next cell
/// begins; that cell then fails (`cannot connect`) and the run goes on.
#[test]
fn a_restart_between_cells_is_noted_and_no_counter_delta_goes_negative() {
    let port = free_port();
    let mut sim = spawn_sim(port);
    let (_dir, out) = tmp("restart.json");
    let run = bench(port, &out, "30");
    wait_for_cells(&out, 1);
    sim.kill().expect("kill simulator");
    let _ = sim.wait();
    // the new process is an upgrade: the same scenario with another version
    let upgraded = out.with_file_name("upgraded.toml");
    let scenario = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/quickstart.toml"),
    )
    .expect("scenario")
    .replace("version = \"0.11.0-sim\"", "version = \"0.12.0-sim\"");
    std::fs::write(&upgraded, scenario).expect("write scenario");
    let mut sim = bin()
        .args(["sim", "--port", &port.to_string(), "--scenario"])
        .arg(&upgraded)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("simulator starts");
    let (code, _stdout, stderr) = finish(run);
    let _ = sim.kill();
    let _ = sim.wait();
    let doc = read(&out).expect("valid JSON");
    assert_valid(&doc);
    let st = statuses(&doc);
    assert_eq!(st.len(), 3, "{st:?}");
    assert!(
        measured(&st[0]) && measured(&st[2]),
        "{st:?} {:?}",
        reasons(&doc)
    );
    let expected = if measured(&st[1]) { 0 } else { 4 };
    assert_eq!(code, Some(expected), "{stderr}\n{:?}", reasons(&doc));
    let restarts = doc["metadata"]["server_restarts"]
        .as_array()
        .expect("restarts");
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    let why = restarts[0]["evidence"].as_str().unwrap_or("");
    assert!(why.contains("process_start_time_seconds"), "{why}");
    assert!(
        why.contains("engine version changed from 0.11.0-sim to 0.12.0-sim"),
        "{why}"
    );
    let log = doc["event_log"].as_array().expect("log");
    assert!(
        log.iter()
            .any(|l| l.as_str().unwrap_or("").contains("server restart")),
        "{log:?}"
    );
    for c in doc["results"].as_array().expect("results") {
        let server = c["server_output_tokens"].as_f64().unwrap_or(0.0);
        assert!(server >= 0.0, "{c}");
    }
}

/// Read the benchmark's stdout on a thread and kill `sim` as soon as a line
/// contains `trigger`; the lines read come back when the output ends.
fn kill_on_line(
    run: &mut Child,
    mut sim: Child,
    trigger: &'static str,
) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::BufRead;
    let stdout = run.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut sim = Some(&mut sim);
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains(trigger)
                && let Some(s) = sim.take()
            {
                let _ = s.kill();
                let _ = s.wait();
            }
            lines.push(line);
        }
        if let Some(s) = sim.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        lines
    })
}

/// The simulator killed after discovery, while the prompts are sized (the
/// run's first generation request then cannot connect): the run waits out
/// the grace once, labels every cell without running it, saves a valid file
/// and exits 3 — it does not stop at the first refused connection.
#[test]
fn a_server_that_dies_before_the_first_cell_is_waited_for_then_labelled() {
    let port = free_port();
    let sim = spawn_sim(port);
    let (_dir, out) = tmp("early.json");
    let mut run = bench(port, &out, "3");
    let lines = kill_on_line(&mut run, sim, "calibrating prompt sizes");
    let t0 = Instant::now();
    let o = run.wait_with_output().expect("benchmark ends");
    let stdout = lines.join().expect("reader").join("\n");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}\n{stdout}");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert!(stderr.contains("server down since"), "{stderr}");
    let doc = read(&out).expect("valid JSON");
    assert_valid(&doc);
    let st = statuses(&doc);
    assert_eq!(st, ["error", "error", "error"], "{:?}", reasons(&doc));
    for why in reasons(&doc) {
        assert!(why.contains("server down since"), "{why}");
    }
    let outages = doc["metadata"]["server_outages"]
        .as_array()
        .expect("outages");
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0]["back_unix"].is_null(), "{outages:?}");
}

/// The same kill, with the simulator started again 3 s later within the
/// grace: the run waits, goes on and measures the cells.
#[test]
fn a_server_that_restarts_before_the_first_cell_lets_the_run_go_on() {
    let port = free_port();
    let sim = spawn_sim(port);
    let (_dir, out) = tmp("early-back.json");
    let mut run = bench(port, &out, "40");
    let lines = kill_on_line(&mut run, sim, "calibrating prompt sizes");
    // wait until the reader has killed it, then start a new one
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(60), "never killed");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3));
    let mut sim = spawn_sim(port);
    let o = run.wait_with_output().expect("benchmark ends");
    let _ = sim.kill();
    let _ = sim.wait();
    let stdout = lines.join().expect("reader").join("\n");
    let stderr = text(&o.stderr);
    let doc = read(&out).expect("valid JSON");
    assert_valid(&doc);
    let st = statuses(&doc);
    assert_eq!(st.len(), 3, "{st:?}");
    // the cells after the outage are measured (the first may have run into
    // it when the kill came late)
    assert!(
        st[1..].iter().all(|s| measured(s)),
        "{st:?} {:?}\n{stdout}",
        reasons(&doc)
    );
    let expected = if measured(&st[0]) { 0 } else { 4 };
    assert_eq!(o.status.code(), Some(expected), "{stderr}");
    let outages = doc["metadata"]["server_outages"]
        .as_array()
        .expect("outages");
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0]["back_unix"].is_number(), "{outages:?}");
    assert!(stdout.contains("server back after"), "{stdout}");
}
