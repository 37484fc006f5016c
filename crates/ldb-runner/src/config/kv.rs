//! The KV-cache budget overrides (0 everywhere = detect from the server).

/// Manual KV capacity figures (read by startup's budget detection).
#[derive(Debug, Clone, Default)]
pub struct KvConfig {
    /// Manual KV budget (0 = detect).
    pub kv_budget: u64,
    /// Legacy budget flag (0 = detect).
    pub max_total_tokens: u64,
    /// Context-parallel multiplier (0 = detect).
    pub dcp_size: u64,
}
