//! Cell timelines through the binary: a simulator run writes them (valid
//! against the schema), `report --timeline C:CTX` prints one, a bad name is
//! a one-line error with exit code 2 listing the valid names, the HTML draws
//! them, and files without them still report.

mod common;

use common::{assert_valid, run, text, tmp};

#[test]
fn a_run_records_timelines_that_report_prints_and_the_page_draws() {
    let (dir, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--concurrency",
        "2",
        "--contexts",
        "0",
        "--duration",
        "2",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--output",
        out.to_str().expect("path"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let raw = std::fs::read_to_string(&out).expect("result file");
    let doc: serde_json::Value = serde_json::from_str(&raw).expect("valid JSON");
    assert_valid(&doc);
    let cell = &doc["results"][0];
    let t = &cell["timeline"];
    let tokens: u64 = t["client_tokens"].as_array().expect("series")
        [t["client_ramp_bins"].as_u64().unwrap() as usize..]
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(tokens, cell["client_output_tokens"].as_u64().unwrap());
    assert!(
        t["server"]["running"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );

    let path = out.to_str().unwrap();
    let o = run(&["report", path, "--timeline", "2:0"]);
    let shown = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(shown.starts_with("Timeline of C=2 ctx=0"), "{shown}");
    assert!(shown.contains("window") && shown.contains("Server gauges at each scrape"));
    assert!(
        !shown.contains("Aggregate tok/s"),
        "the timeline replaces the report"
    );

    let o = run(&["report", path, "--timeline", "64:8k"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("no decode cell named \"64:8k\"") && err.contains(": 2:0"),
        "{err}"
    );

    let html = dir.path().join("r.html");
    let o = run(&["report", path, "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).expect("page");
    assert!(page.contains("id=\"timeline-2-0\""));
}

#[test]
fn a_file_without_timelines_reports_and_names_none() {
    let golden = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ldb-report/tests/golden/sim-seed-args.json"
    );
    let o = run(&["report", golden]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&["report", golden, "--timeline", "1:0"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("one: none") || err.contains("timeline: none"),
        "{err}"
    );
}
