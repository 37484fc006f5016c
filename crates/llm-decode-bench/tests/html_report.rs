//! `--html` and `--requests-jsonl` end to end: a short run against the
//! simulator writes both, `report` writes them again from the saved result,
//! and a headless Chromium (when installed) renders the page.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::{bin, free_port, run, spawn_sim, text, tmp};

/// The chart ids the page must carry (`ldb_report::html::CHART_IDS`).
const CHART_IDS: [&str; 7] = [
    "chart-aggregate",
    "chart-pareto",
    "chart-ttft",
    "chart-prefill",
    "chart-token-gap",
    "chart-power",
    "chart-tokens-per-joule",
];

/// Kills the simulator however the test ends.
struct Sim(std::process::Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The JSONL lines as JSON objects.
fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("JSONL file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

#[test]
fn a_run_writes_the_html_page_and_the_request_samples() {
    let port = free_port();
    let _sim = Sim(spawn_sim(port));
    let (dir, out) = tmp("run.json");
    let (html, jsonl) = (dir.path().join("run.html"), dir.path().join("run.jsonl"));
    let host = format!("http://127.0.0.1:{port}");
    let mut child = bin()
        .args(["--host", &host, "--wait-for-server", "30"])
        .args([
            "--concurrency",
            "1,2",
            "--contexts",
            "0,2k",
            "--duration",
            "1",
        ])
        .args(["--decode-warmup-seconds", "0", "--prefill-contexts", "4k"])
        .args(["--display-mode", "plain", "--no-hw-monitor"])
        .args(["--output", s(&out), "--html", s(&html)])
        .args(["--requests-jsonl", s(&jsonl)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("benchmark runs");
    // The page is there while the run goes on (rewritten after every save).
    let mut seen_mid_run = false;
    while child.try_wait().expect("wait").is_none() {
        let page = std::fs::read_to_string(&html).unwrap_or_default();
        if page.contains("<td>in_progress</td>") {
            seen_mid_run = page.contains("id=\"chart-aggregate\"");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("benchmark ends");
    let stdout = text(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&o.stderr)
    );
    assert!(stdout.contains("HTML report written to"), "{stdout}");
    assert!(stdout.contains("request samples written to"), "{stdout}");

    assert!(seen_mid_run, "no page was written during the run");
    let page = std::fs::read_to_string(&html).expect("HTML file");
    assert!(
        page.contains("<td>complete</td>"),
        "the last save wrote the page"
    );
    for id in CHART_IDS {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id} missing");
    }
    assert!(page.contains("<svg") && !page.contains("<script"));
    assert!(page.len() < 2_000_000);
    let leftovers = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0, "no temporary file is left");

    // One line per request sample of the saved result, with its cell's identifiers.
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    let samples: usize = ["results", "burst_results"]
        .iter()
        .flat_map(|k| doc[k].as_array().into_iter().flatten())
        .map(|c| c["request_samples"].as_array().map_or(0, Vec::len))
        .sum();
    let run_lines = lines(&jsonl);
    assert!(samples > 0, "the run kept request samples");
    assert_eq!(run_lines.len(), samples);
    for l in &run_lines {
        assert_eq!(l["layer"], "decode");
        assert!(matches!(l["concurrency"].as_u64(), Some(1 | 2)), "{l}");
        assert!(
            matches!(l["context_tokens"].as_u64(), Some(0 | 2048)),
            "{l}"
        );
        assert_eq!(l["repeat"], 0);
        for key in [
            "cell_index",
            "sample_index",
            "ttft",
            "output_tokens",
            "in_window",
        ] {
            assert!(l.get(key).is_some(), "{key} missing in {l}");
        }
    }
    assert!(
        run_lines
            .iter()
            .any(|l| l["output_tokens"].as_u64() > Some(0))
    );

    // `report` writes the same samples and a page from the saved file.
    let (html2, jsonl2) = (
        dir.path().join("again.html"),
        dir.path().join("again.jsonl"),
    );
    let o = run(&[
        "report",
        s(&out),
        "--html",
        s(&html2),
        "--requests-jsonl",
        s(&jsonl2),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Aggregate tok/s"),
        "the text report still prints"
    );
    assert_eq!(lines(&jsonl2), run_lines);
    assert!(
        std::fs::read_to_string(&html2)
            .expect("page")
            .contains("chart-aggregate")
    );

    // Two files make one page with both runs' series; without --html they are refused.
    let multi = dir.path().join("multi.html");
    let o = run(&["report", s(&out), s(&out), "--html", s(&multi)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&["report", s(&out), s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("several result files"),
        "{}",
        text(&o.stderr)
    );

    render_in_chromium(&html);
}

#[test]
fn an_unwritable_html_path_is_a_warning_not_a_failed_run() {
    let (dir, out) = tmp("r.json");
    // A path whose parent is a plain file can never be written.
    let blocker = dir.path().join("plain");
    std::fs::write(&blocker, "x").expect("file");
    let html = blocker.join("r.html");
    let o = run(&[
        "--sim",
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--output",
        s(&out),
        "--html",
        s(&html),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("--html"), "{err}");
    assert!(err.contains("the HTML report was not written"), "{err}");
    assert!(out.is_file(), "the result JSON is saved all the same");
}

/// `chromium` or `chromium-browser` on PATH.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Headless Chromium draws the page (a PNG that is not one flat colour) and
/// its DOM carries every chart. Without Chromium the check is skipped with
/// a notice, except on CI (`CI` set), where it fails.
fn render_in_chromium(html: &Path) {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but no chromium or chromium-browser is on PATH (.ci/run installs it)"
        );
        println!("NOTICE: chromium not found on PATH; skipping the headless rendering check");
        return;
    };
    let dir = html.parent().expect("dir");
    let png = dir.join("page.png");
    let url = format!("file://{}", html.display());
    let profile = dir.join("chromium-profile");
    let headless = |extra: &[&str]| {
        Command::new("timeout")
            .arg("120")
            .arg(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .expect("chromium starts")
    };
    let shot = format!("--screenshot={}", png.display());
    let o = headless(&[&shot, "--window-size=1400,3000"]);
    assert!(
        png.is_file(),
        "no screenshot: {}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("png"),
    ));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let bytes = &buf[..info.buffer_size()];
    let px = info.color_type.samples();
    let first = &bytes[..px];
    let differing = bytes.chunks(px).filter(|p| *p != first).count();
    assert!(
        differing > bytes.len() / px / 100,
        "the screenshot is (almost) one colour: {differing} differing pixels"
    );

    let o = headless(&["--dump-dom"]);
    let dom = text(&o.stdout);
    for id in CHART_IDS {
        assert!(dom.contains(&format!("id=\"{id}\"")), "{id} not in the DOM");
    }
    assert!(dom.contains("<svg"), "the charts are in the DOM");
}

#[test]
fn report_html_and_jsonl_paths_are_checked() {
    let (dir, _) = tmp("x");
    let result = dir.path().join("seed.json");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-report/tests/golden/seed.json");
    std::fs::copy(golden, &result).expect("copy the golden result");
    let r = s(&result);
    // A browser opens a file: stdout is refused, in one line.
    let o = run(&["report", r, "--html", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
    // Two outputs on stdout are refused.
    let o = run(&["report", r, "--csv", "-", "--requests-jsonl", "-"]);
    assert_eq!(o.status.code(), Some(2));
    // An HTML file that cannot be written is exit code 5, naming it.
    let missing = dir.path().join("no/such/dir/r.html");
    let o = run(&["report", r, "--html", s(&missing)]);
    assert_eq!(o.status.code(), Some(5));
    assert!(text(&o.stderr).contains("r.html"), "{}", text(&o.stderr));
    // The seed has no request samples: an empty JSONL on stdout, no report.
    let o = run(&["report", r, "--requests-jsonl", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
}

#[test]
fn report_csv_and_markdown_files_are_written_whole_like_stdout() {
    let (dir, _) = tmp("x");
    let result = dir.path().join("seed.json");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-report/tests/golden/seed.json");
    std::fs::copy(golden, &result).expect("copy the golden result");
    let r = s(&result);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("out dir");
    let (csv, md) = (out.join("r.csv"), out.join("r.md"));
    // An older file in the way is replaced, not appended to.
    std::fs::write(
        &csv,
        "old contents that are longer than nothing\n".repeat(500),
    )
    .expect("old");
    let o = run(&["report", r, "--csv", s(&csv), "--markdown", s(&md)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for (file, flag) in [(&csv, "--csv"), (&md, "--markdown")] {
        let stdout = run(&["report", r, flag, "-"]);
        assert_eq!(stdout.status.code(), Some(0), "{}", text(&stdout.stderr));
        assert_eq!(
            std::fs::read(file).expect("written"),
            stdout.stdout,
            "{flag}"
        );
    }
    // Written through a temporary file and renamed: nothing else is left.
    let names: Vec<String> = std::fs::read_dir(&out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A file that cannot be written is exit code 5, naming it.
    let missing = dir.path().join("no/such/dir/r.csv");
    let o = run(&["report", r, "--csv", s(&missing)]);
    assert_eq!(o.status.code(), Some(5));
    assert!(text(&o.stderr).contains("r.csv"), "{}", text(&o.stderr));
}
