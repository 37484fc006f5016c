//! The prefix-cache flags: shared prefixes in the matrix and rate modes, the
//! granularity override and the cache reset (issue 25; methodology "Prefix
//! cache"), and their checks (bad input: exit 2 with one line).

use clap::Args;
use ldb_runner::prefix::{PrefixCacheSettings, ResetMode};

use crate::config::{ConfigError, bad};

/// Prefix-cache flags.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Prefix cache (docs/methodology.md)")]
pub struct PrefixArgs {
    /// Open every prompt with a shared system prompt of about N tokens, before the uniqueness
    /// nonce (counted in the context); prefill rows then measure the rest (warm_prefix).
    #[arg(long, value_name = "N")]
    pub shared_prefix_tokens: Option<u64>,
    /// Number of distinct shared prefixes; the requests of a rate cell take them in turn
    /// (needs --shared-prefix-tokens).
    #[arg(long, value_name = "G")]
    pub prefix_groups: Option<u32>,
    /// Reset the server's prefix cache: before-run, before-cell or never (default).
    #[arg(long, value_name = "WHEN")]
    pub reset_prefix_cache: Option<String>,
    /// Count the intended prefix-cache hit rate in blocks of N tokens instead of the
    /// granularity read from the server.
    #[arg(long, value_name = "N")]
    pub prefix_cache_block: Option<u32>,
}

/// `sim` flags of the simulated prefix cache.
#[derive(Debug, Args, Clone, Default)]
pub struct SimCacheArgs {
    /// KV block size in tokens, the prefix cache's reuse unit (default: the scenario's).
    #[arg(long, value_name = "N")]
    pub block_size: Option<u32>,
    /// Most free KV blocks that keep a cached prefix, evicted least recently used first
    /// (default: all of them).
    #[arg(long, value_name = "N")]
    pub prefix_cache_blocks: Option<u32>,
    /// Serve the guarded prefix-cache resets: vLLM's /reset_prefix_cache (as with
    /// VLLM_SERVER_DEV_MODE=1) and llama.cpp's slot erase (as with --slot-save-path).
    #[arg(long)]
    pub cache_reset: bool,
}

impl SimCacheArgs {
    /// Applies the flags to a scenario.
    pub fn apply(&self, s: &mut ldb_sim::Scenario) {
        s.kv.block_size = self.block_size.unwrap_or(s.kv.block_size).max(1);
        s.kv.prefix_cache_blocks = self.prefix_cache_blocks.or(s.kv.prefix_cache_blocks);
        s.server.cache_reset_enabled |= self.cache_reset;
    }
}

/// The run's prefix-cache settings, checked against the contexts.
pub fn settings(a: &PrefixArgs, contexts: &[u64]) -> Result<PrefixCacheSettings, ConfigError> {
    let shared = a.shared_prefix_tokens.unwrap_or(0);
    let groups = a.prefix_groups.unwrap_or(1);
    if groups == 0 {
        return Err(bad("--prefix-groups", "must be 1 or more"));
    }
    if groups > 1 && shared == 0 {
        return Err(bad(
            "--prefix-groups",
            "needs --shared-prefix-tokens N (the groups are distinct shared prefixes)",
        ));
    }
    if let Some(&x) = contexts.iter().find(|&&x| x > 0 && x <= shared) {
        return Err(bad(
            "--shared-prefix-tokens",
            format!("{shared} leaves nothing of context {x} after the prefix; use fewer tokens"),
        ));
    }
    let reset = match a.reset_prefix_cache.as_deref() {
        None => ResetMode::Never,
        Some(s) => ResetMode::parse(s).ok_or_else(|| {
            bad(
                "--reset-prefix-cache",
                format!("{s:?} (use before-run, before-cell or never)"),
            )
        })?,
    };
    if a.prefix_cache_block == Some(0) {
        return Err(bad("--prefix-cache-block", "must be 1 token or more"));
    }
    Ok(PrefixCacheSettings {
        shared_prefix_tokens: shared,
        prefix_groups: groups,
        reset,
        block_override: a.prefix_cache_block,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bad_values() {
        let d = settings(&PrefixArgs::default(), &[0, 1024]).expect("defaults");
        assert_eq!(
            (d.shared_prefix_tokens, d.groups(), d.reset),
            (0, 1, ResetMode::Never)
        );
        let ok = PrefixArgs {
            shared_prefix_tokens: Some(512),
            prefix_groups: Some(2),
            reset_prefix_cache: Some("before-cell".into()),
            prefix_cache_block: Some(16),
        };
        let s = settings(&ok, &[0, 1024]).expect("valid");
        assert_eq!(
            (s.reset, s.block_override),
            (ResetMode::BeforeCell, Some(16))
        );
        let err = |a: PrefixArgs, ctx: &[u64]| settings(&a, ctx).expect_err("bad").0;
        assert!(
            err(
                PrefixArgs {
                    prefix_groups: Some(2),
                    ..Default::default()
                },
                &[]
            )
            .contains("needs")
        );
        assert!(
            err(
                PrefixArgs {
                    shared_prefix_tokens: Some(2048),
                    ..Default::default()
                },
                &[2048]
            )
            .contains("context 2048")
        );
        assert!(
            err(
                PrefixArgs {
                    reset_prefix_cache: Some("always".into()),
                    ..Default::default()
                },
                &[]
            )
            .contains("before-run")
        );
        assert!(
            err(
                PrefixArgs {
                    prefix_cache_block: Some(0),
                    ..Default::default()
                },
                &[]
            )
            .contains("1 token")
        );
    }
}
