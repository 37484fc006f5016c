//! The completion-stats mode end to end against the in-process simulator
//! with scripted answers (`output.answers`), so every number has a known
//! truth: token counts, pass rate, the fastest level, the run count.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bin, free_port, run, text, tmp};
use serde_json::Value;

/// A small vLLM-like scenario: no speculative decoding, no per-sequence
/// slowdown, `max_running` sequences at once, and the given answers.
fn scenario(dir: &Path, max_running: u32, step_s: f64, answers: &str) -> PathBuf {
    let toml = format!(
        r#"name = "cstats-test"
description = "scripted answers for the completion-stats tests"
personality = "vllm"
model = "sim-cstats"
max_model_len = 65536
seed = 7

[scheduler]
max_running = {max_running}
prefill_tok_s = 500000.0
prefill_chunk_tokens = 8192
stream_interval = 1

[step_time]
base_s = {step_s}
per_seq_s = 0.0
per_kv_token_s = 0.0

[kv]
block_size = 16
num_blocks = 100000
cp = 1
prefix_caching = true

[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4

[output]
answers = [
{answers}
]

[server]
version = "0.11.0-sim"
"#
    );
    let p = dir.join("scenario.toml");
    std::fs::write(&p, toml).expect("scenario written");
    p
}

const TRUTH_ANSWERS: &str = r#"  { content = "Let me see.\nANSWER: Estonia", completion_tokens = 40 },
  { content = "ANSWER: Latvia", reasoning = "Two candidates", completion_tokens = 25 },
  { content = "estonia", completion_tokens = 60 },
  { content = "I ran out of room", completion_tokens = 30, finish_reason = "length" },"#;

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("result file")).expect("JSON")
}

fn schema_check(doc: &Value) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/completion-stats-schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(p).expect("schema file")).expect("schema");
    let v = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "schema errors:\n{}", errors.join("\n"));
}

#[test]
fn fixed_mode_reports_the_scripted_truth() {
    fixed_run_reports_the_scripted_truth("chat");
}

/// The same runs over the other request APIs: the simulator answers each in
/// its own event grammar, and the counts, texts and verdicts are the chat
/// run's (the completions route has no reasoning channel).
#[test]
fn every_api_reports_the_same_scripted_truth() {
    for api in ["responses", "messages", "completions"] {
        fixed_run_reports_the_scripted_truth(api);
    }
}

