//! TTFT taken apart by the engine's own histograms, end to end against the
//! simulator's known truth (docs/methodology.md §9.4).

mod common;

use std::sync::Arc;

use common::FLAT;
use ldb_core::result::CellResult;
use ldb_sim::Personality;

/// The flat scenario prefills 10,000 prompt tokens per second.
const PREFILL_TOK_S: f64 = 10_000.0;
/// One decode step at batch 1 (10 ms + 0.2 ms per sequence).
const STEP_S: f64 = 0.0102;

/// One sustained cell of a single stream on the flat scenario as
/// `personality`: 1,000-token prompts, 8 output tokens, cache off.
async fn one_cell(personality: Personality) -> CellResult {
    cell_of(personality, 1000, 0.0).await
}

/// [`one_cell`] at `context` tokens, behind an HTTP front end that holds
/// every chunk `chunk_delay_s` before writing it.
async fn cell_of(personality: Personality, context: u64, chunk_delay_s: f64) -> CellResult {
    let _serial = common::SERIAL.lock().await;
    let sim = common::start(FLAT, |s| {
        s.kv.prefix_caching = false;
        s.personality = personality;
        s.faults.frontend_chunk_delay_s = chunk_delay_s;
    })
    .await;
    let mut cfg = common::config(&sim, &[1], &[context], 2.0);
    cfg.matrix.max_tokens = 8;
    // Requests this short never give readiness a steady rate: open the
    // window after a second (the cell is then capacity-limited, which
    // does not touch the breakdown).
    cfg.timing.cell_warmup_timeout = 1.0;
    let (doc, _) = common::bench(cfg, Arc::default()).await;
    sim.shutdown().await;
    doc.results.into_iter().next().expect("a cell")
}

/// One stream of 1,000-token prompts and 8 output tokens, cache off: every
/// request waits for no one (queue 0, at most one step before it is
/// admitted) and prefills alone in p / 10,000 s. The window's histograms
/// must say so within their bucket bounds, and queue + prefill must add up
/// to the engine's TTFT, which the client's TTFT exceeds by a little
/// (loopback HTTP and the stream's first chunk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sustained_breakdown_matches_the_simulator_truth() {
    let cell = &one_cell(Personality::Vllm).await;
    let b = cell.ext.ttft_breakdown.as_ref().expect("a breakdown");
    eprintln!(
        "ready: {} / {} after {:.1} s (wall {:.1} s)",
        cell.ready_reason, cell.timeout_reason, cell.warmup_duration, cell.wall_time
    );
    assert_eq!(b.source, "prometheus_histograms");
    let names: Vec<&str> = b.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ttft", "queue", "prefill", "decode", "inference"]);
    for c in &b.components {
        assert!(c.count.unwrap_or(0) >= 3, "{}: {:?}", c.name, c.reason);
    }
    let prompt = cell.latency.input_seq_len_avg;
    let prefill_truth = prompt / PREFILL_TOK_S;
    // each quantile's bucket holds the truth (the bound is the bucket)
    let holds = |name: &str, truth: f64, slack: f64| {
        let q = b.component(name).unwrap().p50.unwrap();
        let high = q.high.unwrap();
        assert!(
            q.low <= truth + slack && truth <= high + slack,
            "{name} p50 {:.4} in [{}, {high}] misses the truth {truth:.4}",
            q.value,
            q.low
        );
        assert!((q.value - truth).abs() <= high - q.low + slack);
    };
    holds("prefill", prefill_truth, 0.0);
    holds("queue", 0.0, 0.0);
    holds("ttft", prefill_truth, STEP_S);
    // exact means: prefill within a step of the truth, queue under a step
    let mean = |n: &str| b.mean_of(n).unwrap();
    assert!(
        (mean("prefill") - prefill_truth).abs() < STEP_S,
        "{}",
        mean("prefill")
    );
    assert!(mean("queue") < STEP_S, "queue {}", mean("queue"));
    // decode: 7 steps after the first token
    assert!(
        (mean("decode") - 7.0 * STEP_S).abs() < 2.0 * STEP_S,
        "{}",
        mean("decode")
    );
    assert!((mean("inference") - (mean("prefill") + mean("decode"))).abs() < STEP_S);
    // the parts add up to the engine's TTFT, and the engine's to the client's
    assert!((mean("queue") + mean("prefill") - mean("ttft")).abs() < STEP_S);
    let overhead = b.frontend_overhead_mean_s.expect("overhead");
    let client = cell.latency.ttft.expect("client ttft").avg;
    assert!((b.client_ttft_mean_s.unwrap() - client).abs() < 1e-9);
    assert!(
        (-0.005..0.1).contains(&overhead),
        "client {client:.4} engine {:.4}",
        mean("ttft")
    );
    assert!(!b.frontend_dominant);
    let range = b.frontend_overhead_p50_range_s.unwrap();
    let p50 = b.frontend_overhead_p50_s.unwrap();
    assert!(range[0].unwrap() <= p50 && p50 <= range[1].unwrap());
    assert_eq!(b.preemptions, Some(0));
    // and it survives the file
    let json = serde_json::to_value(cell).unwrap();
    assert_eq!(json["ttft_breakdown"]["components"][2]["name"], "prefill");
    let back: ldb_core::result::CellResult = serde_json::from_value(json).unwrap();
    assert_eq!(back.ext.ttft_breakdown.as_ref(), Some(b));
}

