//! The prefill–decode interference probe (`--mixed-prefill-contexts`)
//! against the simulator's closed-form truth of chunked prefill under a
//! per-step token budget (`scheduler.max_num_batched_tokens`).
//!
//! The truth: C streams decode in steps of `BASE_S`; a prompt of L tokens
//! arriving beside them is prefilled `budget − C` tokens per step, so it
//! takes ⌈L / (budget − C)⌉ chunk steps of `BASE_S + (budget − C) /
//! PREFILL_TOK_S` each (the last one shorter by its smaller chunk). Each
//! stream's longest gap during the injection is one chunk step; the prompt's
//! TTFT is the sum of its chunk steps, against `L / PREFILL_TOK_S` alone.

mod common;

use std::sync::Arc;

use common::within;
use ldb_core::interference::Injection;
use ldb_runner::Controls;

const BASE_S: f64 = 0.010;
const PREFILL_TOK_S: f64 = 10_000.0;
const C: u32 = 4;
const L: u64 = 4096;

/// A vLLM-like server whose steps cost `BASE_S` whatever the batch.
const FLAT_STEP: &str = r#"
name = "flat-step"
personality = "vllm"
model = "sim-flat"
max_model_len = 65536
seed = 7
[scheduler]
max_running = 32
prefill_tok_s = 10000.0
[step_time]
base_s = 0.010
[kv]
block_size = 16
num_blocks = 100000
[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4
"#;

/// The probe's injection of L with a step budget of `budget` tokens, and
/// the cell's aggregate tok/s and window end.
async fn probe(budget: u32) -> (Injection, f64, f64) {
    let sim = common::start(FLAT_STEP, |s| {
        s.scheduler.max_num_batched_tokens = Some(budget);
    })
    .await;
    let mut cfg = common::config(&sim, &[C], &[0], 1.0);
    cfg.matrix.mixed_prefill_contexts = vec![L];
    cfg.output.output = std::env::temp_dir().join("ldb-runner-interference-test.json");
    let (doc, _) = common::bench(cfg, Arc::new(Controls::default())).await;
    sim.shutdown().await;
    let cell = common::cell(&doc, C, 0);
    let probe = cell.ext.interference.clone().expect("the cell has a probe");
    assert_eq!(probe.injections.len(), 1, "{probe:?}");
    let inj = probe.injections[0].clone();
    assert_eq!(inj.skipped, None, "{inj:?}");
    let agg = cell.aggregate_tps.expect("aggregate");
    (inj, agg, cell.ext.window_end_unix.expect("window end"))
}

/// Chunk steps and one chunk step's time for `budget`.
fn truth(budget: u32) -> (u64, f64, f64) {
    let chunk = u64::from(budget - C);
    let chunks = L.div_ceil(chunk);
    let step = BASE_S + chunk as f64 / PREFILL_TOK_S;
    let last = BASE_S + (L - (chunks - 1) * chunk) as f64 / PREFILL_TOK_S;
    let ttft = (chunks - 1) as f64 * step + last;
    (chunks, step, ttft)
}

/// Two budgets: each one's stall is one chunk step, its TTFT the sum of
/// its chunk steps, its solo TTFT the prefill alone; the two stalls stand
/// in the closed-form ratio; the window closed before the injection and
/// its rate is the undisturbed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_and_ttft_follow_the_chunk_count() {
    let _serial = common::SERIAL.lock().await;
    let mut stalls = Vec::new();
    for budget in [516u32, 1028] {
        let (chunks, step, ttft) = truth(budget);
        let (inj, agg, window_end) = probe(budget).await;
        let at = format!("budget {budget} ({chunks} chunks of {step:.4} s): {inj:?}");
        // The median stream's longest gap is one chunk step; the longest of
        // all is at least that (a late read of this client only adds).
        let stall = inj.stall_p50_s.expect("stall p50");
        assert!(within(stall, step, 0.15), "stall {stall} vs {step}; {at}");
        assert!(inj.stall_max_s.expect("stall") >= step * 0.9, "{at}");
        let measured = inj.ttft_s.expect("ttft");
        // The prompt may also wait for the step under way when it arrives.
        assert!(
            measured >= ttft * 0.95 && measured <= (ttft + BASE_S) * 1.1,
            "ttft {measured} vs {ttft}; {at}"
        );
        let solo = inj.solo_ttft_s.expect("solo ttft");
        let alone = L as f64 / PREFILL_TOK_S;
        assert!(within(solo, alone, 0.1), "solo {solo} vs {alone}; {at}");
        // Inflation: the chunk steps' sum (plus at most one step's wait)
        // over the prefill alone.
        let inflation = inj.ttft_inflation.expect("inflation");
        let (low, high) = (ttft / alone, (ttft + BASE_S) / alone);
        assert!(
            inflation >= low * 0.93 && inflation <= high * 1.07,
            "inflation {inflation} vs {low:.3}–{high:.3}; {at}"
        );
        assert_eq!(inj.streams, C, "{at}");
        assert_eq!(inj.streams_stalled, C, "{at}");
        assert!(inj.decode_loss_pct.expect("loss") > 50.0, "{at}");
        // The headline window closed before the injection, undisturbed.
        let sent = inj.injected_at_unix.expect("sent at");
        assert!(
            sent > window_end,
            "injected {sent} before the window end {window_end}"
        );
        let undisturbed = f64::from(C) / BASE_S;
        assert!(
            within(agg, undisturbed, 0.05),
            "aggregate {agg} vs {undisturbed}"
        );
        stalls.push((stall, step));
    }
    let (got, want) = (stalls[1].0 / stalls[0].0, stalls[1].1 / stalls[0].1);
    assert!(within(got, want, 0.15), "stall ratio {got} vs {want}");
}
