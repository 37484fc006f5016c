//! Engine identity and the per-engine mapping of Prometheus metrics.

use crate::prometheus::MetricSet;

/// The serving engine behind the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// vLLM (V1) OpenAI server.
    Vllm,
    /// SGLang server.
    Sglang,
    /// llama.cpp `llama-server`.
    LlamaCpp,
    /// Any other OpenAI-compatible endpoint (no engine-specific probes).
    #[default]
    OpenAiProxy,
}

impl Engine {
    /// The word used in JSON (`metadata.engine`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llamacpp",
            Engine::OpenAiProxy => "openai_proxy",
        }
    }

    /// Name for humans.
    pub fn display_name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::LlamaCpp => "llama.cpp",
            Engine::OpenAiProxy => "OpenAI-compatible proxy",
        }
    }

    /// Whether the engine accepts `stream_options.continuous_usage_stats`.
    pub fn supports_continuous_usage(self) -> bool {
        matches!(self, Engine::Vllm | Engine::Sglang | Engine::OpenAiProxy)
    }
}

/// The engine-independent view of one `/metrics` scrape. `None` = not exposed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSnapshot {
    /// Requests in the running batch.
    pub running: Option<f64>,
    /// Requests waiting in the queue.
    pub waiting: Option<f64>,
    /// KV cache usage fraction (0–1).
    pub kv_usage: Option<f64>,
    /// Generated tokens counter, growing as tokens are generated.
    pub gen_tokens: Option<f64>,
    /// Which counter `gen_tokens` was read from.
    pub gen_tokens_source: Option<&'static str>,
    /// Engine's own generation-throughput gauge (SGLang).
    pub gen_throughput_gauge: Option<f64>,
    /// Prompt tokens counter (requests whose prefill finished, cached included).
    pub prompt_tokens: Option<f64>,
    /// Prompt tokens computed locally (vLLM `prompt_tokens_by_source{source=local_compute}`).
    pub prompt_local_compute: Option<f64>,
    /// Prompt tokens served from cache.
    pub prompt_cached: Option<f64>,
    /// Prefix-cache lookups, in tokens (vLLM `prefix_cache_queries_total`).
    pub prefix_queries: Option<f64>,
    /// Prefix-cache hits, in tokens (vLLM `prefix_cache_hits_total`).
    pub prefix_hits: Option<f64>,
    /// Newly computed KV tokens (vLLM histogram sum).
    pub prefill_kv_computed: Option<f64>,
    /// Finished requests counter.
    pub request_success: Option<f64>,
    /// Prefill time histogram sum (seconds).
    pub prefill_time_sum: Option<f64>,
    /// Prefill time histogram count.
    pub prefill_time_count: Option<f64>,
    /// Speculative drafts (drafted engine steps).
    pub spec_drafts: Option<f64>,
    /// Speculative draft tokens proposed.
    pub spec_draft_tokens: Option<f64>,
    /// Speculative draft tokens accepted.
    pub spec_accepted: Option<f64>,
    /// Accepted tokens per draft position (vLLM, llama.cpp).
    pub spec_accepted_per_pos: Vec<f64>,
    /// SGLang's recent accept-length gauge (tokens per verify step incl. bonus).
    pub spec_accept_length_gauge: Option<f64>,
    /// SGLang's recent accept-rate gauge.
    pub spec_accept_rate_gauge: Option<f64>,
    /// When the server process started (`process_start_time_seconds`, Unix
    /// seconds, written by Python's and Go's Prometheus clients): a new value
    /// means the server was restarted and its counters began again from 0.
    pub process_start: Option<f64>,
    /// The histograms that take TTFT apart (`crate::ttft_breakdown`).
    pub latency: crate::ttft_breakdown::LatencyHistograms,
}

fn per_position(m: &MetricSet, name: &str) -> Vec<f64> {
    let mut out: Vec<(usize, f64)> = m
        .samples
        .iter()
        .filter(|s| s.name == name)
        .filter_map(|s| Some((s.label("position")?.parse::<usize>().ok()?, s.value)))
        .collect();
    out.sort_by_key(|(p, _)| *p);
    let len = out.last().map_or(0, |(p, _)| p + 1).min(64);
    let mut v = vec![0.0; len];
    for (p, val) in out {
        if p < len {
            v[p] += val;
        }
    }
    v
}

