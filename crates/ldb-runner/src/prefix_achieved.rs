//! The achieved prefix-cache hit rate: what the server says it reused.
//!
//! Sources, in order of preference:
//! - `vllm_counters`: Δ`vllm:prefix_cache_hits_total` ÷
//!   Δ`vllm:prefix_cache_queries_total` (tokens, counted at admission);
//! - `sglang_counters`: Δ`sglang:cached_tokens_total` ÷
//!   Δ`sglang:prompt_tokens_total` (tokens, counted per finished request; the
//!   `sglang:cache_hit_rate` gauge covers only the last prefill interval and
//!   is not used);
//! - `llamacpp_timings`: Σ`timings.cache_n` ÷ Σ(`cache_n` + `prompt_n`) over
//!   the span's requests;
//! - `usage_cached_tokens`: Σ`usage.prompt_tokens_details.cached_tokens` ÷
//!   Σ`usage.prompt_tokens`, where the server sends it.
//!
//! [`counter_hit_rate`] takes any two scrapes, so a trace replay or a session
//! run can take the rate over its own span.

use ldb_client::stream::StreamOutcome;
use ldb_core::engine::{Engine, ServerSnapshot};

/// Δhits ÷ Δqueries of the server's prefix-cache token counters between two
/// scrapes, with its source; `None` without both counters, when a counter
/// went backwards (a restart) or nothing was looked up.
pub fn counter_hit_rate(
    engine: Engine,
    start: &ServerSnapshot,
    end: &ServerSnapshot,
) -> Option<(f64, &'static str)> {
    let (h, q) = counted_hits(start, end)?;
    if q <= 0.0 {
        return None;
    }
    let source = match engine {
        Engine::Vllm => "vllm_counters",
        Engine::Sglang => "sglang_counters",
        _ => "server_counters",
    };
    Some(((h / q).clamp(0.0, 1.0), source))
}

/// Δhits and Δqueries (tokens) of the server's prefix-cache counters between
/// two scrapes; `None` without the lookup counter or when a counter went
/// backwards (a restart).
pub fn counted_hits(start: &ServerSnapshot, end: &ServerSnapshot) -> Option<(f64, f64)> {
    let q = end.prefix_queries? - start.prefix_queries?;
    // A labelled counter is exported only once it moved: SGLang shows no
    // `sglang:cached_tokens_total` until its first cache hit. With the
    // lookups counted, a missing hits series is 0.
    let h = end.prefix_hits.unwrap_or(0.0) - start.prefix_hits.unwrap_or(0.0);
    (q >= 0.0 && h >= 0.0).then_some((h, q))
}

