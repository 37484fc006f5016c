//! The interference probe's model judged by real vLLM: what the benchmark
//! recorded at two chunked-prefill budgets (fixtures/interference-vllm-0.32.0,
//! with the command that recorded it) against the closed form the simulator
//! implements. A stream's longest gap while a long prompt prefills is one
//! engine step that carries a chunk of the prompt: the decode step g plus
//! (B − C) prompt tokens at the engine's prefill rate r. Absolute times on
//! a CPU run late by 15–20 % (later chunks also attend over the prompt's
//! earlier ones); the ratio of two budgets' stalls cancels most of that.

use std::path::Path;

use ldb_core::interference::{Injection, Interference};
use serde::Deserialize;

/// One recording: the budget, the streams and the probe's block.
#[derive(Deserialize)]
struct Recorded {
    engine_version: String,
    max_num_batched_tokens: u64,
    concurrency: u64,
    interference: Interference,
}

fn recorded(budget: u64) -> Recorded {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/fixtures/interference-vllm-0.32.0/budget-{budget}.json"
    ));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The one injection of a recording, measured.
fn injection(r: &Recorded) -> &Injection {
    let [i] = r.interference.injections.as_slice() else {
        panic!("one injection expected");
    };
    assert!(i.skipped.is_none(), "{:?}", i.skipped);
    i
}

/// The closed-form chunk step: decode step + the chunk's prompt tokens at
/// the prefill rate the solo probe measured (L ÷ solo TTFT).
fn chunk_step_s(r: &Recorded) -> f64 {
    let i = injection(r);
    let rate = i.prompt_tokens as f64 / i.solo_ttft_s.expect("solo TTFT");
    let chunk = (r.max_num_batched_tokens - r.concurrency) as f64;
    i.baseline_gap_s.expect("baseline gap") + chunk / rate
}

#[test]
fn the_recordings_read_back_and_come_from_vllm() {
    for budget in [256, 1024] {
        let r = recorded(budget);
        assert_eq!(r.engine_version, "0.32.0");
        let i = injection(&r);
        assert_eq!(i.prompt_tokens, 2048);
        assert_eq!(i.streams, 2);
        // Every stream stalled: a whole chunk step is far above 3 × the
        // decode gap.
        assert_eq!(i.streams_stalled, 2, "budget {budget}");
    }
}

#[test]
fn a_larger_budget_stalls_longer_in_the_ratio_of_its_chunk_steps() {
    let (small, large) = (recorded(256), recorded(1024));
    let measured = injection(&large).stall_p50_s.expect("stall")
        / injection(&small).stall_p50_s.expect("stall");
    let predicted = chunk_step_s(&large) / chunk_step_s(&small);
    eprintln!("stall ratio 1024 / 256: measured {measured:.2}, closed form {predicted:.2}");
    // Four times the prompt tokens a step: the stall is about 3.5–4 times
    // longer, and within 10 % of the closed form.
    assert!(measured > 3.0, "{measured}");
    assert!(
        (measured / predicted - 1.0).abs() < 0.10,
        "measured {measured:.2} vs closed form {predicted:.2}"
    );
    // The whole prefill costs about the same either way: more, shorter
    // chunks at 256, fewer, longer ones at 1024.
    let ttft = |r: &Recorded| injection(r).ttft_s.expect("TTFT");
    let (t_small, t_large) = (ttft(&small), ttft(&large));
    assert!(
        (t_small / t_large - 1.0).abs() < 0.15,
        "{t_small} vs {t_large}"
    );
}
