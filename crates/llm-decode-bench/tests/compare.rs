//! `compare` and `report` end to end: the binary on result files with known
//! differences (goldens and scaled copies of them), bad input, and two short
//! simulator runs at known speeds.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{run, text};
use serde_json::Value;

fn golden_text(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ldb-report/tests/golden")
        .join(format!("{name}.json"));
    std::fs::read_to_string(p).expect("golden file")
}

fn golden(name: &str) -> Value {
    serde_json::from_str(&golden_text(name)).expect("golden JSON")
}

/// Files in a temporary directory, kept alive with it.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().expect("tempdir"))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    fn write(&self, name: &str, content: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, content).expect("write");
        p.to_str().expect("utf-8 path").to_string()
    }

    fn json(&self, name: &str, v: &Value) -> String {
        self.write(name, &serde_json::to_string_pretty(v).expect("serialize"))
    }
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn describe(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The one stderr line of a refused input.
fn one_line_error(o: &Output) -> String {
    let err = text(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{}", describe(o));
    assert!(err.starts_with("error: "), "{}", describe(o));
    err
}

/// The decode cell at (context, concurrency) of a result value.
fn cell_mut(doc: &mut Value, ctx: u64, conc: u64) -> &mut Value {
    doc["results"]
        .as_array_mut()
        .expect("results")
        .iter_mut()
        .find(|c| c["context_tokens"] == ctx && c["concurrency"] == conc)
        .expect("cell")
}

#[test]
fn a_run_compared_with_itself_exits_0_with_no_change() {
    let d = Dir::new();
    let f = d.write("run.json", &golden_text("sim-burst"));
    let o = run(&["compare", &f, &f]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    let out = text(&o.stdout);
    assert!(out.contains("0 regression(s), 0 improvement(s)"), "{out}");
    assert!(!out.contains("% ✗") && !out.contains("% ✓"), "{out}");
    assert!(out.contains("no significance test"), "{out}");

    let o = run(&["compare", "--format", "json", &f, &f]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    let j: Value = serde_json::from_slice(&o.stdout).expect("JSON output");
    assert_eq!(j["regression"], false);
    for cell in j["comparisons"][0]["cells"].as_array().expect("cells") {
        assert_eq!(cell["outcome"], "compared");
        for (k, m) in cell["metrics"].as_object().expect("metrics") {
            if !m["base"].is_null() {
                assert_eq!(m["change_pct"], 0.0, "{k}");
            }
        }
    }
}

#[test]
fn a_slower_run_exits_1_and_names_the_cell() {
    let d = Dir::new();
    let mut slow = golden("sim-burst");
    let c = cell_mut(&mut slow, 2048, 2);
    c["aggregate_tps"] = Value::from(c["aggregate_tps"].as_f64().expect("tps") * 0.7);
    let (base, new) = (
        d.write("base.json", &golden_text("sim-burst")),
        d.json("slow.json", &slow),
    );
    let o = run(&["compare", &base, &new]);
    assert_eq!(code(&o), Some(1), "{}", describe(&o));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.contains("REGRESSION"))
        .unwrap_or_else(|| panic!("no regression row:\n{out}"));
    assert!(row.trim_start().starts_with("2k"), "{row}");
    assert!(row.contains("-30.0% ✗"), "{row}");
    assert_eq!(out.matches("REGRESSION").count(), 1, "{out}");

    // Beyond a 40 % threshold the same change is not a regression.
    let o = run(&["compare", "--threshold", "40", &base, &new]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));

    // Markdown for a pull request: the same row in a pipe table.
    let o = run(&["compare", "--format", "markdown", &base, &new]);
    assert_eq!(code(&o), Some(1), "{}", describe(&o));
    let md = text(&o.stdout);
    assert!(
        md.lines()
            .any(|l| l.starts_with("| 2k | 2 |") && l.contains("REGRESSION")),
        "{md}"
    );

    // Several new runs: each against the base; one regression is enough for 1.
    let o = run(&["compare", "--format", "json", &base, &base, &new]);
    assert_eq!(code(&o), Some(1), "{}", describe(&o));
    let j: Value = serde_json::from_slice(&o.stdout).expect("JSON output");
    let cmp = j["comparisons"].as_array().expect("comparisons");
    assert_eq!(cmp.len(), 2);
    assert_eq!(cmp[0]["regression"], false);
    assert_eq!(cmp[1]["regression"], true);
    assert!(
        cmp[1]["new"]["file"]
            .as_str()
            .unwrap_or("")
            .ends_with("slow.json")
    );
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_file() {
    let d = Dir::new();
    let good = d.write("good.json", &golden_text("sim-burst"));
    let mut newer = golden("sim-burst");
    newer["metadata"]["schema_version"] = Value::from(99);
    let full = golden_text("sim-burst");
    let cases = [
        (
            "newer.json",
            serde_json::to_string(&newer).expect("json"),
            "schema_version is 99",
        ),
        (
            "truncated.json",
            full[..full.len() / 2].to_string(),
            "truncated",
        ),
        (
            "other.json",
            r#"{"name": "not a result"}"#.to_string(),
            "not an llm-decode-bench result",
        ),
    ];
    for (name, content, why) in cases {
        let bad = d.write(name, &content);
        for args in [[good.as_str(), bad.as_str()], [bad.as_str(), good.as_str()]] {
            let o = run(&["compare", args[0], args[1]]);
            assert_eq!(code(&o), Some(2), "{name}: {}", describe(&o));
            let err = one_line_error(&o);
            assert!(err.contains(name) && err.contains(why), "{name}: {err}");
        }
    }
    let missing = d.path("missing.json");
    let o = run(&["compare", &good, missing.to_str().expect("path")]);
    assert_eq!(code(&o), Some(2), "{}", describe(&o));
    assert!(one_line_error(&o).contains("missing.json"));
    // One file is not a comparison; a negative threshold is not one either.
    assert_eq!(code(&run(&["compare", &good])), Some(2));
    let o = run(&["compare", "--threshold=-1", &good, &good]);
    assert_eq!(code(&o), Some(2), "{}", describe(&o));
    assert!(one_line_error(&o).contains("--threshold"));
}

#[test]
fn different_settings_are_refused_unless_forced() {
    let d = Dir::new();
    let base = d.write("base.json", &golden_text("sim-burst"));
    let mut other = golden("sim-burst");
    other["metadata"]["engine_version"] = Value::from("0.12.0");
    other["metadata"]["duration_per_test"] = Value::from(30.0);
    let c = cell_mut(&mut other, 0, 1);
    c["aggregate_tps"] = Value::from(c["aggregate_tps"].as_f64().expect("tps") * 2.0);
    let new = d.json("other.json", &other);

    let o = run(&["compare", &base, &new]);
    assert_eq!(code(&o), Some(2), "{}", describe(&o));
    let err = one_line_error(&o);
    for part in [
        "not comparable",
        "engine_version 0.11.0-sim → 0.12.0",
        "duration_per_test 1 → 30",
        "--force",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(o.stdout.is_empty());

    let o = run(&["compare", "--force", &base, &new]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "engine_version: 0.11.0-sim → 0.12.0 (not comparable; compared because of --force)"
        ),
        "{out}"
    );
    assert!(out.contains("+100.0% ✓"), "{out}");
}

#[test]
fn the_csv_has_one_row_per_cell_with_the_json_values() {
    let d = Dir::new();
    let f = d.write("run.json", &golden_text("sim-burst"));
    let csv_path = d.path("cells.csv");
    let md_path = d.path("tables.md");
    let o = run(&[
        "report",
        &f,
        "--csv",
        csv_path.to_str().expect("path"),
        "--markdown",
        md_path.to_str().expect("path"),
    ]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    // stdout: the run's final report, exactly as the renderer makes it.
    let loaded = ldb_report::load_result_file(Path::new(&f)).expect("loads");
    let opts = ldb_report::text::TextOptions {
        width: 140,
        ..Default::default()
    };
    let want_report = ldb_report::text::render_to_string(&loaded, &opts);
    assert_eq!(text(&o.stdout), want_report);
    assert!(want_report.contains("Aggregate tok/s"));

    let doc = golden("sim-burst");
    let mut want: Vec<(&str, &Value)> = Vec::new();
    for (kind, key) in [("decode", "results"), ("burst", "burst_results")] {
        for c in doc[key].as_array().expect("cells") {
            want.push((kind, c));
        }
    }
    let mut r = csv::Reader::from_path(&csv_path).expect("CSV opens");
    let head = r.headers().expect("header").clone();
    assert_eq!(&head[0], "kind");
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row parses")).collect();
    assert_eq!(rows.len(), want.len());
    let mut checked = 0;
    for (row, (kind, cell)) in rows.iter().zip(&want) {
        assert_eq!(&row[0], *kind);
        for (i, name) in head.iter().enumerate().skip(1) {
            let Some(v) = cell.get(name) else { continue };
            let field = &row[i];
            match v {
                Value::Null => assert_eq!(field, "", "{name}"),
                Value::Number(n) => {
                    let got: f64 = field
                        .parse()
                        .unwrap_or_else(|_| panic!("{name}: {field:?}"));
                    assert_eq!(Some(got), n.as_f64(), "{kind} {name}");
                }
                Value::String(s) => assert_eq!(field, s, "{name}"),
                Value::Bool(b) => assert_eq!(field, b.to_string(), "{name}"),
                _ => continue,
            }
            checked += 1;
        }
    }
    assert!(
        checked > rows.len() * 20,
        "most columns are JSON keys ({checked})"
    );

    let md = std::fs::read_to_string(&md_path).expect("markdown written");
    assert!(md.contains("## Decode: aggregate tok/s"), "{md}");
    assert!(md.contains("| ctx \\ C | 1 | 2 |"), "{md}");

    // `-`: the CSV on stdout instead of the report.
    let o = run(&["report", &f, "--csv", "-"]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    let out = text(&o.stdout);
    assert!(out.starts_with("kind,concurrency,context_tokens,"), "{out}");
    assert_eq!(out.lines().count(), 1 + want.len());
}

#[test]
fn report_refuses_bad_input_in_one_line() {
    let d = Dir::new();
    let bad = d.write("cut.json", "{\"metadata\": {");
    let o = run(&["report", &bad]);
    assert_eq!(code(&o), Some(2), "{}", describe(&o));
    assert!(one_line_error(&o).contains("cut.json"));
    let good = d.write("run.json", &golden_text("sim-burst"));
    let o = run(&["report", &good, "--csv", "-", "--markdown", "-"]);
    assert_eq!(code(&o), Some(2), "{}", describe(&o));
    one_line_error(&o);
    let o = run(&[
        "report",
        &good,
        "--csv",
        d.path("no/such/dir/x.csv").to_str().expect("path"),
    ]);
    assert_eq!(code(&o), Some(5), "{}", describe(&o));
    assert!(one_line_error(&o).contains("x.csv"));
}

/// A small vLLM-like simulator whose decode step takes `step_s`: one token
/// per step and sequence, so a lone stream decodes 1 / `step_s` tok/s.
fn scenario(step_s: f64) -> String {
    format!(
        r#"name = "step-{step_s}"
personality = "vllm"
model = "sim-speed"
max_model_len = 4096
seed = 7

[scheduler]
max_running = 8
prefill_tok_s = 20000.0

[step_time]
base_s = {step_s}

[kv]
block_size = 16
num_blocks = 4096

[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4
"#
    )
}

fn sim_run(d: &Dir, scenario_file: &str, out: &str) -> String {
    let out = d.path(out).to_str().expect("path").to_string();
    let o = run(&[
        "--sim",
        scenario_file,
        "--concurrency",
        "2",
        "--contexts",
        "0",
        "--max-tokens",
        "256",
        "--duration",
        "1.5",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--no-hw-monitor",
        "--display-mode",
        "plain",
        "--output",
        &out,
    ]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    out
}

#[test]
fn the_simulator_at_half_speed_is_a_regression_of_about_half() {
    let d = Dir::new();
    let fast = d.write("fast.toml", &scenario(0.02));
    let slow = d.write("slow.toml", &scenario(0.04));
    let (fast_run, slow_run) = (
        sim_run(&d, &fast, "fast.json"),
        sim_run(&d, &slow, "slow.json"),
    );

    let o = run(&["compare", "--format", "json", &fast_run, &slow_run]);
    assert_eq!(code(&o), Some(1), "{}", describe(&o));
    let j: Value = serde_json::from_slice(&o.stdout).expect("JSON output");
    let cmp = &j["comparisons"][0];
    // Only where the runs were made differs, not what was measured.
    assert_eq!(cmp["comparable"], true, "{cmp}");
    let cell = &cmp["cells"][0];
    assert_eq!(
        (cell["layer"].as_str(), cell["concurrency"].as_u64()),
        (Some("decode"), Some(2))
    );
    assert_eq!(cell["verdict"], "regression");
    // Twice the step time: half the tokens per second, twice the gaps.
    let pct = |k: &str| {
        cell["metrics"][k]["change_pct"]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    assert!(
        (pct("aggregate_tps") + 50.0).abs() < 8.0,
        "{}",
        pct("aggregate_tps")
    );
    assert!(
        (pct("per_request_avg_tps") + 50.0).abs() < 8.0,
        "{}",
        pct("per_request_avg_tps")
    );
    assert_eq!(cell["metrics"]["aggregate_tps"]["verdict"], "regression");

    // The other way round it is an improvement, and exit 0.
    let o = run(&["compare", &slow_run, &fast_run]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    assert!(text(&o.stdout).contains("improvement"));
}

/// An open-loop run (12 requests at a constant 4 req/s) of `scenario_file`.
fn open_loop_run(d: &Dir, scenario_file: &str, out: &str) -> String {
    let out = d.path(out).to_str().expect("path").to_string();
    let o = run(&[
        "--sim",
        scenario_file,
        "--request-rate",
        "4",
        "--arrival",
        "constant",
        "--request-count",
        "12",
        "--contexts",
        "0",
        "--max-tokens",
        "32",
        "--skip-prefill",
        "--no-hw-monitor",
        "--display-mode",
        "plain",
        "--output",
        &out,
    ]);
    assert_eq!(code(&o), Some(0), "{}", describe(&o));
    out
}

/// Open-loop rate cells are compared too: at the same offered rate a server
/// half as fast delivers the same tokens per second but each request takes
/// about twice as long end to end — a regression of the latency, exit 1.
#[test]
fn open_loop_rate_cells_are_compared_by_context_and_rate() {
    let d = Dir::new();
    let fast = d.write("fast.toml", &scenario(0.02));
    let slow = d.write("slow.toml", &scenario(0.04));
    let (fast_run, slow_run) = (
        open_loop_run(&d, &fast, "fast.json"),
        open_loop_run(&d, &slow, "slow.json"),
    );
    let o = run(&["compare", "--format", "json", &fast_run, &slow_run]);
    assert_eq!(code(&o), Some(1), "{}", describe(&o));
    let j: Value = serde_json::from_slice(&o.stdout).expect("JSON output");
    let cmp = &j["comparisons"][0];
    assert_eq!(cmp["comparable"], true, "{cmp}");
    let cells = cmp["rate_cells"].as_array().expect("rate cells");
    assert_eq!(cells.len(), 1, "{cmp}");
    let cell = &cells[0];
    assert_eq!(cell["request_rate"], 4.0);
    assert_eq!(cell["verdict"], "regression", "{cell}");
    let pct = |k: &str| {
        cell["metrics"][k]["change_pct"]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    // 32 tokens at 20 ms vs 40 ms a step: twice the time per request
    assert!((60.0..140.0).contains(&pct("e2e_p99")), "{cell}");
    assert_eq!(cell["metrics"]["e2e_p99"]["verdict"], "regression");
    // the same 12 requests complete over a span (first send → last
    // completion) that grows by the longer last request: 2.75 s of sends
    // plus ~0.64 s vs ~1.28 s, so fewer completions per second
    let done = pct("achieved_rate");
    assert!((-30.0..-5.0).contains(&done), "{cell}");

    // text form: the rate table and the summary count it
    let o = run(&["compare", &fast_run, &slow_run]);
    let t = text(&o.stdout);
    assert!(t.contains("Open-loop rate cells"), "{t}");
    assert!(t.contains("rate cells."), "{t}");
}
