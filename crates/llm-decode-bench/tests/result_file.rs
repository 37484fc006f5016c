//! The result file as a contract, against the binary: every key path of the
//! reference tool's result is in ours, a file we wrote reads back and writes
//! the same bytes, the reference file loads, and bad files get one-line errors.
//!
//! The reference result (GLM-5.3-Flash on 4 GPUs, C 1,2,4 × ctx 0,64k) stays
//! outside the repository; what these tests need from it is the project's own
//! fixture in `crates/ldb-core/tests/fixtures/`: its key paths
//! (`reference-key-paths.txt`) and a small result in its layout with its
//! numbers but without its prose (`reference-result.json`), both recorded by
//! `scripts/record-reference-fixture.py`. A clone runs these tests alone.

mod engine;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ldb_core::document::ResultDocument;
use ldb_core::hardware::HardwareSummary;
use ldb_report::load_result_file;
use serde_json::Value;

/// The reference's layout and numbers (see the module doc).
fn seed_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldb-core/tests/fixtures/reference-result.json")
}

fn seed() -> Value {
    let text = std::fs::read_to_string(seed_path()).expect("the reference fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

/// Every key path of the whole reference result (all its cells).
fn reference_key_paths() -> BTreeSet<String> {
    include_str!("../../ldb-core/tests/fixtures/reference-key-paths.txt")
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every leaf's key path: array elements as `[]`, numeric map keys
/// (contexts, concurrencies) as `*`. Empty arrays and objects add nothing,
/// so a path means "this key can carry a value".
fn key_paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let k = if k.parse::<u64>().is_ok() { "*" } else { k };
                let p = if at.is_empty() {
                    k.to_string()
                } else {
                    format!("{at}.{k}")
                };
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{at}[]"), out);
            }
        }
        _ => {
            out.insert(at.to_string());
        }
    }
}

