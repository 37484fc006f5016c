//! vLLM exposition (`vllm:` names, `engine` and `model_name` labels).

use std::fmt::Write as _;

use super::Out;
use crate::engine::stats::EngineStats;
use crate::scenario::Scenario;

pub(super) fn render(cfg: &Scenario, s: &EngineStats) -> String {
    let l = format!("engine=\"0\",model_name=\"{}\"", cfg.model);
    let mut o = Out {
        text: String::with_capacity(8192),
    };
    scheduler_gauges(&mut o, &l, s);
    cache_config_info(&mut o, cfg);
    token_counters(&mut o, &l, s);
    request_success(&mut o, &l, s);
    if let Some(spec) = &cfg.spec {
        spec_decode(&mut o, &l, s, spec.num_speculative_tokens as usize);
    }
    latency_histograms(&mut o, &l, s);
    o.text
}

/// Requests running and waiting, and the share of KV blocks in use.
fn scheduler_gauges(o: &mut Out, l: &str, s: &EngineStats) {
    o.metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        l,
        s.running as f64,
    );
    o.metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        l,
        s.waiting as f64,
    );
    let usage = s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64;
    o.metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        l,
        usage,
    );
}

/// `vllm:cache_config_info`: the KV cache's configuration as labels, with
/// the context-parallel ones only where the scenario asks for them.
fn cache_config_info(o: &mut Out, cfg: &Scenario) {
    let kv = &cfg.kv;
    let mut info = format!(
        "block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"{}\",engine=\"0\",gpu_memory_utilization=\"0.9\",num_cpu_blocks=\"None\",num_gpu_blocks=\"{}\",num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"sha256\",sliding_window=\"None\"",
        kv.block_size,
        if kv.prefix_caching { "True" } else { "False" },
        kv.num_blocks
    );
    if kv.cp > 1 && cfg.server.cp_labels {
        let _ = write!(
            info,
            ",decode_context_parallel_size=\"{cp}\",dcp_world_size=\"{cp}\",prefill_context_parallel_size=\"1\",effective_attention_block_size=\"{}\",kv_cache_size_tokens=\"{}\"",
            kv.logical_block_tokens(),
            kv.capacity_tokens(),
            cp = kv.cp,
        );
    }
    o.metric(
        "vllm:cache_config_info",
        "gauge",
        "Information of the LLMEngine CacheConfig",
        &info,
        1.0,
    );
}

/// Preemptions and the prompt, generation and prefix-cache token counters.
fn token_counters(o: &mut Out, l: &str, s: &EngineStats) {
    o.metric(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        l,
        s.preemptions as f64,
    );
    o.metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        l,
        s.prompt_tokens as f64,
    );
    o.family(
        "vllm:prompt_tokens_by_source",
        "counter",
        "Number of prompt tokens by source.",
    );
    o.sample(
        "vllm:prompt_tokens_by_source_total",
        &format!("{l},source=\"local_compute\""),
        s.prompt_tokens_computed as f64,
    );
    o.sample(
        "vllm:prompt_tokens_by_source_total",
        &format!("{l},source=\"local_cache_hit\""),
        s.prompt_tokens_cached as f64,
    );
    o.metric(
        "vllm:prompt_tokens_cached_total",
        "counter",
        "Number of cached prompt tokens.",
        l,
        s.prompt_tokens_cached as f64,
    );
    o.metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        l,
        s.generated_tokens as f64,
    );
    o.metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        l,
        s.prefix_queries as f64,
    );
    o.metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        l,
        s.prefix_hits as f64,
    );
}

/// Finished requests by finish reason, every reason shown even at zero.
fn request_success(o: &mut Out, l: &str, s: &EngineStats) {
    o.family(
        "vllm:request_success",
        "counter",
        "Count of successfully processed requests.",
    );
    for reason in ["stop", "length", "abort"] {
        let v = s.finished_by_reason.get(reason).copied().unwrap_or(0);
        o.sample(
            "vllm:request_success_total",
            &format!("{l},finished_reason=\"{reason}\""),
            v as f64,
        );
    }
}

/// Speculative decoding's drafts and acceptances, per draft position up to
/// the scenario's `positions`.
fn spec_decode(o: &mut Out, l: &str, s: &EngineStats, positions: usize) {
    o.metric(
        "vllm:spec_decode_num_drafts_total",
        "counter",
        "Number of spec decoding drafts.",
        l,
        s.spec_drafts as f64,
    );
    o.metric(
        "vllm:spec_decode_num_draft_tokens_total",
        "counter",
        "Number of draft tokens.",
        l,
        s.spec_draft_tokens as f64,
    );
    o.metric(
        "vllm:spec_decode_num_accepted_tokens_total",
        "counter",
        "Number of accepted tokens.",
        l,
        s.spec_accepted as f64,
    );
    o.family(
        "vllm:spec_decode_num_accepted_tokens_per_pos",
        "counter",
        "Accepted tokens per draft position.",
    );
    for i in 0..positions {
        let v = s.spec_accepted_per_pos.get(i).copied().unwrap_or(0);
        o.sample(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            &format!("{l},position=\"{i}\""),
            v as f64,
        );
    }
}

/// The per-request latency and prefill histograms.
fn latency_histograms(o: &mut Out, l: &str, s: &EngineStats) {
    o.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        l,
        &s.ttft,
    );
    o.histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        l,
        &s.e2e,
    );
    o.histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        l,
        &s.queue_time,
    );
    o.histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        l,
        &s.prefill_time,
    );
    o.histogram(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        l,
        &s.decode_time,
    );
    o.histogram(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        l,
        &s.inference_time,
    );
    o.histogram(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill.",
        l,
        &s.prefill_kv_computed,
    );
}