/// llama.cpp: the same stream from each request's `timings`, exact values
/// over the very requests the client timed. The simulator's `prompt_ms`
/// runs from the request's arrival to its first token: the prefill truth
/// plus at most a step of waiting for the engine's loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llamacpp_breakdown_comes_from_the_requests_timings() {
    let cell = one_cell(Personality::LlamaCpp).await;
    let b = cell.ext.ttft_breakdown.as_ref().expect("a breakdown");
    assert_eq!(b.source, "llamacpp_timings");
    assert_eq!(b.engine_ttft_component, "prefill");
    let prefill = b.engine_ttft().unwrap();
    assert!(prefill.count.unwrap() >= 3, "{prefill:?}");
    assert_eq!(prefill.p50.unwrap().error_bound(), Some(0.0));
    let truth = cell.latency.input_seq_len_avg / PREFILL_TOK_S;
    let mean = prefill.mean_s.unwrap();
    assert!(
        (mean - truth).abs() < 2.0 * STEP_S,
        "prefill {mean} vs {truth}"
    );
    assert!((b.mean_of("decode").unwrap() - 7.0 * STEP_S).abs() < 2.0 * STEP_S);
    let overhead = b.frontend_overhead_mean_s.unwrap();
    assert!((-0.005..0.1).contains(&overhead), "{overhead}");
    assert_eq!(b.cached_prompt_tokens_mean, Some(0.0));
}

/// SGLang: TTFT, queue and the prefill stage from its histograms; the
/// simulator's series exist from the start, and a stage it does not
/// export is simply not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_breakdown_reads_its_own_histograms() {
    let cell = one_cell(Personality::Sglang).await;
    let b = cell.ext.ttft_breakdown.as_ref().expect("a breakdown");
    let names: Vec<&str> = b.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ttft", "queue", "prefill"]);
    let truth = cell.latency.input_seq_len_avg / PREFILL_TOK_S;
    let prefill = b.mean_of("prefill").unwrap();
    assert!(
        (prefill - truth).abs() < STEP_S,
        "prefill {prefill} vs {truth}"
    );
    let sum = b.mean_of("queue").unwrap() + prefill;
    assert!((sum - b.mean_of("ttft").unwrap()).abs() < STEP_S);
    assert_eq!(b.preemptions, Some(0));
}

/// A slow HTTP front end (each chunk held 60 ms before it is written): the
/// engine's TTFT stays a few milliseconds, the client's grows by at least
/// one chunk's wait, and the cell says the time is not the engine's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_front_end_shows_as_overhead_and_is_flagged() {
    let delay = 0.06;
    let cell = cell_of(Personality::Vllm, 0, delay).await;
    let b = cell.ext.ttft_breakdown.as_ref().expect("a breakdown");
    let engine = b.mean_of("ttft").unwrap();
    let overhead = b.frontend_overhead_mean_s.unwrap();
    assert!(engine < 0.03, "engine TTFT {engine}");
    assert!(overhead >= delay - 0.005, "overhead {overhead}");
    assert!(b.frontend_dominant, "{b:?}");
    assert!(b.note.as_deref().unwrap().contains("not the engine"));
}
