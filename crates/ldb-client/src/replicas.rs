//! `/metrics` of several replicas behind a router (`--metrics-url`), read
//! together and combined into one server view (`ldb_core::replicas`).
//!
//! Every replica is read at once on each scrape; one that fails fails the
//! scrape, since a sum over the others would be taken for the whole server.
//! At start each replica is discovered like the server itself (GET requests
//! only), for its engine and its KV capacity.

use std::time::Duration;

use futures_util::future::join_all;
use ldb_core::engine::{Engine, ServerSnapshot, server_snapshot};
use ldb_core::prometheus::MetricSet;

use crate::discovery::{Discovery, discover};
use crate::error::{ClientError, Result};
use crate::http::Http;

/// The replicas' `/metrics` and their KV capacities.
#[derive(Debug, Clone, Default)]
pub struct Replicas {
    targets: Vec<Http>,
    /// KV tokens per replica, in `targets` order (0 = unknown).
    kv_tokens: Vec<u64>,
}

/// A `--metrics-url` as the base URL of its replica: a trailing `/metrics`
/// (or `/`) is dropped, so both `http://h:8000` and `http://h:8000/metrics`
/// name the same page.
pub fn replica_base(url: &str) -> &str {
    let u = url.trim_end_matches('/');
    u.strip_suffix("/metrics").unwrap_or(u)
}

impl Replicas {
    /// Clients for each URL (`replica_base` form), with the run's API key.
    pub fn new(urls: &[String], api_key: Option<String>) -> Result<Replicas> {
        let targets = urls
            .iter()
            .map(|u| Http::new(replica_base(u), api_key.clone(), 2))
            .collect::<Result<Vec<_>>>()?;
        Ok(Replicas {
            kv_tokens: vec![0; targets.len()],
            targets,
        })
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// No replica named (the server's own `/metrics` is read).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The replicas' base URLs.
    pub fn urls(&self) -> Vec<&str> {
        self.targets.iter().map(Http::base).collect()
    }

    /// Discover every replica (engine, KV capacity, metrics), remembering
    /// the capacities for the KV-usage weighting. A replica that does not
    /// answer is an error naming it.
    pub async fn discover(&mut self, model: Option<&str>) -> Result<Vec<Discovery>> {
        let found = join_all(self.targets.iter().map(|h| discover(h, model))).await;
        let found = found.into_iter().collect::<Result<Vec<_>>>()?;
        self.kv_tokens = found.iter().map(|d| d.kv_local_tokens).collect();
        Ok(found)
    }

    /// One scrape of every replica, combined, and each replica's own
    /// snapshot; `Err` names the first replica that failed and why.
    pub async fn scrape(
        &self,
        engine: Engine,
        attn_tp_size: u64,
    ) -> std::result::Result<(ServerSnapshot, Vec<ServerSnapshot>), String> {
        let pages = join_all(
            self.targets
                .iter()
                .map(|h| h.get_text("/metrics", Duration::from_secs(5))),
        )
        .await;
        let mut parts = Vec::with_capacity(pages.len());
        for (h, page) in self.targets.iter().zip(pages) {
            let text = match page {
                Ok((200, text)) => text,
                Ok((status, _)) => return Err(format!("replica {}: HTTP {status}", h.base())),
                Err(e) => return Err(format!("replica {}: {}", h.base(), one_line(&e))),
            };
            let set = MetricSet::parse_grouped(&text, attn_tp_size);
            if set.samples.is_empty() {
                return Err(format!(
                    "replica {}: not Prometheus text (no sample in {} bytes)",
                    h.base(),
                    text.len()
                ));
            }
            parts.push(server_snapshot(engine, &set));
        }
        Ok((ldb_core::replicas::combine(&parts, &self.kv_tokens), parts))
    }
}

fn one_line(e: &ClientError) -> String {
    e.to_string().replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metrics_url_names_its_replica_with_or_without_the_path() {
        assert_eq!(replica_base("http://a:8000"), "http://a:8000");
        assert_eq!(replica_base("http://a:8000/"), "http://a:8000");
        assert_eq!(replica_base("http://a:8000/metrics"), "http://a:8000");
        assert_eq!(replica_base("http://a:8000/metrics/"), "http://a:8000");
        assert_eq!(replica_base("http://a:8000/v2"), "http://a:8000/v2");
    }
}