fn fixed_run_reports_the_scripted_truth(api: &str) {
    let (dir, out) = tmp("cs.json");
    let sc = scenario(dir.path(), 64, 0.002, TRUTH_ANSWERS);
    let o = run(&[
        "--sim",
        sc.to_str().expect("test input"),
        "--completion-stats",
        "--api",
        api,
        "--prompt",
        "Which country? Answer on the last line.",
        "--completion-stats-concurrency",
        "2",
        "--completion-stats-runs",
        "8",
        "--completion-stats-no-prefill-scout",
        "--completion-stats-save-text",
        "--no-hw-monitor",
        "--output",
        out.to_str().expect("test input"),
    ]);
    assert_eq!(o.status.code(), Some(0), "--api {api}: {}", text(&o.stderr));
    let doc = read(&out);
    schema_check(&doc);
    let md = &doc["metadata"];
    assert_eq!(md["mode"], "completion_stats");
    assert_eq!(md["api"], api);
    // the mode's default --max-tokens (40000) is sent in the API's own field
    let field = if api == "responses" {
        "max_output_tokens"
    } else {
        "max_tokens"
    };
    assert_eq!(md["token_limit_field"], field, "--api {api}");
    assert_eq!(md["max_tokens"], 40000, "--api {api}");
    assert_eq!(doc["metadata"]["fixed_concurrency"], 2);
    assert_eq!(doc["selected_concurrency"], 2);
    let runs = doc["runs"].as_array().expect("test input");
    assert_eq!(runs.len(), 8, "fixed mode runs exactly N");
    assert!(
        runs.iter()
            .all(|r| r["phase"] == "profile" && r["concurrency"] == 2)
    );
    // two whole cycles of the four answers: 40, 25, 60, 30 twice
    let s = &doc["selected_summary"];
    assert_eq!(s["completed"], 8);
    assert_eq!(s["estimated_token_runs"], 0, "usage was reported");
    let t = &s["completion_tokens"];
    assert_eq!(t["min"], 25.0);
    assert_eq!(t["max"], 60.0);
    assert_eq!(t["avg"], 38.75);
    assert_eq!(t["p50"], 35.0);
    let std = (((40.0f64 - 38.75).powi(2)
        + (25.0f64 - 38.75).powi(2)
        + (60.0f64 - 38.75).powi(2)
        + (30.0f64 - 38.75).powi(2))
        / 4.0)
        .sqrt();
    assert!((t["std"].as_f64().expect("test input") - std).abs() < 1e-9);
    // the regex \bestonia\b on the final line passes answers 1 and 3
    assert_eq!(s["correct"], 4);
    assert_eq!(s["wrong"], 4);
    assert_eq!(s["correct_rate"], 0.5);
    assert_eq!(s["score_counts"]["pass"], 4);
    assert_eq!(s["hit_max_tokens"], 2);
    assert_eq!(doc["wrong_runs"].as_array().expect("test input").len(), 4);
    assert!(doc["accuracy"].is_null(), "no dataset");
    for r in runs {
        let tokens = r["completion_tokens"].as_u64().expect("test input");
        let answer = r["final_answer"].as_str().expect("test input");
        let expected = match tokens {
            40 => "ANSWER: Estonia",
            25 => "ANSWER: Latvia",
            60 => "estonia",
            30 => "I ran out of room",
            other => panic!("unexpected length {other}"),
        };
        if api == "completions" {
            // no reasoning channel: the reasoning runs into the answer's text
            assert!(answer.ends_with(expected), "--api {api}: {answer}");
        } else {
            assert_eq!(answer, expected, "--api {api}");
        }
        assert_eq!(r["hit_max_tokens"], tokens == 30);
        if tokens == 25 && api != "completions" {
            assert_eq!(r["reasoning_text"], "Two candidates", "--api {api}");
            assert_eq!(r["content_text"], "ANSWER: Latvia", "--api {api}");
        }
        assert!(r["ttft"].as_f64().expect("test input") > 0.0);
        assert!(r["gen_elapsed"].as_f64().expect("test input") > 0.0);
    }
    let report = text(&o.stdout);
    assert!(report.contains("Selected C=2"), "{report}");
    assert!(report.contains("PASS 4 / FAIL 4"), "{report}");
    assert!(report.contains("Results saved to"), "{report}");
}

#[test]
fn adaptive_mode_picks_the_level_where_the_simulator_is_fastest() {
    let (dir, out) = tmp("cs.json");
    // two sequences decode at once; more wait in the queue, so the total
    // output rate stops growing after C = 2
    let sc = scenario(
        dir.path(),
        2,
        0.004,
        r#"  { content = "ANSWER: estonia", completion_tokens = 100 },"#,
    );
    let o = run(&[
        "--sim",
        sc.to_str().unwrap(),
        "--completion-stats",
        "--prompt",
        "Name the country.",
        "--completion-stats-concurrency-levels",
        "4,2,8",
        "--completion-stats-min-improvement",
        "0.3",
        "--completion-stats-min-results",
        "4",
        "--no-hw-monitor",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = read(&out);
    schema_check(&doc);
    assert_eq!(
        doc["metadata"]["concurrency_levels_requested"],
        serde_json::json!([1, 2, 4, 8])
    );
    assert_eq!(doc["selected_concurrency"], 2);
    let levels: Vec<(u64, String, bool)> = doc["level_summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["concurrency"].as_u64().unwrap(),
                l["phase"].as_str().unwrap().to_owned(),
                l["improved"].as_bool().unwrap(),
            )
        })
        .collect();
    // C=8 never probed: patience 1 stops after C=4
    assert_eq!(
        levels,
        vec![
            (1, "probe".into(), true),
            (2, "probe".into(), true),
            (4, "probe".into(), false),
            (2, "collect".into(), false),
        ]
    );
    assert!(doc["prefill_scout"]["phase"] == "prefill_scout");
    assert_eq!(doc["prefill_scout"]["completion_tokens"], 1);
    let s = &doc["selected_summary"];
    assert_eq!(s["completed"], 4, "min-results at the selected level");
    assert_eq!(s["completion_tokens"]["avg"], 100.0);
    assert_eq!(s["correct_rate"], 1.0);
}

