//! `GET /metrics`: Prometheus text exposition with each engine's names, types and labels.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::engine::lock;
use crate::engine::stats::{EngineStats, Histogram};
use crate::personality::Personality;
use crate::scenario::Scenario;

/// `GET /metrics`, with the scenario's slow/failing faults.
pub(crate) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    st.count("GET /metrics");
    let f = &st.cfg.faults;
    if f.metrics_delay_s > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(f.metrics_delay_s)).await;
    }
    if f.metrics_fail_share > 0.0 && st.draw() < f.metrics_fail_share {
        lock(&st.http).metrics_failures += 1;
        return (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response();
    }
    let s = st.engine.snapshot();
    let body = render(st.personality, &st.cfg, &s);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// The exposition text for `p` (empty for the OpenAI proxy).
pub(crate) fn render(p: Personality, cfg: &Scenario, s: &EngineStats) -> String {
    match p {
        Personality::Vllm => vllm(cfg, s),
        Personality::Sglang => sglang(cfg, s),
        Personality::LlamaCpp => llamacpp(cfg, s),
        Personality::OpenAi => String::new(),
    }
}

/// Formats a float the way prometheus_client does (`12.0`, `0.4375`).
fn num(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, v: f64) {
        if labels.is_empty() {
            let _ = writeln!(self.text, "{name} {}", num(v));
        } else {
            let _ = writeln!(self.text, "{name}{{{labels}}} {}", num(v));
        }
    }

    fn metric(&mut self, name: &str, kind: &str, help: &str, labels: &str, v: f64) {
        let base = name
            .strip_suffix("_total")
            .filter(|_| kind == "counter")
            .unwrap_or(name);
        self.family(base, kind, help);
        self.sample(name, labels, v);
    }

    fn histogram(&mut self, name: &str, help: &str, labels: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        let sep = if labels.is_empty() { "" } else { "," };
        for (b, c) in h
            .bounds
            .iter()
            .map(|b| num(*b))
            .chain(["+Inf".to_string()])
            .zip(h.cumulative())
        {
            let _ = writeln!(
                self.text,
                "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {}",
                num(c as f64)
            );
        }
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count as f64);
    }
}

fn vllm(cfg: &Scenario, s: &EngineStats) -> String {
    let l = format!("engine=\"0\",model_name=\"{}\"", cfg.model);
    let mut o = Out {
        text: String::with_capacity(8192),
    };
    o.metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        &l,
        s.running as f64,
    );
    o.metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        &l,
        s.waiting as f64,
    );
    let usage = s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64;
    o.metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        &l,
        usage,
    );
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
    o.metric(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        &l,
        s.preemptions as f64,
    );
    o.metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        &l,
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
        &l,
        s.prompt_tokens_cached as f64,
    );
    o.metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        &l,
        s.generated_tokens as f64,
    );
    o.metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        &l,
        s.prefix_queries as f64,
    );
    o.metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        &l,
        s.prefix_hits as f64,
    );
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
    if let Some(spec) = &cfg.spec {
        o.metric(
            "vllm:spec_decode_num_drafts_total",
            "counter",
            "Number of spec decoding drafts.",
            &l,
            s.spec_drafts as f64,
        );
        o.metric(
            "vllm:spec_decode_num_draft_tokens_total",
            "counter",
            "Number of draft tokens.",
            &l,
            s.spec_draft_tokens as f64,
        );
        o.metric(
            "vllm:spec_decode_num_accepted_tokens_total",
            "counter",
            "Number of accepted tokens.",
            &l,
            s.spec_accepted as f64,
        );
        o.family(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "counter",
            "Accepted tokens per draft position.",
        );
        for i in 0..spec.num_speculative_tokens as usize {
            let v = s.spec_accepted_per_pos.get(i).copied().unwrap_or(0);
            o.sample(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                &format!("{l},position=\"{i}\""),
                v as f64,
            );
        }
    }
    o.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &l,
        &s.ttft,
    );
    o.histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        &l,
        &s.e2e,
    );
    o.histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        &l,
        &s.queue_time,
    );
    o.histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        &l,
        &s.prefill_time,
    );
    o.histogram(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill.",
        &l,
        &s.prefill_kv_computed,
    );
    o.text
}

