//! llama.cpp exposition (`llamacpp:` names, no labels).

use super::Out;
use crate::engine::stats::EngineStats;
use crate::scenario::Scenario;

pub(super) fn render(cfg: &Scenario, s: &EngineStats) -> String {
    let mut o = Out {
        text: String::with_capacity(4096),
    };
    work_counters(&mut o, s);
    load_gauges(&mut o, cfg, s);
    if let Some(spec) = &cfg.spec {
        spec_decode(&mut o, s, spec.num_speculative_tokens as usize);
    }
    o.text
}

/// Tokens and time spent on prompts and generation, and decode calls.
fn work_counters(o: &mut Out, s: &EngineStats) {
    o.metric(
        "llamacpp:prompt_tokens_total",
        "counter",
        "Number of prompt tokens processed.",
        "",
        s.prompt_tokens_computed as f64,
    );
    o.metric(
        "llamacpp:prompt_seconds_total",
        "counter",
        "Prompt process time",
        "",
        s.prefill_seconds,
    );
    o.metric(
        "llamacpp:tokens_predicted_total",
        "counter",
        "Number of generation tokens processed.",
        "",
        s.generated_tokens as f64,
    );
    o.metric(
        "llamacpp:tokens_predicted_seconds_total",
        "counter",
        "Predict process time",
        "",
        s.decode_seconds,
    );
    o.metric(
        "llamacpp:n_decode_total",
        "counter",
        "Total number of llama_decode() calls",
        "",
        s.engine_steps as f64,
    );
    o.metric(
        "llamacpp:n_tokens_max",
        "counter",
        "Largest observed n_tokens.",
        "",
        s.max_step_tokens as f64,
    );
}

/// Busy slots, average throughputs, requests in flight and KV use.
fn load_gauges(o: &mut Out, cfg: &Scenario, s: &EngineStats) {
    let rate = |n: u64, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let busy = if s.decode_steps > 0 {
        s.decode_seq_steps as f64 / s.decode_steps as f64
    } else {
        0.0
    };
    o.metric(
        "llamacpp:n_busy_slots_per_decode",
        "gauge",
        "Average number of busy slots per llama_decode() call",
        "",
        busy,
    );
    o.metric(
        "llamacpp:prompt_tokens_seconds",
        "gauge",
        "Average prompt throughput in tokens/s.",
        "",
        rate(s.prompt_tokens_computed, s.prefill_seconds),
    );
    o.metric(
        "llamacpp:predicted_tokens_seconds",
        "gauge",
        "Average generation throughput in tokens/s.",
        "",
        rate(s.generated_tokens, s.decode_seconds),
    );
    o.metric(
        "llamacpp:requests_processing",
        "gauge",
        "Number of requests processing.",
        "",
        s.running as f64,
    );
    o.metric(
        "llamacpp:requests_deferred",
        "gauge",
        "Number of requests deferred.",
        "",
        s.waiting as f64,
    );
    // Present in builds up to mid 2025; clients use them for KV utilisation.
    let used_tokens = s.kv_blocks_used as f64 * f64::from(cfg.kv.logical_block_tokens());
    o.metric(
        "llamacpp:kv_cache_usage_ratio",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        "",
        used_tokens / cfg.kv.capacity_tokens().max(1) as f64,
    );
    o.metric(
        "llamacpp:kv_cache_tokens",
        "gauge",
        "KV-cache tokens.",
        "",
        s.kv_tokens_used as f64,
    );
}

/// Speculative decoding's drafts and acceptances, per draft position up to
/// the scenario's `positions`.
fn spec_decode(o: &mut Out, s: &EngineStats, positions: usize) {
    o.metric(
        "llamacpp:spec_decode_num_drafts_total",
        "counter",
        "Number of drafts.",
        "",
        s.spec_drafts as f64,
    );
    o.metric(
        "llamacpp:spec_decode_num_draft_tokens_total",
        "counter",
        "Number of draft tokens.",
        "",
        s.spec_draft_tokens as f64,
    );
    o.metric(
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "counter",
        "Number of accepted tokens.",
        "",
        s.spec_accepted as f64,
    );
    o.family(
        "llamacpp:spec_decode_num_accepted_tokens_per_pos",
        "counter",
        "Accepted tokens per position.",
    );
    for i in 0..positions {
        let v = s.spec_accepted_per_pos.get(i).copied().unwrap_or(0);
        o.sample(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
            &format!("position=\"{i}\""),
            v as f64,
        );
    }
}
