//! The achieved prefix-cache hit rate: what the server says it reused.
//!
//! Sources, in order of preference:
//! - `vllm_counters`: Δ`vllm:prefix_cache_hits_total` ÷
//!   Δ`vllm:prefix_cache_queries_total` (tokens, counted at admission);
//! - `sglang_counters`: 1 − Δ`sglang:uncached_prompt_tokens_histogram_sum`
//!   ÷ Δ`sglang:prompt_tokens_total`, else Δ`sglang:cached_tokens_total` ÷
//!   Δ`sglang:prompt_tokens_total` (tokens, counted per finished request;
//!   `ldb_core::engine`; the `sglang:cache_hit_rate` gauge covers only the
//!   last prefill interval and is not used);
//! - `llamacpp_timings`: Σ`timings.cache_n` ÷ Σ(`cache_n` + `prompt_n`) over
//!   the span's requests;
//! - `usage_cached_tokens`: Σ`usage.prompt_tokens_details.cached_tokens` ÷
//!   Σ`usage.prompt_tokens`, where the server sends it.
//!
//! Every mode reads it by one rule, [`achieved`]: a cell's span, a trace
//! replay and a session run alike, so a true 0 % is 0 % everywhere and each
//! names its source the same way. Over `--metrics-url` replicas the counters
//! are taken per replica ([`counted_between`]) and the figure says what it
//! rests on.

use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::engine::{Engine, ServerSnapshot};
use ldb_core::replicas::{Absent, FleetDelta, fleet_delta};

/// The achieved hit rate of a span, its source, and over replicas what the
/// counters it came from rest on (empty for one server).
#[derive(Debug, Clone, PartialEq)]
pub struct Achieved {
    /// Tokens served from the cache ÷ prompt tokens.
    pub rate: f64,
    /// Where it came from (`vllm_counters`, `sglang_counters`, …).
    pub source: &'static str,
    /// Over replicas, what the counters rest on; empty otherwise.
    pub basis: String,
}

/// The one rule of every mode: the server's counters between the span's
/// scrapes, else what every request of the span reported (llama.cpp
/// timings, else usage's cached tokens), 0 included.
pub fn achieved(
    engine: Engine,
    scrapes: (Option<&Scrape>, Option<&Scrape>),
    requests: &[RequestCache],
) -> Option<Achieved> {
    if let (Some(a), Some(b)) = scrapes
        && let Some(c) = counted_between(a, b)
        && c.queries > 0.0
    {
        return Some(Achieved {
            rate: (c.hits / c.queries).clamp(0.0, 1.0),
            source: counter_source(engine),
            basis: c.basis,
        });
    }
    request_hit_rate(requests).map(|(rate, source)| Achieved {
        rate,
        source,
        basis: String::new(),
    })
}

fn counter_source(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "vllm_counters",
        Engine::Sglang => "sglang_counters",
        _ => "server_counters",
    }
}

/// Prefix-cache hits and lookups (tokens) counted between two scrapes,
/// with what they rest on over replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    /// Prompt tokens served from the cache.
    pub hits: f64,
    /// Prompt tokens looked up.
    pub queries: f64,
    /// Over replicas, what the counts rest on; empty for one server.
    pub basis: String,
}

/// The hit rate between two scrapes (hits ÷ lookups, 0 included) and what
/// it rests on; `None` without counters or without a lookup. What a
/// sustained cell reads over its window and a request-count or burst cell
/// over its batch.
pub fn rate_between(a: &Scrape, b: &Scrape) -> Option<(f64, String)> {
    let c = counted_between(a, b)?;
    (c.queries > 0.0).then(|| ((c.hits / c.queries).clamp(0.0, 1.0), c.basis))
}

/// Hits and lookups between two scrapes. Over replicas each replica's
/// delta is its own, and a series a replica exports only after it first
/// moved (SGLang's cached-token counter, before that replica's first hit)
/// counts from 0; one server is read as [`counted_hits`] reads it.
pub fn counted_between(a: &Scrape, b: &Scrape) -> Option<Counted> {
    if a.parts.len() > 1 && a.parts.len() == b.parts.len() {
        let q = fleet_delta(&a.parts, &b.parts, |s| s.prefix_queries, Absent::Zero)?;
        let h = fleet_delta(&a.parts, &b.parts, |s| s.prefix_hits, Absent::Zero)?;
        return Some(Counted {
            hits: h.value,
            queries: q.value,
            basis: fleet_basis(a.parts.len(), &q, &h),
        });
    }
    let (hits, queries) = counted_hits(&a.snap, &b.snap)?;
    Some(Counted {
        hits,
        queries,
        basis: String::new(),
    })
}