fn sglang(cfg: &Scenario, s: &EngineStats) -> String {
    let sl = format!(
        "engine_type=\"unified\",model_name=\"{}\",pp_rank=\"0\",tp_rank=\"0\"",
        cfg.model
    );
    let tl = format!("model_name=\"{}\"", cfg.model);
    let mut o = Out {
        text: String::with_capacity(8192),
    };
    let cap = cfg.kv.capacity_tokens().max(1) as f64;
    let used = s.kv_blocks_used as f64 * f64::from(cfg.kv.logical_block_tokens());
    o.metric(
        "sglang:num_running_reqs",
        "gauge",
        "The number of running requests.",
        &sl,
        s.running as f64,
    );
    o.metric(
        "sglang:num_queue_reqs",
        "gauge",
        "The number of requests in the waiting queue.",
        &sl,
        s.waiting as f64,
    );
    o.metric(
        "sglang:num_used_tokens",
        "gauge",
        "The number of used tokens.",
        &sl,
        used,
    );
    o.metric(
        "sglang:token_usage",
        "gauge",
        "The token usage.",
        &sl,
        used / cap,
    );
    o.metric(
        "sglang:utilization",
        "gauge",
        "The utilization.",
        &sl,
        used / cap,
    );
    o.metric(
        "sglang:gen_throughput",
        "gauge",
        "The generation throughput (token/s).",
        &sl,
        s.interval_gen_throughput,
    );
    o.metric(
        "sglang:cache_hit_rate",
        "gauge",
        "The prefix cache hit rate.",
        &sl,
        0.0,
    );
    o.metric(
        "sglang:max_total_num_tokens",
        "gauge",
        "Maximum total number of tokens in the KV cache pool.",
        &sl,
        cfg.kv.local_capacity_tokens() as f64,
    );
    if cfg.spec.is_some() {
        o.metric(
            "sglang:spec_accept_length",
            "gauge",
            "The average acceptance length of speculative decoding.",
            &sl,
            s.interval_accept_length,
        );
        o.metric(
            "sglang:spec_accept_rate",
            "gauge",
            "The average acceptance rate of speculative decoding.",
            &sl,
            s.interval_accept_rate,
        );
    }
    o.metric(
        "sglang:num_retracted_requests_total",
        "counter",
        "Number of retracted requests.",
        &sl,
        s.preemptions as f64,
    );
    o.histogram(
        "sglang:queue_time_seconds",
        "Histogram of queueing time in seconds.",
        &sl,
        &s.queue_time,
    );
    let stage = format!("{sl},stage=\"prefill_forward\"");
    o.histogram(
        "sglang:per_stage_req_latency_seconds",
        "The latency of each stage of requests.",
        &stage,
        &s.prefill_time,
    );
    o.metric(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        &tl,
        s.prompt_tokens as f64,
    );
    o.metric(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        &tl,
        s.generated_tokens as f64,
    );
    o.metric(
        "sglang:cached_tokens_total",
        "counter",
        "Number of cached prompt tokens.",
        &tl,
        s.prompt_tokens_cached as f64,
    );
    o.metric(
        "sglang:num_requests_total",
        "counter",
        "Number of requests processed.",
        &tl,
        (s.completed + s.aborted) as f64,
    );
    o.metric(
        "sglang:num_aborted_requests_total",
        "counter",
        "Number of requests aborted.",
        &tl,
        s.aborted as f64,
    );
    o.histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &tl,
        &s.ttft,
    );
    o.histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        &tl,
        &s.e2e,
    );
    o.text
}

fn llamacpp(cfg: &Scenario, s: &EngineStats) -> String {
    let mut o = Out {
        text: String::with_capacity(4096),
    };
    let rate = |n: u64, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
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
    let busy = if s.decode_steps > 0 {
        s.decode_seq_steps as f64 / s.decode_steps as f64
    } else {
        0.0
    };
    o.metric(
        "llamacpp:n_busy_slots_per_decode",
        "counter",
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
    if let Some(spec) = &cfg.spec {
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
        for i in 0..spec.num_speculative_tokens as usize {
            let v = s.spec_accepted_per_pos.get(i).copied().unwrap_or(0);
            o.sample(
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                &format!("position=\"{i}\""),
                v as f64,
            );
        }
    }
    o.text
}