#[test]
fn a_stopped_run_keeps_a_valid_partial_result() {
    let (dir, out) = tmp("cs.json");
    // each answer takes ~4 s
    let sc = scenario(
        dir.path(),
        64,
        0.02,
        r#"  { content = "ANSWER: estonia", completion_tokens = 200 },"#,
    );
    let child = bin()
        .args([
            "--sim",
            sc.to_str().unwrap(),
            "--completion-stats",
            "--prompt",
            "Name the country.",
            "--completion-stats-concurrency",
            "2",
            "--completion-stats-runs",
            "6",
            "--no-hw-monitor",
            "--output",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    // the scout's result is saved first; stop during the batch after it
    let t0 = Instant::now();
    while !out.exists() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(out.exists(), "the scout was saved");
    std::thread::sleep(Duration::from_millis(500));
    common::signal(&child, "-TERM");
    let o = child.wait_with_output().expect("exits");
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let doc = read(&out);
    schema_check(&doc);
    assert_eq!(doc["metadata"]["interrupted"], true);
    let runs = doc["runs"].as_array().unwrap();
    assert!(runs.len() < 6, "stopped early");
    assert!(
        runs.iter()
            .all(|r| r["cancelled"] == true && r["finish_reason"] == "client_cancelled")
    );
    assert!(text(&o.stdout).contains("Results saved to"));
}

/// A flag set that fails before anything is sent: nothing listens on the
/// port, so an attempt to connect would end with exit code 3, not 2.
fn rejected(extra: &[&str]) -> String {
    let port = free_port().to_string();
    let (_dir, out) = tmp("never.json");
    let mut args = vec![
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--no-hw-monitor",
        "--output",
        out.to_str().expect("UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!out.exists());
    err
}

#[test]
fn bad_input_is_one_line_and_exit_2_before_anything_is_sent() {
    let (dir, _) = tmp("x");
    let missing = dir.path().join("missing.txt");
    let e = rejected(&[
        "--completion-stats",
        "--prompt-file",
        missing.to_str().unwrap(),
    ]);
    assert!(
        e.contains("--prompt-file") && e.contains("no such file"),
        "{e}"
    );
    let latin1 = dir.path().join("latin1.txt");
    std::fs::write(&latin1, b"caf\xe9 prompt").unwrap();
    let e = rejected(&[
        "--completion-stats",
        "--prompt-file",
        latin1.to_str().unwrap(),
    ]);
    assert!(e.contains("not UTF-8"), "{e}");
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--prompt-file",
        "b.txt",
    ]);
    assert!(e.contains("--prompt and --prompt-file conflict"), "{e}");
    let e = rejected(&["--prompt", "a", "--test-profile", "gsm8k"]);
    assert!(e.contains("conflict"), "{e}");
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--completion-stats-correct-regex",
        "(unclosed",
    ]);
    assert!(
        e.contains("invalid --completion-stats-correct-regex"),
        "{e}"
    );
    let e = rejected(&["--completion-stats"]);
    assert!(
        e.contains("--prompt, --prompt-file, --test-profile or --profile-file"),
        "{e}"
    );
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--completion-stats-patience",
        "0",
    ]);
    assert!(e.contains("--completion-stats-patience"), "{e}");
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--completion-stats-score-source",
        "title",
    ]);
    assert!(e.contains("final_answer, content or output"), "{e}");
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--completion-stats-concurrency-levels",
        "1,x",
    ]);
    assert!(e.contains("concurrency-levels"), "{e}");
    let e = rejected(&["--prompt", "a"]);
    assert!(
        e.contains("--prompt only applies to the completion-stats mode"),
        "{e}"
    );
    let e = rejected(&["--completion-stats", "--prompt", "a", "--resume"]);
    assert!(e.contains("--resume applies to the decode matrix"), "{e}");
    let e = rejected(&[
        "--completion-stats",
        "--prompt",
        "a",
        "--dataset-file",
        "d.jsonl",
    ]);
    assert!(e.contains("--dataset-file needs a dataset profile"), "{e}");
}

