//! The engine's prefix-cache granularity, for the intended hit rate.

use ldb_core::prefix_cache::CacheGranularity;

use crate::ctx::RunCtx;

impl RunCtx {
    /// How finely the served engine reuses cached prompt tokens.
    pub(crate) fn cache_granularity(&self) -> CacheGranularity {
        // placeholder until the engine's block size is discovered
        CacheGranularity::TOKEN
    }
}
