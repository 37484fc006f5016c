//! `--repeat N` end to end with the simulator: the file carries every
//! repeat and validates against the schema, the report shows `mean ± ci`,
//! the CSV has a row per repeat, and `compare` tests repeated cells.

mod common;

use common::{assert_valid, run, text};
use serde_json::Value;

#[test]
fn a_repeated_simulator_run_reports_intervals_and_compares_with_a_test() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rep.json");
    let o = run(&[
        "--sim",
        "--concurrency",
        "1,2",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--max-tokens",
        "64",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--repeat",
        "2",
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    assert!(stdout.contains(" ± "), "{stdout}");
    assert!(stdout.contains("--repeat 2"), "{stdout}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    assert_eq!(doc["metadata"]["repeat"], 2);
    for cell in doc["results"].as_array().expect("results") {
        let reps = cell["repeats"].as_array().expect("repeats");
        assert_eq!(reps.len(), 2, "{cell}");
        let stats = &cell["repeat_stats"]["aggregate_tps"];
        assert_eq!(stats["n"], 2);
        assert_eq!(cell["aggregate_tps"], stats["mean"]);
    }
    let path = out.to_str().expect("path");

    let csv = run(&["report", path, "--csv", "-"]);
    assert_eq!(csv.status.code(), Some(0), "{}", text(&csv.stderr));
    let body = text(&csv.stdout);
    assert_eq!(
        body.lines()
            .filter(|l| l.starts_with("decode_repeat,"))
            .count(),
        4
    );
    assert_eq!(body.lines().filter(|l| l.starts_with("decode,")).count(), 2);

    // The run against itself: equal means, tested, not significant.
    let cmp = run(&["compare", path, path, "--format", "json"]);
    assert_eq!(cmp.status.code(), Some(0), "{}", text(&cmp.stderr));
    let j: Value = serde_json::from_slice(&cmp.stdout).expect("compare JSON");
    assert_eq!(j["significance"], "welch_t_test");
    let agg = &j["comparisons"][0]["cells"][0]["metrics"]["aggregate_tps"];
    assert_eq!(agg["significance"], "not_significant", "{agg}");
    assert_eq!(agg["p_value"], 1.0);
    assert_eq!(agg["base_repeats"]["n"], 2);
}
