//! What the simulator-truth tests share: a flat vLLM-like scenario, an
//! in-process simulator, a run configuration and the run itself.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::sync::Arc;

use ldb_core::document::ResultDocument;
use ldb_core::result::CellResult;
use ldb_runner::{Controls, Live, RunConfig, RunHooks, run};
use ldb_sim::{Scenario, SimHandle, SimServer};

/// Timing tests share two cores: run them one at a time so one test's
/// streams do not steal the CPU another test's clock depends on.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A vLLM-like server: `max_running` 32, 100 steps/s at batch 1 with a small
/// per-sequence cost, no context cost, no speculative decoding.
pub const FLAT: &str = r#"
name = "flat"
personality = "vllm"
model = "sim-flat"
max_model_len = 65536
seed = 7
[scheduler]
max_running = 32
prefill_tok_s = 10000.0
prefill_chunk_tokens = 16384
[step_time]
base_s = 0.010
per_seq_s = 0.0002
[kv]
block_size = 16
num_blocks = 100000
[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4
"#;

pub async fn start(toml: &str, patch: impl FnOnce(&mut Scenario)) -> SimHandle {
    let mut s = Scenario::from_toml_str(toml, "test scenario").expect("scenario");
    patch(&mut s);
    SimServer::start(s, None, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("sim start")
}

pub fn config(sim: &SimHandle, conc: &[u32], ctxs: &[u64], duration: f64) -> RunConfig {
    RunConfig {
        target: ldb_runner::config::TargetConfig {
            base_url: sim.base_url(),
            server_label: sim.base_url(),
            ..Default::default()
        },
        matrix: ldb_runner::config::MatrixConfig {
            concurrency: conc.to_vec(),
            contexts: ctxs.to_vec(),
            max_tokens: 4096,
            duration,
            decode_warmup_seconds: 0.0,
            ..Default::default()
        },
        prefill: ldb_runner::config::PrefillConfig {
            prefill_contexts: vec![],
            calibration_cache: None,
            ..Default::default()
        },
        timing: ldb_runner::config::TimingConfig {
            cell_pause_seconds: 0.0,
            ..Default::default()
        },
        output: ldb_runner::config::OutputConfig {
            output: std::env::temp_dir().join("ldb-runner-test.json"),
            ..Default::default()
        },
        ..RunConfig::default()
    }
}

pub async fn bench(cfg: RunConfig, controls: Arc<Controls>) -> (ResultDocument, bool) {
    let (live, _rx) = Live::new();
    let hooks = RunHooks {
        live,
        controls,
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let out = run(cfg, hooks).await.expect("run");
    (out.doc, out.interrupted)
}

pub fn cell(doc: &ResultDocument, c: u32, ctx: u64) -> &CellResult {
    doc.results
        .iter()
        .find(|r| r.concurrency == c && r.context_tokens == ctx)
        .unwrap_or_else(|| panic!("no cell C={c} ctx={ctx}"))
}

pub fn within(measured: f64, truth: f64, tol: f64) -> bool {
    (measured / truth - 1.0).abs() <= tol
}
