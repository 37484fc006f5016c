//! `--slo` end to end against the built-in simulator: verdicts and goodput
//! in the result file, the exit code (never changed by the SLO), and
//! `report --slo` on the saved file giving the same verdicts.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_valid, run, text};
use serde_json::Value;

/// A small simulator run with `--slo spec`; the parsed result file.
fn sim_run(dir: &Path, spec: &str) -> (PathBuf, Value) {
    let out = dir.join(format!("{}.json", spec.len()));
    let o = run(&[
        "--sim",
        "--concurrency",
        "1,2",
        "--contexts",
        "0",
        "--duration",
        "1",
        "--max-tokens",
        "16",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--display-mode",
        "plain",
        "--slo",
        spec,
        "--output",
        out.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    // The SLO never changes the exit code.
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&o.stderr)
    );
    assert!(stdout.contains("SLO: "), "{stdout}");
    assert!(stdout.contains("Decode SLO frontier"), "{stdout}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    (out, doc)
}

fn cells(doc: &Value) -> &Vec<Value> {
    doc["results"].as_array().expect("results")
}

/// `report FILE --slo SPEC --csv -`: (concurrency, slo_met, goodput) per decode row.
fn report_verdicts(file: &Path, spec: &str) -> Vec<(String, String, String)> {
    let o = run(&[
        "report",
        file.to_str().expect("path"),
        "--slo",
        spec,
        "--csv",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut r = csv::Reader::from_reader(o.stdout.as_slice());
    let h = r.headers().expect("header").clone();
    let col = |name: &str| h.iter().position(|x| x == name).expect(name);
    let (c, met, good) = (col("concurrency"), col("slo_met"), col("goodput"));
    r.records()
        .map(|row| {
            let row = row.expect("row");
            (
                row[c].to_string(),
                row[met].to_string(),
                row[good].to_string(),
            )
        })
        .collect()
}

const LOOSE: &str = "ttft_p99=60,ttfo_p99=60,token_gap_p99=10,e2e_p99=600";
/// Every request misses it: a sustained cell judges TTFT only on requests
/// whose first token came in its window, but e2e catches the others too
/// (completed ones by their latency, cut ones by their age at the cut).
const STRICT: &str = "ttft_p50=0.000001,e2e_p50=0.000001";

#[test]
fn loose_and_strict_slos_on_a_simulator_run() {
    let dir = tempfile::tempdir().expect("tempdir");

    let (file, doc) = sim_run(dir.path(), LOOSE);
    assert_eq!(doc["slo"]["spec"]["ttft_p99"], 60.0);
    for c in cells(&doc) {
        assert_eq!(c["slo_met"], true, "C={}", c["concurrency"]);
        assert_eq!(c["slo_failed"], serde_json::json!([]));
        // Every request met every target: goodput is the whole cell.
        let (g, tps) = (c["goodput"].as_f64(), c["aggregate_tps"].as_f64());
        assert!(
            g.is_some() && (g.unwrap() - tps.unwrap()).abs() < 1e-6,
            "{g:?} {tps:?}"
        );
    }
    // The frontier: the highest concurrency among the `ok` cells (on a busy
    // machine the simulator may leave C=2 capacity-limited, which does not count).
    let best = cells(&doc)
        .iter()
        .filter(|c| c["status"] == "ok")
        .max_by_key(|c| c["concurrency"].as_u64());
    let f = &doc["slo"]["frontier"]["0"];
    match best {
        Some(c) => {
            assert_eq!(f["concurrency"], c["concurrency"]);
            assert_eq!(f["aggregate_tps"], c["aggregate_tps"]);
            assert_eq!(f["goodput"], c["goodput"]);
        }
        None => assert_eq!(*f, Value::Null),
    }
    assert_eq!(doc["slo"]["burst_frontier"], serde_json::json!({}));

    // report --slo on the saved file: the run's verdicts, and a stricter
    // spec judged again from the same file.
    let expect: Vec<_> = cells(&doc)
        .iter()
        .map(|c| {
            (
                c["concurrency"].to_string(),
                c["slo_met"].to_string(),
                c["goodput"].as_f64().expect("goodput").to_string(),
            )
        })
        .collect();
    assert_eq!(report_verdicts(&file, LOOSE), expect);
    for (_, met, good) in report_verdicts(&file, STRICT) {
        assert_eq!((met.as_str(), good.as_str()), ("false", "0"));
    }

    let (file, doc) = sim_run(dir.path(), STRICT);
    for c in cells(&doc) {
        assert_eq!(c["slo_met"], false, "C={}", c["concurrency"]);
        assert_eq!(c["slo_failed"], serde_json::json!(["ttft_p50", "e2e_p50"]));
        assert_eq!(c["goodput"], 0.0);
    }
    assert_eq!(doc["slo"]["frontier"]["0"], Value::Null);
    let o = run(&["report", file.to_str().expect("path"), "--slo", STRICT]);
    let stdout = text(&o.stdout);
    assert!(stdout.contains("FAIL 0 ttft_p50 e2e_p50"), "{stdout}");
    assert!(stdout.contains("0: none"), "{stdout}");
}

#[test]
fn a_bad_slo_is_a_one_line_error_with_exit_code_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never.json");
    for spec in [
        "ttft_p95=1",
        "ttft_p99=-2",
        "ttft_p99",
        "e2e_p99=1,e2e_p99=2",
    ] {
        // An unreachable port: the spec is refused before anything is sent.
        let o = run(&[
            "--host",
            "127.0.0.1",
            "--port",
            "9",
            "--slo",
            spec,
            "--output",
            out.to_str().expect("path"),
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{spec}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("--slo"), "{err}");
        assert!(!out.exists());
    }
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-report/tests/golden/default.json");
    let o = run(&[
        "report",
        golden.to_str().expect("path"),
        "--slo",
        "itl_p99=1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("unknown key \"itl_p99\""));
}

#[test]
fn bad_repeat_search_and_preset_input_is_a_one_line_error_with_exit_code_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never.json");
    let cases: &[(&[&str], &str)] = &[
        (&["--repeat", "0"], "invalid --repeat"),
        (&["--slo-bisect"], "invalid --slo-bisect"),
        (&["--slo-search"], "invalid --slo-search"),
        (&["--slo-preset", "mlperf-gpt9"], "unknown --slo-preset"),
        (
            &["--repeat", "2", "--request-rate", "1"],
            "invalid --repeat",
        ),
    ];
    for (flags, want) in cases {
        // An unreachable port: the input is refused before anything is sent.
        let mut args = vec![
            "--host",
            "127.0.0.1",
            "--port",
            "9",
            "--output",
            out.to_str().expect("path"),
        ];
        args.extend_from_slice(flags);
        let o = run(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{flags:?}: {err}");
        assert!(!out.exists());
    }
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-report/tests/golden/default.json");
    let o = run(&[
        "report",
        golden.to_str().expect("path"),
        "--slo-preset",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("unknown --slo-preset \"nope\""));
}

#[test]
fn a_preset_with_an_explicit_key_judges_the_merged_targets() {
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-report/tests/golden/problems.json");
    let o = run(&[
        "report",
        golden.to_str().expect("path"),
        "--slo-preset",
        "mlperf-llama2-70b",
        "--slo",
        "ttft_p99=1000",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(stdout.contains("ttft_p99=1000"), "{stdout}");
    assert!(stdout.contains("tpot_p99=0.2"), "{stdout}");
}