/// What a fleet's hit rate rests on, in words: how many replicas, and
/// which of them lacked a series (replicas numbered from 1, in
/// `--metrics-url` order).
fn fleet_basis(n: usize, q: &FleetDelta, h: &FleetDelta) -> String {
    let list = |v: &[usize]| {
        v.iter()
            .map(|i| (i + 1).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!("counter deltas of {n} replicas, each its own");
    for (d, what) in [(q, "lookups"), (h, "hits")] {
        if !d.late.is_empty() {
            out += &format!(
                "; replica {}: no {what} series at the start (exported after it first moved), \
                 counted from 0",
                list(&d.late)
            );
        }
        if !d.never.is_empty() {
            out += &format!("; replica {}: no {what} series, 0", list(&d.never));
        }
    }
    out
}

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
    Some(((h / q).clamp(0.0, 1.0), counter_source(engine)))
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

/// What one finished request said about its prompt and the cache
/// (serialized only between shards).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
/// tokens when every request carried them (0 cached is a rate of 0);
/// `None` otherwise. A request that reported nothing at all (it failed
/// before its usage) is left out.
pub fn request_hit_rate(reqs: &[RequestCache]) -> Option<(f64, &'static str)> {
    let reqs: Vec<RequestCache> = reqs
        .iter()
        .filter(|r| r.prompt_tokens > 0 || r.cached_tokens.is_some() || r.timings.is_some())
        .copied()
        .collect();
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
        assert_eq!(a.prompt_cached, None, "no cached-token series while idle");
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
        let unreported = RequestCache {
            prompt_tokens: 100,
            ..Default::default()
        };
        assert_eq!(request_hit_rate(&[usage[0], unreported]), None);
        // a failed request reported nothing: left out
        let failed = RequestCache::default();
        assert_eq!(
            request_hit_rate(&[usage[1], failed]),
            Some((0.96, "usage_cached_tokens"))
        );
        assert_eq!(request_hit_rate(&[failed]), None);
        assert_eq!(request_hit_rate(&[]), None);
    }

    fn scrape(snap: ServerSnapshot, parts: Vec<ServerSnapshot>) -> Scrape {
        Scrape {
            snap,
            parts,
            ..Scrape::default()
        }
    }

    /// A server whose cache served nothing has an achieved rate of 0, by
    /// every source, in every mode (replays and sessions once showed no
    /// value when no answer reported a cached token).
    #[test]
    fn a_true_zero_is_a_rate_by_every_source() {
        let zero = |source: &str, got: Option<Achieved>| {
            let a = got.unwrap_or_else(|| panic!("{source}: no value"));
            assert_eq!((a.rate, a.source), (0.0, source));
        };
        let usage = [RequestCache {
            prompt_tokens: 500,
            cached_tokens: Some(0),
            timings: None,
        }; 3];
        zero(
            "usage_cached_tokens",
            achieved(Engine::Vllm, (None, None), &usage),
        );
        let llama = [RequestCache {
            timings: Some((0, 500)),
            ..Default::default()
        }];
        zero(
            "llamacpp_timings",
            achieved(Engine::LlamaCpp, (None, None), &llama),
        );
        // SGLang before its first hit: no cached-token series at either end
        let a = scrape(
            snap(Engine::Sglang, "sglang:prompt_tokens_total 39\n"),
            vec![],
        );
        let b = scrape(
            snap(Engine::Sglang, "sglang:prompt_tokens_total 539\n"),
            vec![],
        );
        zero(
            "sglang_counters",
            achieved(Engine::Sglang, (Some(&a), Some(&b)), &[]),
        );
    }

    /// Over replicas each replica's counters are its own: replica 2's hits
    /// series appears during the span and counts from 0, replica 1's hits
    /// from before the span do not count, and the basis says so.
    #[test]
    fn replicas_count_their_own_deltas_and_say_what_the_rate_rests_on() {
        let page = |q: u32, h: Option<u32>| {
            let hits = h.map_or(String::new(), |h| {
                format!("sglang:cached_tokens_total{{cache_source=\"device\"}} {h}\n")
            });
            snap(
                Engine::Sglang,
                &format!("sglang:prompt_tokens_total {q}\n{hits}"),
            )
        };
        let (a1, a2) = (page(10_000, Some(8_000)), page(40, None));
        let (b1, b2) = (page(11_000, Some(8_100)), page(1_040, Some(300)));
        let combined = |x: &ServerSnapshot, y: &ServerSnapshot| {
            ldb_core::replicas::combine(&[x.clone(), y.clone()], &[])
        };
        let start = scrape(combined(&a1, &a2), vec![a1.clone(), a2.clone()]);
        let end = scrape(combined(&b1, &b2), vec![b1, b2]);
        let got = achieved(Engine::Sglang, (Some(&start), Some(&end)), &[]).expect("rate");
        // (100 + 300) of (1,000 + 1,000) prompt tokens
        assert!((got.rate - 0.2).abs() < 1e-12, "{got:?}");
        assert_eq!(got.source, "sglang_counters");
        assert!(
            got.basis.contains("counter deltas of 2 replicas"),
            "{}",
            got.basis
        );
        assert!(
            got.basis.contains("replica 2: no hits series at the start"),
            "{}",
            got.basis
        );
        // one server: no basis
        let one = achieved(
            Engine::Sglang,
            (
                Some(&scrape(a1, vec![])),
                Some(&scrape(page(11_000, Some(8_100)), vec![])),
            ),
            &[],
        )
        .expect("rate");
        assert!(
            (one.rate - 0.1).abs() < 1e-12 && one.basis.is_empty(),
            "{one:?}"
        );
    }
}
