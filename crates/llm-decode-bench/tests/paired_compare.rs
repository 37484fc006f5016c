//! The standalone paired comparison end to end:
//! `--compare-baseline A --compare-candidate B [--output F]` on result files
//! the test writes (no server is involved).

mod common;

use std::path::Path;

use common::{run, text};
use serde_json::{Value, json};

fn result(dir: &Path, name: &str, model: &str, verdicts: &[(&str, bool)]) -> String {
    let doc = json!({
        "metadata": {"mode": "completion_stats", "model": model, "server": "http://127.0.0.1:9",
                     "test_profile": "gsm8k", "dataset": "gsm8k_test"},
        "runs": verdicts.iter().map(|(id, ok)| json!({
            "item_id": id, "correct": ok, "completion_tokens": 100,
            "score_label": if *ok { "pass" } else { "fail" }, "category": null,
        })).collect::<Vec<_>>(),
    });
    let p = dir.join(name);
    std::fs::write(&p, doc.to_string()).expect("write result");
    p.display().to_string()
}

#[test]
fn compares_two_files_and_writes_json_only_with_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 12 items: the baseline gets all right, the candidate misses 10
    let ids: Vec<String> = (1..=12).map(|i| format!("gsm8k-{i:04}")).collect();
    let a: Vec<(&str, bool)> = ids.iter().map(|i| (i.as_str(), true)).collect();
    let b: Vec<(&str, bool)> = ids
        .iter()
        .enumerate()
        .map(|(n, i)| (i.as_str(), n < 2))
        .collect();
    let pa = result(dir.path(), "a.json", "base", &a);
    let pb = result(dir.path(), "b.json", "cand", &b);
    let out = run(&["--compare-baseline", &pa, "--compare-candidate", &pb]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("Paired A/B Comparison"), "{stdout}");
    assert!(
        stdout.contains("significant at α=0.05 (exact McNemar p=0.0020)"),
        "{stdout}"
    );
    // nothing written without --output (not even the default result file)
    let entries = std::fs::read_dir(dir.path()).expect("read dir").count();
    assert_eq!(entries, 2);

    let outp = dir.path().join("cmp.json");
    let out = run(&[
        "--compare-baseline",
        &pa,
        "--compare-candidate",
        &pb,
        "--output",
        outp.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&outp).expect("written")).expect("JSON");
    assert_eq!(doc["metadata"]["mode"], "paired_comparison");
    assert_eq!(doc["comparison"]["paired_items"], 12);
    assert_eq!(doc["comparison"]["flips_baseline_only_correct"], 10);
    // exact: 2 * 0.5^10
    let p = doc["comparison"]["mcnemar_exact_p"].as_f64().expect("p");
    assert!((p - 2.0 / 1024.0).abs() < 1e-15, "{p}");
}

#[test]
fn bad_inputs_are_one_line_errors_naming_the_file_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = result(dir.path(), "a.json", "base", &[("x", true)]);
    let other = result(dir.path(), "b.json", "cand", &[("y", true)]);
    let missing = dir.path().join("nope.json").display().to_string();
    let not_result = dir.path().join("cells.json");
    std::fs::write(&not_result, "{\"cells\": []}").expect("write");
    let not_result = not_result.display().to_string();
    for (a, b, named) in [
        (&good, &missing, &missing),
        (&not_result, &good, &not_result),
        (&good, &other, &other),
    ] {
        let out = run(&["--compare-baseline", a, "--compare-candidate", b]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(named.as_str()), "{err}");
    }
    let out = run(&["--compare-candidate", &good]);
    assert_eq!(out.status.code(), Some(2));
}
