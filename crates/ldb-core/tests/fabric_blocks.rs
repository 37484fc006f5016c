//! The typed `p2pmark` and `amd_fabric` blocks (docs/fabric.md) read every
//! shape the diagnostics write — ok, unavailable, error (and the helper's
//! missing binary and timeout), and not run — into their fields, and
//! written again give the same JSON, key order included, inside a whole
//! result document. The shapes are in the key order `ldb-fabric` writes
//! them (the built-in GPU back end starts with `binary` and `mode`, the CPU
//! one with `status`).

use ldb_core::document::{FabricBlock, FabricStatus, ResultDocument};
use serde_json::{Value, json};

/// A minimal result document holding the two blocks, as text.
fn document(p2pmark: &Value, amd_fabric: &Value) -> String {
    let mut doc = ResultDocument::default();
    doc.metadata.version = "0.1.0".into();
    doc.metadata.schema_version = ldb_core::result::SCHEMA_VERSION;
    let mut v = doc.to_json();
    v["p2pmark"] = p2pmark.clone();
    v["amd_fabric"] = amd_fabric.clone();
    v.to_string()
}

/// Read both blocks inside a document, check them with `check`, and
/// check that the document written again holds the same blocks, byte for
/// byte.
fn round_trip(p2pmark: Value, amd_fabric: Value, check: impl Fn(&FabricBlock, &FabricBlock)) {
    let text = document(&p2pmark, &amd_fabric);
    let doc = ResultDocument::from_json_str(&text).expect("the document loads");
    check(&doc.p2pmark, &doc.amd_fabric);
    let again = doc.to_json();
    assert_eq!(again["p2pmark"].to_string(), p2pmark.to_string());
    assert_eq!(again["amd_fabric"].to_string(), amd_fabric.to_string());
}

#[test]
fn ok_blocks_keep_their_data_and_extra_keys() {
    let cpu = json!({"status": "ok", "binary": "native",
        "topology": {"cpu_model": "AMD EPYC", "node_distances": {"0": [10, 32], "1": [32, 10]}},
        "notes": [], "elapsed_seconds": 2.345,
        "data": {"tool": "llm_amd_fabric", "version": 2, "numa_nodes": 2,
            "read_gbps": [[40.5, 20.25], [null, 41.0]]}});
    let gpu = json!({"binary": "native", "mode": "all", "status": "ok",
        "elapsed_seconds": 12.5,
        "data": {"peer_access": [[1, 1], [1, 1]], "bandwidth_gbps": [[null, 50.1], [49.9, null]],
            "errors": {}},
        "machine": {"cuda_driver": "libcuda.so.1 (CUDA 12.8)", "gpus": ["GPU 0: H200"]}});
    round_trip(gpu, cpu, |p, c| {
        assert_eq!(c.status, FabricStatus::Ok);
        assert_eq!(c.binary.as_deref(), Some("native"));
        assert_eq!(c.elapsed_seconds, Some(2.345));
        assert_eq!(c.data()["read_gbps"][0][1], 20.25);
        assert_eq!(c.extra_key("topology")["cpu_model"], "AMD EPYC");
        assert_eq!(p.status, FabricStatus::Ok);
        assert_eq!(p.mode.as_deref(), Some("all"));
        assert_eq!(p.extra_key("machine")["gpus"][0], "GPU 0: H200");
        assert!(p.ran() && c.ran());
    });
}

#[test]
fn unavailable_blocks_keep_their_reason() {
    let gpu = json!({"binary": "native", "mode": "all", "status": "unavailable",
        "reason": "peer-to-peer needs at least 2 GPUs; 1 visible, 1 to be used",
        "single_gpu": {"gpu": 0, "local_copy_gbps": 1800.5, "errors": {}},
        "elapsed_seconds": 0.812});
    let cpu = json!({"status": "unavailable", "reason": "no NUMA information"});
    round_trip(gpu, cpu, |p, c| {
        assert_eq!(p.status, FabricStatus::Unavailable);
        assert!(p.reason.as_deref().is_some_and(|r| r.contains("2 GPUs")));
        assert_eq!(p.extra_key("single_gpu")["gpu"], 0);
        assert_eq!(c.reason.as_deref(), Some("no NUMA information"));
        assert_eq!(c.data, None);
    });
}

#[test]
fn error_missing_binary_and_timeout_blocks_keep_why() {
    let gpu = json!({"binary": "native", "mode": "bandwidth", "status": "error",
        "error": "bandwidth: cuMemAlloc failed"});
    let helper = json!({"binary": "/x/llm_amd_fabric", "status": "missing_binary",
        "error": "amd_fabric binary not found or not executable: /x/llm_amd_fabric",
        "suggestion": "build it with: make -C tools/amd_fabric"});
    round_trip(gpu, helper, |p, c| {
        assert_eq!(p.status, FabricStatus::Error);
        assert_eq!(p.error.as_deref(), Some("bandwidth: cuMemAlloc failed"));
        assert_eq!(c.status, FabricStatus::MissingBinary);
        assert!(c.suggestion.is_some());
    });
    let timed_out = json!({"binary": "/x/p2p", "cmd": ["/x/p2p", "--mode", "all"],
        "stdout": "", "stderr": "partial\nline", "elapsed_seconds": 30.001,
        "status": "timeout", "timeout_seconds": 30.0, "returncode": -9,
        "data": null, "parse_error": "no JSON line"});
    round_trip(timed_out, json!({"status": "not_run"}), |p, _| {
        assert_eq!(p.status, FabricStatus::Timeout);
        assert_eq!(p.timeout_seconds, Some(30.0));
        assert_eq!(p.returncode, Some(-9));
        assert_eq!(p.cmd.as_ref().map(Vec::len), Some(3));
        assert_eq!(p.stderr.as_deref(), Some("partial\nline"));
        assert_eq!(p.parse_error.as_deref(), Some("no JSON line"));
    });
}

#[test]
fn blocks_not_run_and_absent_ones_are_written_as_not_run() {
    round_trip(
        json!({"status": "not_run"}),
        json!({"status": "not_run"}),
        |p, c| {
            assert!(!p.ran() && !c.ran());
            assert_eq!(p, &FabricBlock::default());
        },
    );
    // an older file without the blocks (or with `null`) reads as not run
    let mut v: Value = serde_json::from_str(&document(&Value::Null, &Value::Null)).expect("JSON");
    v.as_object_mut().expect("object").remove("p2pmark");
    let doc = ResultDocument::from_json_str(&v.to_string()).expect("loads");
    assert_eq!(doc.to_json()["p2pmark"], json!({"status": "not_run"}));
    assert_eq!(doc.to_json()["amd_fabric"], json!({"status": "not_run"}));
}

#[test]
fn keys_of_newer_writers_and_unknown_statuses_survive() {
    let newer = json!({"status": "degraded", "binary": "native", "future_key": {"x": [1, 2]},
        "timeout_seconds": 60, "reason": null});
    round_trip(newer, json!({"status": "not_run"}), |p, _| {
        assert_eq!(p.status, FabricStatus::Other("degraded".into()));
        assert!(p.ran());
        assert_eq!(p.extra_key("future_key")["x"][1], 2);
        // an integer is not the f64 field: kept as written, not converted
        assert_eq!(p.timeout_seconds, None);
        assert_eq!(p.extra_key("timeout_seconds"), 60);
    });
}
