//! Open-loop (request-rate) cells: rates, arrivals and their bounds.

/// `--seed` when not given: fixed, so two runs send the same schedule.
pub const DEFAULT_SEED: u64 = 42;

/// The open-loop matrix (read by the open-loop phase and plan building).
#[derive(Debug, Clone)]
pub struct OpenLoopConfig {
    /// Open-loop rates, requests per second (`--request-rate`); non-empty
    /// replaces the sustained matrix by rate × context cells.
    pub request_rates: Vec<f64>,
    /// Arrival process of the open-loop cells (`--arrival`).
    pub arrival: ldb_core::arrivals::Arrival,
    /// Seed of the arrival schedules (`--seed`).
    pub seed: u64,
    /// Requests per open-loop cell (0 = rate × `duration`).
    pub rate_request_count: u64,
    /// Most requests in flight in an open-loop cell (0 = no cap).
    pub max_in_flight: u64,
    /// Open-loop cells: the least time past the last due time before the
    /// cell's limit (the limit is that or 3 × the schedule's span, whichever
    /// is longer). Not a flag; tests shorten it.
    pub open_loop_grace: f64,
    /// `--replay-limit`: the most seconds a trace replay or a session run
    /// lasts from its start (`None`: a replay's own limit, see
    /// `replay::trace::replay_limit`; sessions [`SESSION_LIMIT_S`]).
    pub replay_limit: Option<f64>,
}

/// A session run's limit without `--replay-limit`: sessions have no
/// schedule to size one from, and a server that never answers must not
/// hold the run for ever.
pub const SESSION_LIMIT_S: f64 = 3600.0;

impl OpenLoopConfig {
    /// True for an open-loop run (`--request-rate`).
    pub fn is_on(&self) -> bool {
        !self.request_rates.is_empty()
    }
}

impl Default for OpenLoopConfig {
    fn default() -> Self {
        OpenLoopConfig {
            request_rates: Vec::new(),
            arrival: ldb_core::arrivals::Arrival::Poisson,
            seed: DEFAULT_SEED,
            rate_request_count: 0,
            max_in_flight: 0,
            open_loop_grace: 120.0,
            replay_limit: None,
        }
    }
}
