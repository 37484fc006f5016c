//! `--duration auto` through the binary: the flags, their one-line errors,
//! and a result whose new keys match the schema (the interference probe's
//! among them: it runs after an auto-closed window too).

mod common;

use common::{assert_valid, run, text, tmp};

#[test]
fn auto_duration_run_records_its_close_and_matches_the_schema() {
    let (_d, out) = tmp("r.json");
    let o = run(&[
        "--sim",
        "--concurrency",
        "2",
        "--contexts",
        "0",
        "--duration",
        "auto",
        "--max-duration",
        "4",
        "--min-duration",
        "2",
        "--target-ci",
        "2",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--mixed-prefill-contexts",
        "8k,100k",
        "--display-mode",
        "plain",
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    assert!(stdout.contains("Prefill–decode interference"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    let md = &doc["metadata"];
    assert_eq!(md["duration_per_test"], 4.0);
    assert_eq!(md["duration_auto"]["target_ci_pct"], 2.0);
    assert_eq!(md["duration_auto"]["min_duration"], 2.0);
    let cell = &doc["results"][0];
    let by = cell["stopped_by"].as_str().expect("stopped_by");
    assert!(by == "ci" || by == "max_duration", "{by}");
    assert_eq!(cell["rate_ci_method"], "batch_means");
    let secs = cell["measurement_seconds"].as_f64().expect("window");
    assert!((2.0..4.5).contains(&secs), "window {secs} s");
    let ci = cell["rate_ci95"].as_array().expect("rate_ci95");
    assert_eq!(ci.len(), 2);
    // The interference probe ran after the auto-closed window (its keys
    // matched the schema above); 100k is beyond the model's 64k context.
    let probe = &cell["interference"]["injections"];
    let sent = probe[0]["injected_at_unix"].as_f64().expect("injected");
    let end = cell["window_end_unix"].as_f64().expect("window end");
    assert!(sent > end, "injected at {sent}, window end {end}");
    assert!(probe[0]["ttft_s"].as_f64().expect("ttft") > 0.0, "{probe}");
    assert!(
        probe[0]["solo_ttft_s"].as_f64().expect("solo") > 0.0,
        "{probe}"
    );
    let why = probe[1]["skipped"].as_str().expect("skipped");
    assert!(why.contains("model's context"), "{why}");
}

#[test]
fn auto_flags_without_auto_and_bad_values_exit_2_with_one_line() {
    for args in [
        &["--duration", "soon"][..],
        &["--duration", "0"],
        &["--target-ci", "1"],
        &["--max-duration", "60"],
        &["--duration", "auto", "--min-duration", "40"],
        &["--duration", "auto", "--target-ci", "0"],
    ] {
        let mut all = vec!["--sim", "--dry-run"];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
