//! `--coding-peak` against the simulator: the `coding_peak` section holds
//! every run, the server's token counts, and a generation rate that matches
//! the simulator's decode speed.

mod common;

use common::{assert_valid, run, text, tmp};
use serde_json::Value;

/// One sequence decodes one token per 10 ms step: 100 tok/s.
fn scenario(natural_length: u32, han_at_token: u32) -> String {
    format!(
        r#"name = "coding-peak-test"
personality = "vllm"
model = "sim-peak"
max_model_len = 4096
seed = 3

[scheduler]
max_running = 4
prefill_tok_s = 50000.0

[step_time]
base_s = 0.01

[kv]
block_size = 16
num_blocks = 4096

[tokenizer]
chars_per_token = 4.0

[output]
natural_length = {natural_length}
han_at_token = {han_at_token}
"#
    )
}

/// A tiny matrix, then the probe; the result file's JSON, stdout and the
/// HTML page.
fn peak_run(scenario_text: &str, extra: &[&str]) -> (Value, String, String) {
    let (dir, out) = tmp("peak.json");
    let html = dir.path().join("page.html");
    let sc = dir.path().join("sc.toml");
    std::fs::write(&sc, scenario_text).expect("scenario written");
    let mut args = vec![
        "--sim",
        sc.to_str().expect("path"),
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--max-tokens",
        "64",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--no-hw-monitor",
        "--display-mode",
        "plain",
        "--output",
        out.to_str().expect("path"),
        "--coding-peak",
        "--html",
        html.to_str().expect("path"),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let raw = std::fs::read_to_string(&out).expect("result file");
    let page = std::fs::read_to_string(&html).expect("HTML page");
    (serde_json::from_str(&raw).expect("JSON"), stdout, page)
}

#[test]
fn runs_to_max_tokens_at_the_simulators_rate() {
    let (doc, stdout, page) = peak_run(
        &scenario(0, 0),
        &["--coding-peak-runs", "3", "--coding-peak-max-tokens", "40"],
    );
    assert_valid(&doc);
    let p = &doc["coding_peak"];
    assert_eq!(p["mode"], "coding_peak");
    assert_eq!(p["runs_requested"], 3);
    assert_eq!(p["runs_ok"], 3);
    assert_eq!(p["max_tokens"], 40);
    assert_eq!(p["temperature"], Value::Null);
    assert_eq!(
        p["prompt"],
        "Write a Python script that implements the Sieve of Eratosthenes."
    );
    let samples = p["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 3);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s["run"], i + 1);
        assert_eq!(s["ok"], true, "{s}");
        assert_eq!(s["completion_tokens"], 40, "{s}");
        assert_eq!(s["finish_reason"], "length", "{s}");
        assert_eq!(s["cjk_chars"], 0);
        // 40 tokens over the 39 steps after the first: 102.6 tok/s at the
        // simulator's pace; a loaded machine only makes it slower.
        let rate = s["generation_tok_s"].as_f64().expect("rate");
        assert!((30.0..=115.0).contains(&rate), "generation_tok_s {rate}");
        let (gen_s, total, ttft) = (
            s["gen_elapsed"].as_f64().expect("gen"),
            s["total_elapsed"].as_f64().expect("total"),
            s["ttft"].as_f64().expect("ttft"),
        );
        assert!((total - (ttft + gen_s)).abs() < 1e-6, "{s}");
        assert!(s["total_tok_s"].as_f64().expect("total rate") <= rate);
        assert!(s["content_chars"].as_u64().expect("chars") > 0);
        assert!(s["content_preview"].as_str().expect("preview").len() <= 2000);
    }
    let sum = &p["summary"];
    let (min, med, max) = (
        sum["min_generation_tok_s"].as_f64().expect("min"),
        sum["median_generation_tok_s"].as_f64().expect("median"),
        sum["max_generation_tok_s"].as_f64().expect("max"),
    );
    assert!(min <= med && med <= max, "{sum}");
    assert_eq!(sum["cjk_runs"], 0);
    let m = &doc["methodology"]["coding_peak"];
    assert_eq!(m["name"], "Coding Peak");
    assert_eq!(
        m["formula"],
        "usage.completion_tokens / (last_stream_time - first_token_time)"
    );
    assert!(stdout.contains("Coding Peak"), "{stdout}");
    assert!(stdout.contains("3/3"), "{stdout}");
    assert_eq!(stdout.matches("Results saved to").count(), 2, "{stdout}");
    assert!(page.contains("id=\"coding-peak\""));
}

#[test]
fn stops_at_the_models_end_and_counts_han_ideographs() {
    let (doc, _, _) = peak_run(
        &scenario(25, 10),
        &[
            "--coding-peak-runs",
            "2",
            "--coding-peak-max-tokens",
            "40",
            "--coding-peak-temperature",
            "0.3",
            "--coding-peak-prompt",
            "Write a sorting function.",
        ],
    );
    assert_valid(&doc);
    let p = &doc["coding_peak"];
    assert_eq!(p["prompt"], "Write a sorting function.");
    assert_eq!(p["temperature"], 0.3);
    for s in p["samples"].as_array().expect("samples") {
        // No ignore_eos: the simulated model stops at its natural length.
        assert_eq!(s["completion_tokens"], 25, "{s}");
        assert_eq!(s["finish_reason"], "stop", "{s}");
        assert_eq!(s["cjk_chars"], 1, "{s}");
    }
    assert_eq!(p["summary"]["cjk_runs"], 2);
}

#[test]
fn without_the_flag_the_result_has_no_coding_peak() {
    let (dir, out) = tmp("plain.json");
    let sc = dir.path().join("sc.toml");
    std::fs::write(&sc, scenario(0, 0)).expect("scenario");
    let o = run(&[
        "--sim",
        sc.to_str().expect("path"),
        "--concurrency",
        "1",
        "--contexts",
        "0",
        "--max-tokens",
        "32",
        "--duration",
        "1",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
        "--no-hw-monitor",
        "--display-mode",
        "plain",
        "--coding-peak-runs",
        "2",
        "--output",
        out.to_str().expect("path"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("file")).expect("JSON");
    assert!(doc.get("coding_peak").is_none());
    assert!(doc["methodology"].get("coding_peak").is_none());
}

#[test]
fn bad_coding_peak_values_are_refused_before_anything_is_sent() {
    for (flag, value) in [
        ("--coding-peak-runs", "0"),
        ("--coding-peak-max-tokens", "0"),
        ("--coding-peak-temperature", "-1"),
    ] {
        let o = run(&[
            "--coding-peak",
            flag,
            value,
            "--host",
            "127.0.0.1",
            "--port",
            "9",
        ]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        assert!(text(&o.stderr).contains(flag), "{}", text(&o.stderr));
    }
}
