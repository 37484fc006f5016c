//! `--metrics-url`: the server is many replicas behind a router, and the
//! server-side view (readiness, the KV budget, scheduler validation) comes
//! from the replicas' own `/metrics`, combined, instead of the router's.
//!
//! Each replica is discovered (GET requests only) before the run: the
//! engine is theirs when the router looks like a plain OpenAI proxy, the
//! KV capacity is the sum of theirs, and `/metrics` counts as available
//! only when every replica has it (docs/methodology.md, "Replicas behind a
//! router").

use ldb_client::discovery::Discovery;
use ldb_client::replicas::Replicas;
use ldb_core::engine::Engine;
use ldb_core::redact::redact_url;
use ldb_core::tokens::thousands;

use crate::config::RunConfig;
use crate::live::Live;
use crate::run::RunError;

/// The replicas of `cfg.target.metrics_urls`, discovered, with `disc` changed to
/// describe them together; empty when none is named.
pub(crate) async fn discover(
    cfg: &RunConfig,
    disc: &mut Discovery,
    live: &Live,
) -> Result<Replicas, RunError> {
    if cfg.target.metrics_urls.is_empty() {
        return Ok(Replicas::default());
    }
    let mut replicas = Replicas::new(&cfg.target.metrics_urls, cfg.target.api_key.clone())?;
    let found = replicas.discover(Some(disc.model.as_str())).await?;
    apply(disc, &found);
    let urls: Vec<String> = replicas.urls().into_iter().map(redact_url).collect();
    live.event(format!(
        "server metrics from {} replicas, summed: {}",
        replicas.len(),
        urls.join(", ")
    ));
    Ok(replicas)
}

/// `disc` (the router's discovery) updated with the replicas': their
/// engine where the router showed none, metrics only when all have them,
/// the KV capacity summed when every replica reports one.
pub(crate) fn apply(disc: &mut Discovery, found: &[Discovery]) {
    let Some(first) = found.first() else {
        return;
    };
    if disc.engine == Engine::OpenAiProxy && first.engine != Engine::OpenAiProxy {
        disc.engine = first.engine;
        disc.engine_version.clone_from(&first.engine_version);
        disc.attn_tp_size = first.attn_tp_size;
        disc.notes.push(format!(
            "engine from the replicas' servers: {}",
            first.engine.display_name()
        ));
    }
    if let Some(other) = found.iter().find(|d| d.engine != disc.engine) {
        disc.notes.push(format!(
            "a replica looks like {}, not {}: its metrics are read as {}'s",
            other.engine.display_name(),
            disc.engine.display_name(),
            disc.engine.display_name()
        ));
    }
    disc.metrics_available = found.iter().all(|d| d.metrics_available);
    disc.metrics_warning = found
        .iter()
        .find(|d| !d.metrics_available)
        .map(|d| format!("a replica's /metrics is not usable: {}", d.metrics_warning))
        .unwrap_or_default();
    disc.kv_blocks = None;
    if found.iter().all(|d| d.kv_local_tokens > 0) {
        disc.kv_local_tokens = found.iter().map(|d| d.kv_local_tokens).sum();
        disc.kv_local_source = format!(
            "the sum over {} replicas ({})",
            found.len(),
            found
                .iter()
                .map(|d| thousands(d.kv_local_tokens))
                .collect::<Vec<_>>()
                .join(" + ")
        );
    } else {
        disc.kv_local_tokens = 0;
        disc.kv_local_source = "unknown".into();
        disc.notes
            .push("a replica reports no KV capacity: the summed KV budget is unknown".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(engine: Engine, kv: u64, metrics: bool) -> Discovery {
        Discovery {
            engine,
            kv_local_tokens: kv,
            kv_local_source: "vLLM cache_config_info".into(),
            metrics_available: metrics,
            metrics_warning: if metrics {
                String::new()
            } else {
                "HTTP 404".into()
            },
            ..Discovery::default()
        }
    }

    #[test]
    fn the_replicas_kv_capacities_sum_and_their_engine_replaces_a_plain_router() {
        let mut d = Discovery {
            engine: Engine::OpenAiProxy,
            kv_local_tokens: 123,
            ..Discovery::default()
        };
        apply(
            &mut d,
            &[
                replica(Engine::Vllm, 3_200_000, true),
                replica(Engine::Vllm, 1_600_000, true),
            ],
        );
        assert_eq!(d.engine, Engine::Vllm);
        assert_eq!(d.kv_local_tokens, 4_800_000);
        assert!(
            d.kv_local_source.contains("2 replicas"),
            "{}",
            d.kv_local_source
        );
        assert!(d.metrics_available);
    }

    #[test]
    fn one_replica_without_metrics_or_kv_makes_the_sum_unknown() {
        let mut d = Discovery {
            engine: Engine::Vllm,
            ..Discovery::default()
        };
        apply(
            &mut d,
            &[
                replica(Engine::Vllm, 1000, true),
                replica(Engine::Vllm, 0, false),
            ],
        );
        assert!(!d.metrics_available);
        assert!(d.metrics_warning.contains("HTTP 404"));
        assert_eq!(d.kv_local_tokens, 0);
        assert_eq!(d.kv_local_source, "unknown");
    }
}
