//! The realistic-workload flags: trace replay (`--trace*`) and multi-turn
//! sessions (`--sessions`, `--turns`, `--user-tokens`, `--think-time`);
//! checked in `workload_config.rs` (docs/workloads.md).

use std::path::PathBuf;

use clap::Args;

/// Trace replay and session flags.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Workloads: trace replay and sessions (docs/workloads.md)")]
pub struct WorkloadArgs {
    /// Replay this request trace at its own times instead of the matrix (open loop).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// mooncake, burstgpt or jsonl (default: detected from the first line).
    #[arg(long, value_name = "FORMAT")]
    pub trace_format: Option<String>,
    /// Time scale: 2 replays twice as fast (default 1).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "X")]
    pub trace_speed: Option<f64>,
    /// Trace seconds (from its first request) skipped at the start.
    #[arg(long, value_parser = crate::cli_float::number, value_name = "SECONDS")]
    pub trace_start: Option<f64>,
    /// Trace seconds replayed after --trace-start (default: to the end).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "SECONDS")]
    pub trace_duration: Option<f64>,
    /// Replay at most this many requests.
    #[arg(long, value_name = "N")]
    pub trace_limit: Option<u64>,
    /// BurstGPT: keep only rows of this Model (e.g. GPT-4).
    #[arg(long, value_name = "NAME")]
    pub trace_model: Option<String>,
    /// BurstGPT: keep only rows of this Log Type (e.g. "API log").
    #[arg(long, value_name = "TYPE")]
    pub trace_log_type: Option<String>,
    /// Count and skip trace rows that do not parse instead of stopping.
    #[arg(long)]
    pub trace_skip_bad: bool,
    /// Load the whole trace and sort it by time (timestamps may go backwards).
    #[arg(long)]
    pub trace_sort: bool,
    /// Built prompts counted with the server's /tokenize before a replay (default 200; 0 = none).
    #[arg(long, value_name = "N")]
    pub trace_tokenize_checks: Option<usize>,
    /// Replay the rows of a JSONL trace that share a session_id as the turns of one conversation (each turn resends it all).
    #[arg(long)]
    pub trace_sessions: bool,
    /// Multi-turn sessions instead of the matrix: this many conversations at once.
    #[arg(long, value_name = "N")]
    pub sessions: Option<u64>,
    /// Turns per session (default 4).
    #[arg(long, value_name = "T")]
    pub turns: Option<u32>,
    /// New user tokens per turn (default 256).
    #[arg(long, value_name = "K")]
    pub user_tokens: Option<u64>,
    /// Wait after each reply: SECONDS or exp:MEAN (default 0).
    #[arg(long, value_name = "S|exp:MEAN")]
    pub think_time: Option<String>,
    /// Sessions: send this header on every turn, its value stable per session (for routers that keep a session on one replica).
    #[arg(long, value_name = "NAME")]
    pub session_header: Option<String>,
    /// The --session-header value; {run} (this run's id) and {session} (0-based) are replaced (default {run}-{session}).
    #[arg(long, value_name = "TEMPLATE")]
    pub session_header_value: Option<String>,
    /// Sessions: the router's response header naming the replica that served a turn (a --metrics-url, its host:port, or a 1-based number).
    #[arg(long, value_name = "NAME")]
    pub replica_header: Option<String>,
    /// Trace replay or sessions: end the run at most this many seconds after its start; requests still open then fail (default: a replay's span + max(3 × span, 120 s); sessions 3600 s).
    #[arg(long, value_name = "SECONDS", value_parser = crate::cli_float::number)]
    pub replay_limit: Option<f64>,
    /// Cut built prompt text (--trace token counts, --sessions messages) from this text file instead of filler words.
    #[arg(long, value_name = "FILE")]
    pub prompt_corpus: Option<PathBuf>,
}