/// Generated tokens so far on llama.cpp, counted live.
///
/// `llamacpp:tokens_predicted_total` only grows when a request is released
/// (finished or cancelled), so its delta over a window counts whole requests
/// that ended inside it and nothing of the ones still running. What does grow
/// live is `n_decode_total` (one per `llama_decode()` call) and the busy-slot
/// count behind `n_busy_slots_per_decode` (its running mean since start):
/// their product is the number of slot-steps, and without speculative decoding
/// every busy slot in a decode call yields one token (a prompt batch yields its
/// request's first). The gauge is printed with 6 significant digits, so the
/// product is good to about 5 ppm of all slot-steps since the server started.
/// With speculative decoding a verify step yields its accepted draft tokens
/// too; that counter is added, but like `tokens_predicted_total` it only moves
/// when a request is released.
fn llamacpp_generated(m: &MetricSet) -> Option<f64> {
    let busy = m.sum("llamacpp:n_busy_slots_per_decode", &[])?;
    let decodes = m.sum("llamacpp:n_decode_total", &[])?;
    let accepted = m
        .sum("llamacpp:spec_decode_num_accepted_tokens_total", &[])
        .unwrap_or(0.0);
    Some((busy * decodes).round() + accepted)
}

/// A counter to look for: how it is named in the result, its metric name and label filter.
type CounterRef = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The first of `counters` that the scrape has, summed over its series, with its label.
fn first_counter(m: &MetricSet, counters: &[CounterRef]) -> (Option<f64>, Option<&'static str>) {
    counters
        .iter()
        .find_map(|(label, name, filter)| Some((Some(m.sum(name, filter)?), Some(*label))))
        .unwrap_or((None, None))
}

/// Map a scrape to the engine-independent snapshot.
///
/// Across data-parallel engines (vLLM's `engine` label, SGLang's DP ranks),
/// counters and request counts are summed, while ratio gauges (KV usage,
/// SGLang's acceptance gauges) are averaged: engines of one server have equal
/// KV capacity, so the mean is the share of the whole budget.
pub fn server_snapshot(engine: Engine, m: &MetricSet) -> ServerSnapshot {
    let s = |n: &str| m.sum(n, &[]);
    let mean = |n: &str| m.mean(n, &[]);
    let snap = server_snapshot_inner(engine, m, &s, &mean);
    let (gen_tokens, gen_tokens_source) = match engine {
        Engine::Vllm => first_counter(
            m,
            &[(
                "vllm:generation_tokens_total",
                "vllm:generation_tokens_total",
                &[],
            )],
        ),
        // `generation_tokens_total` only grows when a request finishes, so
        // over a window of long requests it stays flat; the per-step counter
        // of decoded tokens moves live (SGLang ≥ 0.5).
        Engine::Sglang => first_counter(
            m,
            &[
                (
                    "sglang:realtime_tokens_total{mode=\"decode\"}",
                    "sglang:realtime_tokens_total",
                    &[("mode", "decode")],
                ),
                (
                    "sglang:generation_tokens_total",
                    "sglang:generation_tokens_total",
                    &[],
                ),
            ],
        ),
        Engine::LlamaCpp => match llamacpp_generated(m) {
            Some(v) => (
                Some(v),
                Some("llamacpp:n_decode_total × n_busy_slots_per_decode"),
            ),
            None => first_counter(
                m,
                &[(
                    "llamacpp:tokens_predicted_total",
                    "llamacpp:tokens_predicted_total",
                    &[],
                )],
            ),
        },
        Engine::OpenAiProxy => (None, None),
    };
    ServerSnapshot {
        gen_tokens,
        gen_tokens_source,
        process_start: s("process_start_time_seconds"),
        latency: crate::ttft_breakdown::read(engine, m),
        ..snap
    }
}

impl ServerSnapshot {
    /// Why `later` cannot come from the same server process as `self`: its
    /// start time changed, or its generated or finished counters went down.
    /// Counter deltas across such a pair mean nothing.
    pub fn restart_evidence(&self, later: &ServerSnapshot) -> Option<String> {
        if let (Some(a), Some(b)) = (self.process_start, later.process_start)
            && b != a
        {
            return Some(format!(
                "process_start_time_seconds changed from {a:.3} to {b:.3}"
            ));
        }
        let went_down = |name: &str, a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b < a => Some(format!("{name} went down from {a:.0} to {b:.0}")),
            _ => None,
        };
        went_down(
            "the generated-tokens counter",
            self.gen_tokens,
            later.gen_tokens,
        )
        .or_else(|| {
            went_down(
                "the finished-requests counter",
                self.request_success,
                later.request_success,
            )
        })
    }
}

