//! The prefix-cache granularity of the server: how many prompt tokens its
//! cache reuses as one unit, which the intended hit rate is counted in.
//!
//! vLLM reuses full blocks: `block_size` of `vllm:cache_config_info` on
//! `/metrics`, else its defaults (16 on GPU, 128 on the CPU build). SGLang
//! rounds radix matches down to its page size: `page_size` of its server
//! info, else the `sglang:page_size` gauge, else 1. llama.cpp reuses token by
//! token. `--prefix-cache-block N` overrides all of it. The source of the
//! value is recorded next to it.

use std::time::Duration;

use ldb_core::engine::Engine;
use ldb_core::prefix_cache::CacheGranularity;
use ldb_core::prometheus::MetricSet;
use serde_json::Value;

use crate::ctx::RunCtx;

/// vLLM's block size on GPU when the server does not say.
const VLLM_GPU_BLOCK: u32 = 16;
/// vLLM's block size on its CPU build when the server does not say.
const VLLM_CPU_BLOCK: u32 = 128;

/// What the server told about its cache unit.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GranularityHints<'a> {
    /// `--prefix-cache-block`.
    pub(crate) block_override: Option<u32>,
    /// One `/metrics` page.
    pub(crate) metrics: Option<&'a MetricSet>,
    /// SGLang's `/server_info` body.
    pub(crate) sglang_info: Option<&'a Value>,
    /// The engine's version string (a vLLM CPU build carries `cpu`).
    pub(crate) engine_version: &'a str,
}

/// The granularity for `engine` and where it came from.
pub(crate) fn granularity_for(
    engine: Engine,
    h: GranularityHints<'_>,
) -> (CacheGranularity, &'static str) {
    if let Some(n) = h.block_override.filter(|&n| n > 0) {
        return (CacheGranularity::Block(n), "flag");
    }
    let label_u32 = |name: &str, key: &str| {
        h.metrics
            .and_then(|m| m.first(name))
            .and_then(|s| s.label(key))
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n > 0)
    };
    match engine {
        Engine::Vllm => match label_u32("vllm:cache_config_info", "block_size") {
            Some(n) => (CacheGranularity::Block(n), "vllm_cache_config_info"),
            None if h.engine_version.contains("cpu") => {
                (CacheGranularity::Block(VLLM_CPU_BLOCK), "vllm_default_cpu")
            }
            None => (CacheGranularity::Block(VLLM_GPU_BLOCK), "vllm_default_gpu"),
        },
        Engine::Sglang => {
            let from_info = h
                .sglang_info
                .and_then(|v| v.get("page_size"))
                .and_then(Value::as_u64)
                .filter(|&n| n > 0);
            let from_gauge = h
                .metrics
                .and_then(|m| m.first("sglang:page_size"))
                .map(|s| s.value)
                .filter(|v| v.is_finite() && *v >= 1.0);
            match (from_info, from_gauge) {
                (Some(n), _) => (block(n), "sglang_server_info"),
                (None, Some(v)) => (block(v as u64), "sglang_page_size_gauge"),
                (None, None) => (CacheGranularity::TOKEN, "sglang_default"),
            }
        }
        Engine::LlamaCpp => (CacheGranularity::TOKEN, "llamacpp_token"),
        _ => (CacheGranularity::TOKEN, "default"),
    }
}

fn block(n: u64) -> CacheGranularity {
    CacheGranularity::Block(u32::try_from(n).unwrap_or(u32::MAX))
}

impl RunCtx {
    /// The prefix-cache granularity of this run's server (set at startup by
    /// [`discover_cache_granularity`]; token-granular until then).
    pub(crate) fn cache_granularity(&self) -> CacheGranularity {
        self.prefix
            .granularity()
            .map_or(CacheGranularity::TOKEN, |(g, _)| g)
    }
}

/// Reads the granularity from the server (one `/metrics` page, SGLang's
/// server info) and records it in the run's prefix state.
pub(crate) async fn discover_cache_granularity(rc: &RunCtx, engine_version: &str) {
    let settings = rc.cfg.prefix_cache;
    let t = Duration::from_secs(10);
    let metrics = match (settings.block_override, rc.metrics) {
        (None, true) => match rc.http.get_text("/metrics", t).await {
            Ok((200, text)) => Some(MetricSet::parse(&text)),
            _ => None,
        },
        _ => None,
    };
    let mut info = None;
    if settings.block_override.is_none() && rc.engine == Engine::Sglang {
        for path in ["/server_info", "/get_server_info"] {
            if let Ok(v) = rc.http.get_json(path, t).await
                && v.is_object()
            {
                info = Some(v);
                break;
            }
        }
    }
    let hints = GranularityHints {
        block_override: settings.block_override,
        metrics: metrics.as_ref(),
        sglang_info: info.as_ref(),
        engine_version,
    };
    let (g, source) = granularity_for(rc.engine, hints);
    rc.prefix.set_granularity(g, source);
    rc.live.event(format!(
        "startup prefix cache: reuse unit {} token(s) ({source})",
        g.block_tokens()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ldb-client/tests/fixtures");

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!("{FIX}/{path}")).expect("fixture")
    }

    #[test]
    fn vllm_reads_its_block_size_from_a_real_page_else_its_defaults() {
        let m = MetricSet::parse(&fixture("vllm-0.32.0/metrics-idle.txt"));
        let h = GranularityHints {
            metrics: Some(&m),
            ..Default::default()
        };
        assert_eq!(
            granularity_for(Engine::Vllm, h),
            (CacheGranularity::Block(128), "vllm_cache_config_info")
        );
        let none = GranularityHints::default();
        assert_eq!(
            granularity_for(Engine::Vllm, none),
            (CacheGranularity::Block(16), "vllm_default_gpu")
        );
        let cpu = GranularityHints {
            engine_version: "0.32.0+cpu",
            ..Default::default()
        };
        assert_eq!(granularity_for(Engine::Vllm, cpu).1, "vllm_default_cpu");
        let flag = GranularityHints {
            block_override: Some(32),
            metrics: Some(&m),
            ..Default::default()
        };
        assert_eq!(
            granularity_for(Engine::Vllm, flag),
            (CacheGranularity::Block(32), "flag")
        );
    }

    #[test]
    fn sglang_reads_its_page_size_and_llamacpp_is_token_granular() {
        let info: Value =
            serde_json::from_str(&fixture("sglang-0.5.23/server-info.json")).expect("json");
        let h = GranularityHints {
            sglang_info: Some(&info),
            ..Default::default()
        };
        assert_eq!(
            granularity_for(Engine::Sglang, h),
            (CacheGranularity::TOKEN, "sglang_server_info")
        );
        let m = MetricSet::parse(&fixture("sglang-0.5.23/metrics-long-04.txt"));
        let gauge = GranularityHints {
            metrics: Some(&m),
            ..Default::default()
        };
        assert_eq!(
            granularity_for(Engine::Sglang, gauge).1,
            "sglang_page_size_gauge"
        );
        let paged: Value = serde_json::json!({"page_size": 64});
        let h = GranularityHints {
            sglang_info: Some(&paged),
            ..Default::default()
        };
        assert_eq!(
            granularity_for(Engine::Sglang, h).0,
            CacheGranularity::Block(64)
        );
        assert_eq!(
            granularity_for(Engine::LlamaCpp, GranularityHints::default()),
            (CacheGranularity::TOKEN, "llamacpp_token")
        );
    }
}
