//! The Burst / E2E matrix that may follow the sustained one.

/// Whether the burst matrix runs and how many requests each cell sends
/// (read by the burst phase and plan building).
#[derive(Debug, Clone)]
pub struct BurstConfig {
    /// Run the Burst / E2E matrix after the sustained one.
    pub run_burst: bool,
    /// Measured requests per burst cell (0 = max(C, C × per-concurrency)).
    pub burst_request_count: u64,
    /// Warmup requests per burst cell (0 = C).
    pub burst_warmup_request_count: u64,
    /// Multiplier for the automatic burst request count (≥ 1).
    pub burst_requests_per_concurrency: u64,
}

impl Default for BurstConfig {
    fn default() -> Self {
        BurstConfig {
            run_burst: false,
            burst_request_count: 0,
            burst_warmup_request_count: 0,
            burst_requests_per_concurrency: 5,
        }
    }
}