/// What one finished request said about its prompt and the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestCache {
    /// `usage.prompt_tokens` (0 when not sent).
    pub prompt_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`, when sent.
    pub cached_tokens: Option<u64>,
    /// llama.cpp `timings` (`cache_n`, `prompt_n`), when sent.
    pub timings: Option<(u64, u64)>,
}

impl RequestCache {
    /// From a request's outcome and its prompt tokens.
    pub fn of(o: &StreamOutcome, prompt_tokens: u64) -> RequestCache {
        RequestCache {
            prompt_tokens,
            cached_tokens: o.cached_tokens,
            timings: o
                .timings
                .as_ref()
                .map(|t| (t.cache_n.max(0.0) as u64, t.prompt_n.max(0.0) as u64)),
        }
    }
}

/// The hit rate the requests themselves reported, with its source:
/// llama.cpp timings when every request carried them, else usage's cached
/// tokens when every request carried them; `None` otherwise.
pub fn request_hit_rate(reqs: &[RequestCache]) -> Option<(f64, &'static str)> {
    if reqs.is_empty() {
        return None;
    }
    if reqs.iter().all(|r| r.timings.is_some()) {
        let (c, p) = reqs
            .iter()
            .filter_map(|r| r.timings)
            .fold((0u64, 0u64), |(c, p), (cn, pn)| (c + cn, p + pn));
        return (c + p > 0).then(|| (c as f64 / (c + p) as f64, "llamacpp_timings"));
    }
    if reqs
        .iter()
        .all(|r| r.cached_tokens.is_some() && r.prompt_tokens > 0)
    {
        let c: u64 = reqs.iter().filter_map(|r| r.cached_tokens).sum();
        let p: u64 = reqs.iter().map(|r| r.prompt_tokens).sum();
        return Some(((c as f64 / p as f64).min(1.0), "usage_cached_tokens"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::prometheus::MetricSet;

    fn snap(engine: Engine, page: &str) -> ServerSnapshot {
        ldb_core::engine::server_snapshot(engine, &MetricSet::parse(page))
    }

    #[test]
    fn counters_per_engine_give_the_share_of_tokens_with_the_source() {
        let a = snap(
            Engine::Vllm,
            "vllm:prefix_cache_queries_total 1000\nvllm:prefix_cache_hits_total 200\n",
        );
        let b = snap(
            Engine::Vllm,
            "vllm:prefix_cache_queries_total 3000\nvllm:prefix_cache_hits_total 1700\n",
        );
        assert_eq!(
            counter_hit_rate(Engine::Vllm, &a, &b),
            Some((0.75, "vllm_counters"))
        );
        assert_eq!(counter_hit_rate(Engine::Vllm, &b, &a), None, "a restart");
        let sa = snap(
            Engine::Sglang,
            "sglang:prompt_tokens_total 100\nsglang:cached_tokens_total{cache_source=\"total\"} 0\n",
        );
        let sb = snap(
            Engine::Sglang,
            "sglang:prompt_tokens_total 500\nsglang:cached_tokens_total{cache_source=\"total\"} 300\nsglang:cache_hit_rate 0.1\n",
        );
        assert_eq!(
            counter_hit_rate(Engine::Sglang, &sa, &sb),
            Some((0.75, "sglang_counters"))
        );
        let none = snap(Engine::LlamaCpp, "llamacpp:prompt_tokens_total 5\n");
        assert_eq!(counter_hit_rate(Engine::LlamaCpp, &none, &none), None);
    }

    #[test]
    fn real_pages_give_the_rate_even_before_sglangs_first_hit() {
        let fix = concat!(env!("CARGO_MANIFEST_DIR"), "/../ldb-client/tests/fixtures");
        let page = |p: &str| std::fs::read_to_string(format!("{fix}/{p}")).expect("fixture");
        // SGLang 0.5.23: no cached-token series while idle, 89 cached of
        // 168 prompt tokens after the chats.
        let a = snap(Engine::Sglang, &page("sglang-0.5.23/metrics-idle.txt"));
        let b = snap(
            Engine::Sglang,
            &page("sglang-0.5.23/metrics-after-chats.txt"),
        );
        assert_eq!(a.prefix_hits, None);
        let (rate, source) = counter_hit_rate(Engine::Sglang, &a, &b).expect("rate");
        assert!((rate - 89.0 / 168.0).abs() < 1e-9, "{rate}");
        assert_eq!(source, "sglang_counters");
    }

    #[test]
    fn requests_sum_their_timings_or_their_usage() {
        let llama = [
            RequestCache {
                timings: Some((0, 100)),
                ..Default::default()
            },
            RequestCache {
                timings: Some((90, 10)),
                ..Default::default()
            },
        ];
        assert_eq!(request_hit_rate(&llama), Some((0.45, "llamacpp_timings")));
        let usage = [
            RequestCache {
                prompt_tokens: 100,
                cached_tokens: Some(0),
                timings: None,
            },
            RequestCache {
                prompt_tokens: 100,
                cached_tokens: Some(96),
                timings: None,
            },
        ];
        assert_eq!(
            request_hit_rate(&usage),
            Some((0.48, "usage_cached_tokens"))
        );
        let partial = [usage[0], RequestCache::default()];
        assert_eq!(request_hit_rate(&partial), None);
        assert_eq!(request_hit_rate(&[]), None);
    }
}
