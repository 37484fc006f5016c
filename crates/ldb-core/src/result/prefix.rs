//! Prefix-cache keys of the result: per cell (intended vs achieved hit rate,
//! where the achieved one came from, whether the cache was reset before the
//! cell) and per run (granularity, shared prefixes, reset mode).
//!
//! Every key is omitted when not measured, so files written before these keys
//! existed read back and write out unchanged.

use serde::{Deserialize, Serialize};

use crate::prefix_cache::CacheGranularity;

/// Whether the server's prefix cache was reset at a `--reset-prefix-cache`
/// point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetStatus {
    /// The engine confirmed the reset.
    Done,
    /// The engine refused or does not offer a reset (the cache was not reset).
    Refused,
    /// `--reset-prefix-cache never`, or not a reset point.
    NotRequested,
}

impl ResetStatus {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetStatus::Done => "done",
            ResetStatus::Refused => "refused",
            ResetStatus::NotRequested => "not_requested",
        }
    }
}

/// Difference between intended and achieved hit rate above which a cell is
/// flagged (10 percentage points, issue 25).
pub const PREFIX_MISMATCH_POINTS: f64 = 10.0;

/// The prefix-cache keys of one cell (flattened into matrix and rate cells).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PrefixCacheCell {
    /// Reused ÷ prompt tokens that a prefix cache of unlimited capacity at
    /// [`PrefixCacheCell::prefix_cache_granularity`] would serve for the
    /// requests this cell measured (methodology "Prefix cache").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_intended: Option<f64>,
    /// The granularity the intended rate was counted in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_granularity: Option<CacheGranularity>,
    /// Where `server_prefix_cache_hit_rate` came from: `vllm_counters`,
    /// `sglang_counters`, `llamacpp_timings` or `usage_cached_tokens`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_prefix_cache_source: String,
    /// Over `--metrics-url` replicas: what the counters behind the achieved
    /// rate rest on (how many replicas, each its own delta, and any
    /// replica whose series was absent); absent for one server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_prefix_cache_basis: String,
    /// The reset before this cell (absent when no reset was asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_reset: Option<ResetStatus>,
}

impl PrefixCacheCell {
    /// Achieved minus intended, in percentage points, when both are known.
    pub fn gap_points(&self, achieved: Option<f64>) -> Option<f64> {
        Some((achieved? - self.prefix_cache_intended?) * 100.0)
    }

    /// Whether achieved and intended differ by more than
    /// [`PREFIX_MISMATCH_POINTS`].
    pub fn mismatch(&self, achieved: Option<f64>) -> bool {
        self.gap_points(achieved)
            .is_some_and(|g| g.abs() > PREFIX_MISMATCH_POINTS)
    }
}

/// The run's prefix-cache settings (metadata `prefix_cache`; absent when
/// neither shared prefixes nor a reset were asked and nothing was measured).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunPrefixCache {
    /// The granularity the intended rates are counted in.
    pub granularity: Option<CacheGranularity>,
    /// Where it came from: `flag`, `vllm_cache_config_info`,
    /// `vllm_default_gpu`, `vllm_default_cpu`, `sglang_server_info`,
    /// `sglang_default`, `llamacpp_token`, `default`.
    pub granularity_source: String,
    /// `--shared-prefix-tokens` (0: none).
    pub shared_prefix_tokens: u64,
    /// Tokens of the shared prefix as the server counted them (absent when
    /// the server cannot count tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens_counted: Option<u64>,
    /// `--prefix-groups`.
    pub prefix_groups: u32,
    /// `--reset-prefix-cache`: `before-run`, `before-cell` or `never`.
    pub reset_mode: String,
    /// The reset before the run (`not_requested` with `never`).
    pub reset: Option<ResetStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_keys_stay_absent_and_a_gap_flags() {
        let c = PrefixCacheCell::default();
        assert_eq!(serde_json::to_string(&c).unwrap(), "{}");
        let c = PrefixCacheCell {
            prefix_cache_intended: Some(0.8),
            prefix_cache_reset: Some(ResetStatus::Refused),
            ..Default::default()
        };
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["prefix_cache_reset"], "refused");
        assert!(c.mismatch(Some(0.65)));
        assert!(!c.mismatch(Some(0.75)));
        assert!(!c.mismatch(None));
        assert_eq!(c.gap_points(Some(0.7)).map(f64::round), Some(-10.0));
    }
}