/// SGLang's cached prompt tokens: `sglang:cached_tokens_total` is split by
/// `cache_source` (`device`, `host`, `storage`; 0.5.23 exported `device`
/// alone on a CPU server). Where a `total` series sits beside the parts it
/// alone counts, or the sum would count every cached token twice.
fn sglang_cached(m: &MetricSet) -> Option<f64> {
    let name = "sglang:cached_tokens_total";
    m.sum(name, &[("cache_source", "total")])
        .or_else(|| m.sum(name, &[]))
}

/// SGLang's prefix-cache hits, in prompt tokens: prompt − uncached prompt
/// tokens, from two series SGLang 0.5.23 exports from its start
/// (`sglang:prompt_tokens_total` and
/// `sglang:uncached_prompt_tokens_histogram_sum`, both counted as a request
/// finishes), so a span that starts before the first hit still has both
/// ends; else the cached-token counter, which SGLang exports only after its
/// first hit (absent then counts as 0, `prefix_achieved::counted_hits`).
fn sglang_hits(m: &MetricSet) -> Option<f64> {
    let prompt = m.sum("sglang:prompt_tokens_total", &[]);
    let uncached = m.sum("sglang:uncached_prompt_tokens_histogram_sum", &[]);
    match (prompt, uncached) {
        (Some(p), Some(u)) => Some((p - u).max(0.0)),
        _ => sglang_cached(m),
    }
}