/// A four-item GSM8K-format file (answers 1–4) in `dir`.
fn tiny_gsm8k(dir: &Path) -> PathBuf {
    let p = dir.join("gsm8k-tiny.jsonl");
    let lines: Vec<String> = (1..=4)
        .map(|n| {
            serde_json::json!({
                "question": format!("What is {n} times one?"),
                "answer": format!("{n} * 1 = {n}\n#### {n}"),
            })
            .to_string()
        })
        .collect();
    std::fs::write(&p, lines.join("\n") + "\n").expect("dataset written");
    p
}

/// One sequential run of the tiny dataset whose scripted answers are the
/// final lines `answers` (in item order).
fn dataset_run(dir: &Path, name: &str, answers: [&str; 4], extra: &[&str]) -> (PathBuf, String) {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).expect("dir");
    let script: Vec<String> = answers
        .iter()
        .map(|a| format!("  {{ content = \"Working.\\n{a}\", completion_tokens = 20 }},"))
        .collect();
    let sc = scenario(&sub, 8, 0.002, &script.join("\n"));
    let data = tiny_gsm8k(&sub);
    let out = sub.join("result.json");
    let mut args = vec![
        "--sim",
        sc.to_str().expect("UTF-8 path"),
        "--test-profile",
        "gsm8k",
        "--dataset-file",
        data.to_str().expect("UTF-8 path"),
        "--completion-stats-concurrency",
        "1",
        "--completion-stats-no-prefill-scout",
        "--max-tokens",
        "200",
        "--no-hw-monitor",
        "--output",
        out.to_str().expect("UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    (out, text(&o.stdout))
}

/// `--compare-baseline` after a run: items paired by id, the flips and the
/// exact McNemar p of the known answers, embedded as `comparison` and
/// printed. Baseline right on items 1, 2; candidate right on 1, 3, 4.
#[test]
fn a_run_with_a_baseline_embeds_the_paired_comparison() {
    let (dir, _) = tmp("unused");
    let (base, _) = dataset_run(dir.path(), "base", ["1", "2", "0", "0"], &[]);
    let base_doc = read(&base);
    assert_eq!(
        base_doc["accuracy"]["correct"], 2,
        "{}",
        base_doc["accuracy"]
    );
    let base_arg = base.to_str().unwrap().to_string();
    let (cand, report) = dataset_run(
        dir.path(),
        "cand",
        ["1", "0", "3", "4"],
        &["--compare-baseline", &base_arg],
    );
    let doc = read(&cand);
    schema_check(&doc);
    let c = &doc["comparison"];
    assert_eq!(c["paired_items"], 4, "{c}");
    assert_eq!(c["baseline_correct"], 2);
    assert_eq!(c["candidate_correct"], 3);
    assert_eq!(c["flips_baseline_only_correct"], 1);
    assert_eq!(c["flips_candidate_only_correct"], 2);
    // two-sided exact binomial on 1 vs 2 discordant items: 2 · P(X ≤ 1) = 1
    assert!((c["mcnemar_exact_p"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    assert!((c["delta_pp"].as_f64().unwrap() - 25.0).abs() < 1e-9, "{c}");
    assert_eq!(
        c["flip_item_ids"]["baseline_only_correct"],
        serde_json::json!(["gsm8k-0002"])
    );
    assert!(report.contains("Shared items: 4"), "{report}");

    // a baseline that is not a completion-stats result: one line, exit 2,
    // before anything is sent
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{\"metadata\": {}}").expect("write");
    let err = rejected(&[
        "--completion-stats",
        "--prompt",
        "hi",
        "--compare-baseline",
        bogus.to_str().unwrap(),
    ]);
    assert!(err.contains("bogus.json"), "{err}");
}
