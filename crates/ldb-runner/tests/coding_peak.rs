//! The coding-peak probe against the simulator: failed runs are samples, a
//! stream cut mid-answer is a failure, and clean runs measure the
//! simulator's decode rate.

mod common;

use common::{FLAT, SERIAL, start};
use ldb_runner::coding_peak::{CodingPeakConfig, run};

fn cfg(runs: u32, max_tokens: u64) -> CodingPeakConfig {
    CodingPeakConfig {
        runs,
        max_tokens,
        prompt: "Write a function.".into(),
        temperature: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_runs_are_samples_and_the_probe_goes_on() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        s.faults.error_share = 1.0;
        s.faults.error_status = 500;
    })
    .await;
    let http = ldb_client::Http::new(&sim.base_url(), None, 1).expect("client");
    let mut seen = 0;
    let p = run(&http, "sim-flat", &cfg(3, 20), |_| seen += 1).await;
    assert_eq!(seen, 3);
    assert_eq!((p.runs_requested, p.runs_ok), (3, 0));
    for (i, s) in p.samples.iter().enumerate() {
        assert_eq!(s.run, i as u32 + 1);
        assert!(!s.ok);
        assert!(
            s.error.as_deref().is_some_and(|e| e.contains("500")),
            "{s:?}"
        );
    }
    assert_eq!(p.summary.max_generation_tok_s, None);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_answer_is_a_failed_run() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| {
        s.faults.drop_after_tokens = 10;
        s.faults.drop_share = 1.0;
    })
    .await;
    let http = ldb_client::Http::new(&sim.base_url(), None, 1).expect("client");
    let p = run(&http, "sim-flat", &cfg(2, 40), |_| {}).await;
    assert_eq!(p.runs_ok, 0, "{:?}", p.samples);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_runs_measure_the_decode_rate() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.output.han_at_token = 7).await;
    let http = ldb_client::Http::new(&sim.base_url(), None, 1).expect("client");
    let p = run(&http, "sim-flat", &cfg(2, 50), |_| {}).await;
    assert_eq!(p.runs_ok, 2, "{:?}", p.samples);
    // One sequence: a token per 10.2 ms step, 50 tokens over 49 steps.
    let truth = 50.0 / (49.0 * 0.0102);
    for s in &p.samples {
        assert_eq!(s.completion_tokens, Some(50));
        assert_eq!(s.cjk_chars, Some(1));
        let r = s.generation_tok_s.expect("rate");
        assert!(r <= truth * 1.1 && r >= truth * 0.3, "{r} vs {truth}");
    }
    assert_eq!(p.summary.cjk_runs, 2);
    sim.shutdown().await;
}
