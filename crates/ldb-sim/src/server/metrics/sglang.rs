//! SGLang exposition (`sglang:` scheduler and tokenizer metrics).

use super::Out;
use crate::engine::stats::EngineStats;
use crate::scenario::Scenario;

pub(super) fn render(cfg: &Scenario, s: &EngineStats) -> String {
    let sl = format!(
        "engine_type=\"unified\",model_name=\"{}\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"",
        cfg.model
    );
    let tl = format!("model_name=\"{}\"", cfg.model);
    let mut o = Out {
        text: String::with_capacity(8192),
    };
    scheduler_gauges(&mut o, &sl, cfg, s);
    if cfg.spec.is_some() {
        spec_gauges(&mut o, &sl, s);
    }
    scheduler_latencies(&mut o, &sl, s);
    token_counters(&mut o, &tl, s);
    cached_tokens(&mut o, &tl, s);
    request_outcomes(&mut o, &tl, s);
    o.text
}

/// The scheduler's load gauges (labelled by rank): requests, KV tokens in
/// use and their share, throughput and cache hit rate, pool size.
fn scheduler_gauges(o: &mut Out, sl: &str, cfg: &Scenario, s: &EngineStats) {
    let cap = cfg.kv.capacity_tokens().max(1) as f64;
    let used = s.kv_blocks_used as f64 * f64::from(cfg.kv.logical_block_tokens());
    o.metric(
        "sglang:num_running_reqs",
        "gauge",
        "The number of running requests.",
        sl,
        s.running as f64,
    );
    o.metric(
        "sglang:num_queue_reqs",
        "gauge",
        "The number of requests in the waiting queue.",
        sl,
        s.waiting as f64,
    );
    o.metric(
        "sglang:num_used_tokens",
        "gauge",
        "The number of used tokens.",
        sl,
        used,
    );
    o.metric(
        "sglang:token_usage",
        "gauge",
        "The token usage.",
        sl,
        used / cap,
    );
    o.metric(
        "sglang:utilization",
        "gauge",
        "The utilization.",
        sl,
        used / cap,
    );
    o.metric(
        "sglang:gen_throughput",
        "gauge",
        "The generation throughput (token/s).",
        sl,
        s.interval_gen_throughput,
    );
    o.metric(
        "sglang:cache_hit_rate",
        "gauge",
        "The prefix cache hit rate.",
        sl,
        s.last_batch_cache_hit_rate,
    );
    o.metric(
        "sglang:max_total_num_tokens",
        "gauge",
        "Maximum total number of tokens in the KV cache pool.",
        sl,
        cfg.kv.local_capacity_tokens() as f64,
    );
}

/// Speculative decoding's acceptance over the last logging interval.
fn spec_gauges(o: &mut Out, sl: &str, s: &EngineStats) {
    o.metric(
        "sglang:spec_accept_length",
        "gauge",
        "The average acceptance length of speculative decoding.",
        sl,
        s.interval_accept_length,
    );
    o.metric(
        "sglang:spec_accept_rate",
        "gauge",
        "The average acceptance rate of speculative decoding.",
        sl,
        s.interval_accept_rate,
    );
}

/// Retractions and the scheduler's queueing and prefill-stage histograms.
fn scheduler_latencies(o: &mut Out, sl: &str, s: &EngineStats) {
    o.metric(
        "sglang:num_retracted_requests_total",
        "counter",
        "Number of retracted requests.",
        sl,
        s.preemptions as f64,
    );
    o.histogram(
        "sglang:queue_time_seconds",
        "Histogram of queueing time in seconds.",
        sl,
        &s.queue_time,
    );
    let stage = format!("{sl},stage=\"prefill_forward\"");
    o.histogram(
        "sglang:per_stage_req_latency_seconds",
        "The latency of each stage of requests.",
        &stage,
        &s.prefill_time,
    );
}

/// The tokenizer's prompt and generation counters, and the per-step ones.
fn token_counters(o: &mut Out, tl: &str, s: &EngineStats) {
    o.metric(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        tl,
        s.prompt_tokens as f64,
    );
    // Like SGLang 0.5: this counter moves when a request finishes, while the
    // per-step counter below moves with every decode step.
    o.metric(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        tl,
        s.finished_generated_tokens as f64,
    );
    o.family(
        "sglang:realtime_tokens",
        "counter",
        "Tokens processed, updated every step.",
    );
    o.sample(
        "sglang:realtime_tokens_total",
        &format!("{tl},mode=\"prefill_compute\""),
        s.prompt_tokens_computed as f64,
    );
    o.sample(
        "sglang:realtime_tokens_total",
        &format!("{tl},mode=\"decode\""),
        s.generated_tokens as f64,
    );
}

/// Requests processed and aborted, and the per-request latency histograms.
fn request_outcomes(o: &mut Out, tl: &str, s: &EngineStats) {
    o.metric(
        "sglang:num_requests_total",
        "counter",
        "Number of requests processed.",
        tl,
        (s.completed + s.aborted) as f64,
    );
    o.metric(
        "sglang:num_aborted_requests_total",
        "counter",
        "Number of requests aborted.",
        tl,
        s.aborted as f64,
    );
    o.histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        tl,
        &s.ttft,
    );
    o.histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        tl,
        &s.e2e,
    );
}

/// `sglang:cached_tokens_total`: SGLang 0.5.23 splits it by where the cached
/// tokens came from; the simulator's cache is all device memory. A labelled
/// counter is exported once it moved: no series before the first cache hit
/// (seen on SGLang 0.5.23's idle page).
fn cached_tokens(o: &mut Out, tl: &str, s: &EngineStats) {
    o.family(
        "sglang:cached_tokens",
        "counter",
        "Number of cached prompt tokens by source (device/host/storage).",
    );
    let source = match tl.is_empty() {
        true => "cache_source=\"device\"".to_string(),
        false => format!("cache_source=\"device\",{tl}"),
    };
    if s.prompt_tokens_cached > 0 {
        o.sample(
            "sglang:cached_tokens_total",
            &source,
            s.prompt_tokens_cached as f64,
        );
    }
}
