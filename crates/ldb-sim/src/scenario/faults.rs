//! Fault-injection settings of a scenario.

use serde::Deserialize;

/// Injected faults. Every share is a probability in `[0, 1]` drawn per request from the
/// seeded generator.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// Share of generation requests answered with `error_status` before any work.
    #[serde(default)]
    pub error_share: f64,
    /// HTTP status of injected errors (500..=599).
    #[serde(default = "default_error_status")]
    pub error_status: u16,
    /// Generation requests answered with `error_status` by their order of
    /// arrival (1 = the first chat or completion request), besides the
    /// random `error_share`: one chosen request fails, as a transient 5xx does.
    #[serde(default)]
    pub error_requests: Vec<u64>,
    /// Injected errors come as an HTML page (`text/html`), as a reverse
    /// proxy in front of a dead engine answers, instead of the engine's JSON.
    #[serde(default)]
    pub error_html: bool,
    /// Close the connection (without `[DONE]`) after this many streamed tokens (0 = off).
    #[serde(default)]
    pub drop_after_tokens: u32,
    /// Share of streams the drop applies to.
    #[serde(default = "one_f")]
    pub drop_share: f64,
    /// Pause the stream for `stall_seconds` after this many tokens (0 = off).
    #[serde(default)]
    pub stall_after_tokens: u32,
    /// Length of the stall.
    #[serde(default)]
    pub stall_seconds: f64,
    /// Write one malformed SSE line after this many tokens (0 = off).
    #[serde(default)]
    pub malformed_after_tokens: u32,
    /// Delay every `/metrics` answer by this many seconds.
    #[serde(default)]
    pub metrics_delay_s: f64,
    /// Share of `/metrics` requests answered with HTTP 500.
    #[serde(default)]
    pub metrics_fail_share: f64,
    /// After this many `/metrics` requests, every later one answers HTTP 200
    /// with bytes that are not Prometheus text (0 = off).
    #[serde(default)]
    pub metrics_garbage_after: u32,
    /// After this many `/metrics` requests, every later one never answers
    /// (the connection stays open; 0 = off).
    #[serde(default)]
    pub metrics_hang_after: u32,
    /// `/metrics` reads arriving at least this long after the latest
    /// generation request show `metrics_queue_blip` more waiting requests
    /// than the engine has, for `metrics_queue_blip_reads` reads, once per
    /// such quiet stretch (0 = off): a queue gauge caught at an instant (a
    /// restarting request waiting for the next step) that later reads no
    /// longer see.
    #[serde(default)]
    pub metrics_queue_blip_after_s: f64,
    /// How many reads in a row show it.
    #[serde(default = "one_u32")]
    pub metrics_queue_blip_reads: u32,
    /// Waiting requests such a read adds.
    #[serde(default = "two_usize")]
    pub metrics_queue_blip: usize,
    /// A slow HTTP front end: each streamed chunk waits this long before it
    /// is written, one chunk per write (0 = off). When the engine generates
    /// faster, a backlog grows and the client receives fewer tokens per second
    /// than the generation counter says.
    #[serde(default)]
    pub frontend_chunk_delay_s: f64,
    /// Share of streamed generation requests answered with HTTP 200 and
    /// then only SSE keep-alive comments (`: ping`), never a token, until
    /// the client hangs up: a server that accepts and never answers. The
    /// engine never sees them.
    #[serde(default)]
    pub keepalive_only_share: f64,
    /// Seconds between those comments.
    #[serde(default = "half_f")]
    pub keepalive_interval_s: f64,
    /// Streamed generation requests that get the keep-alive-only answer by
    /// their order of arrival (1 = the first chat or completion request),
    /// besides the random `keepalive_only_share`: one chosen request (a
    /// scout, say) hangs while the others are served.
    #[serde(default)]
    pub keepalive_requests: Vec<u64>,
}

fn half_f() -> f64 {
    0.5
}

fn default_error_status() -> u16 {
    503
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            error_share: 0.0,
            error_status: default_error_status(),
            error_requests: Vec::new(),
            error_html: false,
            drop_after_tokens: 0,
            drop_share: 1.0,
            stall_after_tokens: 0,
            stall_seconds: 0.0,
            malformed_after_tokens: 0,
            metrics_delay_s: 0.0,
            metrics_fail_share: 0.0,
            metrics_garbage_after: 0,
            metrics_hang_after: 0,
            metrics_queue_blip_after_s: 0.0,
            metrics_queue_blip_reads: one_u32(),
            metrics_queue_blip: two_usize(),
            frontend_chunk_delay_s: 0.0,
            keepalive_only_share: 0.0,
            keepalive_interval_s: half_f(),
            keepalive_requests: Vec::new(),
        }
    }
}

fn one_u32() -> u32 {
    1
}

fn two_usize() -> usize {
    2
}

fn one_f() -> f64 {
    1.0
}