/// `[1, 2, 4]` → `1,2,4`, the form of the list flags.
fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Runs the simulator with the seed's matrix (cells shortened to 2 s) and
/// returns the result file's text.
fn sim_run_with_seed_args(dir: &Path) -> String {
    let s = seed();
    let md = &s["metadata"];
    let out = dir.join("sim.json");
    let mut args = vec![
        "--sim".to_string(),
        "glm-5.3-flash-4gpu".into(),
        "--display-mode".into(),
        "plain".into(),
        "--duration".into(),
        "2".into(),
        "--concurrency".into(),
        list(&md["concurrency_levels"]),
        "--contexts".into(),
        list(&md["context_lengths"]),
        "--max-tokens".into(),
        md["max_tokens"].to_string(),
        "--output".into(),
        out.to_string_lossy().into_owned(),
    ];
    if let Some(p) = s["startup_diagnostics"]["args"]["prefill_contexts"].as_str() {
        args.extend(["--prefill-contexts".into(), p.to_string()]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_llm-decode-bench"))
        .args(&args)
        .env("COLUMNS", "140")
        .output()
        .expect("binary runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        engine::text(&o.stdout),
        engine::text(&o.stderr)
    );
    std::fs::read_to_string(&out).expect("result file")
}

/// Key paths that exist only on some hosts, so a simulator run on a machine
/// without GPUs cannot have them. Hardware summaries are checked against the
/// typed summary instead (see `hardware_keys`).
const HOST_ONLY: [&str; 2] = [
    // The raw nvidia-smi captures, present only where nvidia-smi runs.
    "startup_diagnostics.nvidia_smi_",
    // `{}` without GPU telemetry.
    "hardware_run_summary.",
];

/// Keys a non-empty hardware summary writes.
fn hardware_keys() -> BTreeSet<String> {
    let full = HardwareSummary {
        samples: 1,
        ..HardwareSummary::default()
    };
    let v = serde_json::to_value(full).expect("summary JSON");
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn a_sim_run_has_every_key_path_of_the_reference_and_reads_back_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = sim_run_with_seed_args(dir.path());
    let ours: Value = serde_json::from_str(&text).expect("our JSON");
    engine::assert_valid("sim with the seed's arguments", &ours);

    let mut have = BTreeSet::new();
    key_paths(&ours, "", &mut have);
    let want = reference_key_paths();
    // the fixture's own paths are among the recorded ones (same rule)
    let mut small = BTreeSet::new();
    key_paths(&seed(), "", &mut small);
    assert!(small.is_subset(&want), "fixture and key-path list disagree");
    let hw = hardware_keys();
    let missing: Vec<&String> = want
        .iter()
        .filter(|p| !have.contains(*p))
        .filter(|p| !HOST_ONLY.iter().any(|h| p.starts_with(h)))
        .filter(|p| {
            let hw_key = p
                .strip_prefix("results[].hardware_summary.")
                .or_else(|| p.strip_prefix("hardware_run_summary."));
            !hw_key.is_some_and(|k| hw.contains(k))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "key paths of the reference result missing from ours:\n{}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );

    let doc = ResultDocument::from_json_str(&text).expect("our file loads");
    assert!(
        doc.to_json_string() == text,
        "read back and written again, the sim result changed bytes"
    );
}

#[test]
fn the_reference_result_loads_and_keeps_its_numbers() {
    let doc = load_result_file(&seed_path()).expect("reference file loads");
    assert_eq!(doc.metadata.concurrency_levels, vec![1, 2, 4]);
    assert_eq!(doc.metadata.context_lengths, vec![0, 65536]);
    assert_eq!(doc.metadata.schema_version, 0);
    assert_eq!(doc.metadata.run_status, None);
    // the fixture keeps the reference's first and last of its 6 cells
    assert_eq!(doc.results.len(), 2);
    let c1 = &doc.results[0];
    assert_eq!(c1.aggregate_tps, Some(129.45196578500713));
    assert_eq!(c1.aggregate_source, "openai_continuous_usage");
    assert_eq!(c1.request_samples.len(), 2);
    assert_eq!(c1.hardware_summary.gpu_count, 4);
    assert_eq!(c1.spec.pos_accept.len(), 7);
    assert_eq!(doc.results[1].aggregate_source, "prometheus_fallback");
    assert_eq!(
        doc.prefill[&8192].method.map(|m| m.as_str()),
        Some("scout_only")
    );
    assert_eq!(doc.hardware_run_summary.samples, 243);
    // Written in our layout (with our added keys defaulted), it reads back
    // to the same bytes. It is not schema-valid: the reference had no
    // `run_status` or `token_targeting`, and "" stands for unknown.
    let ours = doc.to_json_string();
    let again = ResultDocument::from_json_str(&ours).expect("re-written reference loads");
    assert!(
        again.to_json_string() == ours,
        "re-written reference is not stable"
    );
}

/// `(name, content)` of each bad input, and a word its error must contain.
fn bad_inputs() -> Vec<(&'static str, String, &'static str)> {
    let seed_text = std::fs::read_to_string(seed_path()).expect("seed file");
    let mut newer = seed();
    newer["metadata"]["schema_version"] = Value::from(99);
    vec![
        (
            "not-json.json",
            "Aggregate tok/s\n  C=1 129.4\n".into(),
            "not JSON",
        ),
        (
            "other.json",
            r#"{"model": "x", "choices": []}"#.into(),
            "no `metadata`",
        ),
        (
            "no-results.json",
            r#"{"metadata": {}}"#.into(),
            "no `results`",
        ),
        (
            "array.json",
            "[1, 2]".into(),
            "not an llm-decode-bench result",
        ),
        (
            "truncated.json",
            seed_text[..seed_text.len() / 2].to_string(),
            "truncated",
        ),
        ("empty.json", String::new(), "truncated"),
        ("newer.json", newer.to_string(), "schema_version is 99"),
        (
            "misfit.json",
            r#"{"metadata": {"run_status": "paused"}, "results": []}"#.into(),
            "unknown variant `paused`",
        ),
    ]
}

#[test]
fn bad_files_give_one_line_errors_that_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content, word) in bad_inputs() {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write input");
        let msg = match load_result_file(&path) {
            Ok(_) => panic!("{name}: loaded"),
            Err(e) => e.to_string(),
        };
        assert!(!msg.contains('\n'), "{name}: not one line: {msg}");
        assert!(
            msg.starts_with(&path.display().to_string()),
            "{name}: {msg}"
        );
        assert!(msg.contains(word), "{name}: want {word:?} in: {msg}");
    }
    let missing = dir.path().join("absent.json");
    let msg = load_result_file(&missing).err().map(|e| e.to_string());
    let msg = msg.unwrap_or_default();
    assert!(
        msg.contains("absent.json") && msg.contains("cannot read"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

/// Every shape of a cell's `ttft_breakdown` the code writes (histograms
/// with an absent component and an open last bucket; llama.cpp's exact
/// timings; a flagged front end) is valid under the schema's definition.
#[test]
fn ttft_breakdown_shapes_are_schema_valid() {
    use ldb_core::histogram::Histogram;
    use ldb_core::ttft_breakdown::{ClientTtft, TimedRequest, from_histograms, from_timings};
    use ldb_core::ttft_breakdown::{ComponentSeries, LatencyHistograms};
    let mut schema = serde_json::Map::new();
    schema.insert("$defs".into(), engine::schema()["$defs"].clone());
    schema.insert("$ref".into(), "#/$defs/ttft_breakdown".into());
    let validator = jsonschema::validator_for(&Value::Object(schema)).expect("schema compiles");
    let hist = |cum: &[f64], sum: f64| Histogram {
        bounds: vec![0.1, 0.2],
        cumulative: cum.to_vec(),
        sum,
    };
    let side = |cum: &[f64], sum: f64| LatencyHistograms {
        components: vec![
            ComponentSeries {
                name: "ttft".into(),
                metric: "vllm:time_to_first_token_seconds".into(),
                series: [(String::new(), hist(cum, sum))].into(),
            },
            ComponentSeries {
                name: "decode".into(),
                metric: "vllm:request_decode_time_seconds".into(),
                series: Default::default(),
            },
        ],
        lazy_series: false,
        preemptions: Some(1.0),
        preemptions_source: Some("vllm:num_preemptions_total"),
    };
    let histos = from_histograms(
        &side(&[0.0, 0.0, 0.0], 0.0),
        &side(&[1.0, 1.0, 4.0], 3.0),
        ClientTtft::from_values(&[2.0, 2.5]),
    );
    assert!(histos.frontend_dominant || histos.note.is_some());
    let r = TimedRequest {
        prompt_s: 0.1,
        predicted_s: 1.0,
        cache_n: 4.0,
        client_ttft: 0.12,
    };
    for (name, b) in [
        ("histograms", histos),
        ("timings", from_timings(&[r, r])),
        ("no requests", from_timings(&[])),
    ] {
        let v = serde_json::to_value(&b).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{v}");
    }
}