fn server_snapshot_inner(
    engine: Engine,
    m: &MetricSet,
    s: &dyn Fn(&str) -> Option<f64>,
    mean: &dyn Fn(&str) -> Option<f64>,
) -> ServerSnapshot {
    match engine {
        Engine::Vllm => ServerSnapshot {
            running: s("vllm:num_requests_running"),
            waiting: s("vllm:num_requests_waiting"),
            kv_usage: mean("vllm:kv_cache_usage_perc").or(mean("vllm:gpu_cache_usage_perc")),
            gen_throughput_gauge: s("vllm:avg_generation_throughput_toks_per_s"),
            prompt_tokens: s("vllm:prompt_tokens_total"),
            prompt_local_compute: m.sum(
                "vllm:prompt_tokens_by_source_total",
                &[("source", "local_compute")],
            ),
            prompt_cached: s("vllm:prompt_tokens_cached_total"),
            prefix_queries: s("vllm:prefix_cache_queries_total"),
            prefix_hits: s("vllm:prefix_cache_hits_total"),
            prefill_kv_computed: s("vllm:request_prefill_kv_computed_tokens_sum"),
            request_success: s("vllm:request_success_total"),
            prefill_time_sum: s("vllm:request_prefill_time_seconds_sum"),
            prefill_time_count: s("vllm:request_prefill_time_seconds_count"),
            spec_drafts: s("vllm:spec_decode_num_drafts_total"),
            spec_draft_tokens: s("vllm:spec_decode_num_draft_tokens_total"),
            spec_accepted: s("vllm:spec_decode_num_accepted_tokens_total"),
            spec_accepted_per_pos: per_position(
                m,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            ),
            ..ServerSnapshot::default()
        },
        Engine::Sglang => ServerSnapshot {
            running: s("sglang:num_running_reqs"),
            waiting: s("sglang:num_queue_reqs"),
            kv_usage: mean("sglang:token_usage").or(mean("sglang:utilization")),
            gen_throughput_gauge: s("sglang:gen_throughput"),
            prompt_tokens: s("sglang:prompt_tokens_total"),
            prompt_cached: sglang_cached(m),
            // SGLang counts every prompt token as a lookup and cached ones as hits.
            prefix_queries: s("sglang:prompt_tokens_total"),
            prefix_hits: sglang_hits(m),
            request_success: s("sglang:num_requests_total"),
            prefill_time_sum: m.sum(
                "sglang:per_stage_req_latency_seconds_sum",
                &[("stage", "prefill_forward")],
            ),
            prefill_time_count: m.sum(
                "sglang:per_stage_req_latency_seconds_count",
                &[("stage", "prefill_forward")],
            ),
            spec_accept_length_gauge: mean("sglang:spec_accept_length"),
            spec_accept_rate_gauge: mean("sglang:spec_accept_rate"),
            ..ServerSnapshot::default()
        },
        Engine::LlamaCpp => ServerSnapshot {
            running: s("llamacpp:requests_processing"),
            waiting: s("llamacpp:requests_deferred"),
            kv_usage: mean("llamacpp:kv_cache_usage_ratio"),
            prompt_tokens: s("llamacpp:prompt_tokens_total"),
            prefill_time_sum: s("llamacpp:prompt_seconds_total"),
            spec_drafts: s("llamacpp:spec_decode_num_drafts_total"),
            spec_draft_tokens: s("llamacpp:spec_decode_num_draft_tokens_total"),
            spec_accepted: s("llamacpp:spec_decode_num_accepted_tokens_total"),
            spec_accepted_per_pos: per_position(
                m,
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
            ),
            ..ServerSnapshot::default()
        },
        Engine::OpenAiProxy => ServerSnapshot::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_shows_in_the_start_time_or_in_counters_going_down() {
        let a = ServerSnapshot {
            gen_tokens: Some(1000.0),
            request_success: Some(10.0),
            process_start: Some(1_700_000_000.25),
            ..ServerSnapshot::default()
        };
        assert_eq!(a.restart_evidence(&a.clone()), None);
        let later = ServerSnapshot {
            gen_tokens: Some(2000.0),
            request_success: Some(20.0),
            ..a.clone()
        };
        assert_eq!(a.restart_evidence(&later), None);
        let new_process = ServerSnapshot {
            process_start: Some(1_700_000_100.5),
            ..later.clone()
        };
        let e = a.restart_evidence(&new_process).expect("restart");
        assert!(e.contains("process_start_time_seconds"), "{e}");
        let counter_down = ServerSnapshot {
            gen_tokens: Some(10.0),
            process_start: None,
            ..later.clone()
        };
        let e = a.restart_evidence(&counter_down).expect("restart");
        assert!(
            e.contains("generated-tokens counter went down from 1000 to 10"),
            "{e}"
        );
        let finished_down = ServerSnapshot {
            request_success: Some(1.0),
            process_start: None,
            ..later
        };
        assert!(a.restart_evidence(&finished_down).is_some());
        // Nothing to compare: no evidence.
        assert_eq!(
            ServerSnapshot::default().restart_evidence(&ServerSnapshot::default()),
            None
        );
    }

    #[test]
    fn sglang_cached_tokens_count_a_total_series_alone() {
        let parts = MetricSet::parse(
            "sglang:cached_tokens_total{cache_source=\"device\"} 40\n\
             sglang:cached_tokens_total{cache_source=\"host\"} 2\n",
        );
        assert_eq!(
            server_snapshot(Engine::Sglang, &parts).prompt_cached,
            Some(42.0)
        );
        let with_total = MetricSet::parse(
            "sglang:cached_tokens_total{cache_source=\"device\"} 40\n\
             sglang:cached_tokens_total{cache_source=\"host\"} 2\n\
             sglang:cached_tokens_total{cache_source=\"total\"} 42\n",
        );
        let snap = server_snapshot(Engine::Sglang, &with_total);
        assert_eq!(
            (snap.prompt_cached, snap.prefix_hits),
            (Some(42.0), Some(42.0))
        );
        let bare = MetricSet::parse("sglang:cached_tokens_total 7\n");
        assert_eq!(
            server_snapshot(Engine::Sglang, &bare).prompt_cached,
            Some(7.0)
        );
    }

    #[test]
    fn vllm_snapshot_sums_engines_and_positions() {
        let text = "vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_running{engine=\"1\"} 2\n\
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"1\"} 5\n\
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 9\n\
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",position=\"0\"} 1\n\
vllm:prompt_tokens_by_source_total{source=\"local_compute\"} 7\nvllm:prompt_tokens_by_source_total{source=\"local_cache_hit\"} 3\n";
        let snap = server_snapshot(Engine::Vllm, &MetricSet::parse(text));
        assert_eq!(snap.running, Some(3.0));
        assert_eq!(snap.spec_accepted_per_pos, vec![10.0, 5.0]);
        assert_eq!(snap.prompt_local_compute, Some(7.0));
        assert_eq!(snap.waiting, None);
    }

    #[test]
    fn ratio_gauges_average_over_engines_and_sglang_reads_the_live_counter() {
        // Two data-parallel vLLM engines, 90 % and 70 % full: the server is
        // 80 % full, not 160 %.
        let v = "vllm:kv_cache_usage_perc{engine=\"0\"} 0.9\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.7\n\
vllm:generation_tokens_total{engine=\"0\"} 10\nvllm:generation_tokens_total{engine=\"1\"} 5\n";
        let snap = server_snapshot(Engine::Vllm, &MetricSet::parse(v));
        assert!((snap.kv_usage.unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(snap.gen_tokens, Some(15.0));
        assert_eq!(snap.gen_tokens_source, Some("vllm:generation_tokens_total"));
        // SGLang: the per-step decode counter, not the request-end one.
        let sg = "sglang:generation_tokens_total{model_name=\"m\"} 100\n\
sglang:realtime_tokens_total{model_name=\"m\",mode=\"prefill_compute\"} 900\n\
sglang:realtime_tokens_total{model_name=\"m\",mode=\"decode\"} 350\n\
sglang:token_usage{dp_rank=\"0\",tp_rank=\"0\"} 0.2\nsglang:token_usage{dp_rank=\"1\",tp_rank=\"2\"} 0.4\n";
        let snap = server_snapshot(Engine::Sglang, &MetricSet::parse(sg));
        assert_eq!(snap.gen_tokens, Some(350.0));
        assert!((snap.kv_usage.unwrap() - 0.3).abs() < 1e-12);
        let old = "sglang:generation_tokens_total{model_name=\"m\"} 100\n";
        let snap = server_snapshot(Engine::Sglang, &MetricSet::parse(old));
        assert_eq!(snap.gen_tokens, Some(100.0));
        assert_eq!(
            snap.gen_tokens_source,
            Some("sglang:generation_tokens_total")
        );
    }

    #[test]
    fn llamacpp_generated_tokens_are_live_slot_steps() {
        // A scrape taken while 4 slots decode: the finished-request counter lags
        // (156), the slot-steps (2.5 × 400) do not.
        let text = "llamacpp:tokens_predicted_total 156\nllamacpp:n_decode_total 400\n\
llamacpp:n_busy_slots_per_decode 2.5\nllamacpp:requests_processing 4\n";
        let snap = server_snapshot(Engine::LlamaCpp, &MetricSet::parse(text));
        assert_eq!(snap.gen_tokens, Some(1000.0));
        assert_eq!(snap.running, Some(4.0));
        // Speculative decoding: accepted draft tokens on top of the steps.
        let spec = format!("{text}llamacpp:spec_decode_num_accepted_tokens_total 30\n");
        let snap = server_snapshot(Engine::LlamaCpp, &MetricSet::parse(&spec));
        assert_eq!(snap.gen_tokens, Some(1030.0));
        // Older builds without the decode counters: the finished-request counter.
        let old = "llamacpp:tokens_predicted_total 156\n";
        let snap = server_snapshot(Engine::LlamaCpp, &MetricSet::parse(old));
        assert_eq!(snap.gen_tokens, Some(156.0));
    }

    /// The recorded SGLang 0.5.23 pages: the cached-token series is absent
    /// while idle, the hits (prompt − uncached) are there from the start and
    /// agree with the cached-token counter once it appears.
    #[test]
    fn sglang_hits_are_prompt_less_uncached_from_the_first_page() {
        let fix = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../ldb-client/tests/fixtures/sglang-0.5.23"
        );
        let snap = |f: &str| {
            let page = std::fs::read_to_string(format!("{fix}/{f}")).expect("fixture");
            server_snapshot(Engine::Sglang, &MetricSet::parse(&page))
        };
        let idle = snap("metrics-idle.txt");
        assert_eq!(idle.prompt_cached, None, "no cached-token series yet");
        assert_eq!(idle.prefix_hits, Some(0.0));
        for (f, cached) in [
            ("metrics-after-chats.txt", 89.0),
            ("metrics-long-after.txt", 113.0),
            ("metrics-final.txt", 249.0),
        ] {
            let s = snap(f);
            assert_eq!(
                (s.prefix_hits, s.prompt_cached),
                (Some(cached), Some(cached)),
                "{f}"
            );
        }
        // without the uncached series: the cached-token counter
        let bare = MetricSet::parse(
            "sglang:prompt_tokens_total 10\nsglang:cached_tokens_total{cache_source=\"device\"} 4\n",
        );
        assert_eq!(
            server_snapshot(Engine::Sglang, &bare).prefix_hits,
            Some(4.0)
        );
    }
}
