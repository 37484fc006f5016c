//! The README's test command is `cargo nextest run`, which runs every test in
//! its own process and tests of different files side by side. A timing test
//! that keeps other tests off the CPU with a process-wide lock
//! (`common::SERIAL`, `ONE_AT_A_TIME`) or a real-engine test is protected
//! there only by `.config/nextest.toml`: the engines run alone, the timing
//! tests two at a time and beside nothing else. This test fails when such a
//! test file is missing from those lists, or a real engine from the list of
//! those that run alone, so a new test cannot quietly lose its isolation.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("workspace root")
        .to_path_buf()
}

/// The markers of a test file that must run alone: a process-wide lock
/// taken, or one of the real-engine server scripts the tests start.
const MARKERS: [&str; 5] = [
    "SERIAL.lock(",
    "ONE_AT_A_TIME",
    "vllm-server.sh",
    "sglang-server.sh",
    "llama-server.sh",
];

/// `crate::file` of every integration test file carrying a marker.
fn must_run_alone(root: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    let crates = std::fs::read_dir(root.join("crates")).expect("crates/");
    for krate in crates.flatten() {
        let Ok(files) = std::fs::read_dir(krate.path().join("tests")) else {
            continue;
        };
        for file in files.flatten() {
            let path = file.path();
            let this_file = path.file_name().is_some_and(|n| n == "test_isolation.rs");
            if this_file || path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("test file");
            if MARKERS.iter().any(|m| text.contains(m)) {
                let stem = path.file_stem().expect("stem").to_string_lossy();
                let name = krate.file_name().to_string_lossy().into_owned();
                ids.push(format!("{name}::{stem}"));
            }
        }
    }
    ids.sort();
    ids
}

#[test]
fn every_test_that_needs_the_machine_alone_runs_alone_under_nextest() {
    let root = workspace_root();
    let config =
        std::fs::read_to_string(root.join(".config/nextest.toml")).expect(".config/nextest.toml");
    let missing: Vec<String> = must_run_alone(&root)
        .into_iter()
        .filter(|id| !config.contains(&format!("binary_id({id})")))
        .collect();
    assert!(
        missing.is_empty(),
        "these test files take a process-wide lock or start a real engine, \
         but .config/nextest.toml does not keep other tests away: {missing:?}"
    );
    let alone = alone_block(&config);
    let engines_not_alone: Vec<&str> = ENGINES
        .iter()
        .copied()
        .filter(|id| !alone.contains(&format!("binary_id({id})")))
        .collect();
    assert!(
        engines_not_alone.is_empty(),
        "real-engine tests must run alone (threads-required = \"num-test-threads\"): \
         {engines_not_alone:?}"
    );
}

/// The tests that load both cores: real engines and the client CPU self-test.
const ENGINES: [&str; 4] = [
    "llm-decode-bench::vllm",
    "llm-decode-bench::sglang",
    "llm-decode-bench::llamacpp",
    "llm-decode-bench::selftest",
];

/// The filter of the override that takes every slot (`threads-required =
/// "num-test-threads"`): the text between its `[[profile.default.overrides]]`
/// header and that line.
fn alone_block(config: &str) -> &str {
    config
        .split("[[profile.default.overrides]]")
        .find(|block| block.contains("threads-required = \"num-test-threads\""))
        .expect("an override that runs tests alone")
}

#[test]
fn the_scan_finds_the_known_timing_and_engine_tests() {
    // Guards the scan itself: if the markers stopped matching, the check
    // above would pass on an empty list.
    let ids = must_run_alone(&workspace_root());
    for id in [
        "ldb-runner::accuracy",
        "llm-decode-bench::vllm",
        "llm-decode-bench::sglang",
        "llm-decode-bench::llamacpp",
        "llm-decode-bench::selftest",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} not found in {ids:?}");
    }
}
