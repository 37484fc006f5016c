//! Command-line flags (clap derive). Parsing only; validation is in `config.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit codes, also printed in `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0    every measured cell is valid (ok or capacity-limited)
  2    bad command line or configuration (nothing was sent)
  3    server unreachable, rejected the request (e.g. HTTP 401: check --api-key), or does not serve the model
  4    the run finished but some cells are invalid (ERROR or no tokens in the window;
       with --prefill-only: no prefill row was measured)
  5    the result file could not be written
  130  interrupted (q, Ctrl-C, SIGTERM or SIGHUP): the partial result was saved and reported;
       a second Ctrl-C or signal exits at once, leaving the last saved result file";

/// Sustained-decode and prefill benchmark for LLM inference servers.
#[derive(Debug, Parser)]
#[command(name = "llm-decode-bench", version, after_help = EXIT_CODES, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Subcommand (omit to run the benchmark).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Benchmark flags.
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a simulated inference engine (vLLM, SGLang, llama.cpp or a plain OpenAI proxy).
    Sim(SimArgs),
}

/// `sim` flags.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Engine personality: vllm, sglang, llamacpp or openai (default: the scenario's).
    #[arg(long)]
    pub engine: Option<String>,
    /// Built-in scenario name or a TOML file.
    #[arg(long, default_value = "quickstart")]
    pub scenario: String,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 = any free port).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Random seed override.
    #[arg(long)]
    pub seed: Option<u64>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list: bool,
}

/// Flags of the benchmark (names and defaults of the reference tool where they exist).
#[derive(Debug, Args, Default)]
pub struct BenchArgs {
    /// Server host name, or a full URL (http://…, https://…).
    #[arg(long, default_value = "localhost")]
    pub host: String,
    /// Server port (default 5000 for bare host names).
    #[arg(long)]
    pub port: Option<u16>,
    /// API key sent as `Authorization: Bearer` (never written to results).
    #[arg(long, env = "LLM_BENCH_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Model name (default: the first model the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Concurrency levels, comma separated [default: 1,2,4,8,16,32,64,128; with --sim: 1,4,16].
    #[arg(long, allow_hyphen_values = true)]
    pub concurrency: Option<String>,
    /// Context lengths in tokens, `k` = ×1024 [default: 0,16k,32k,64k,128k; with --sim: 0,8k].
    #[arg(long, allow_hyphen_values = true)]
    pub contexts: Option<String>,
    /// max_tokens per decode request [default: 8192; with --sim: 512].
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Seconds of measurement window per cell [default: 30; with --sim: 4].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Hidden C=1 warmup cell before the matrix, seconds (0 = off) [default: 3; with --sim: 1].
    #[arg(long)]
    pub decode_warmup_seconds: Option<f64>,
    /// Readiness limit per cell in seconds (0 = automatic, scaled with context and prefill speed).
    #[arg(long, default_value_t = 0.0)]
    pub cell_warmup_timeout_seconds: f64,
    /// Let requests stop at end-of-sequence (by default `ignore_eos: true` is sent).
    #[arg(long)]
    pub respect_eos: bool,
    /// Largest share of failed requests (0–1) that leaves a cell valid; above it the cell is ERROR.
    #[arg(long, default_value_t = 0.02)]
    pub max_error_rate: f64,
    /// Seconds to wait for a server that is still starting (connection refused, HTTP 502–504)
    /// before giving up with exit code 3 (0 = fail at once).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub wait_for_server: f64,
    /// KV budget in tokens (legacy name of --kv-budget).
    #[arg(long, default_value_t = 0)]
    pub max_total_tokens: u64,
    /// KV budget in tokens; cells with C × (context + max_tokens) above it are skipped (0 = detect).
    #[arg(long, default_value_t = 0)]
    pub kv_budget: u64,
    /// Context-parallel size multiplying the server's local KV size (0 = detect).
    #[arg(long, env = "LLM_BENCH_DCP_SIZE", default_value_t = 0)]
    pub dcp_size: u64,
    /// Print values of capacity-limited cells instead of ∅ in the report.
    #[arg(long)]
    pub show_capacity_limited_values: bool,
    /// Accepted for compatibility: prompts are sized exactly via /tokenize when the server has it,
    /// else by a two-point calibration.
    #[arg(long, hide = true)]
    pub token_targeting: Option<String>,
    /// Calibration context for servers without /tokenize.
    #[arg(long, default_value = "8k")]
    pub calibration_context: String,
    /// Calibration cache file.
    #[arg(long)]
    pub calibration_cache: Option<PathBuf>,
    /// Do not read or write the calibration cache.
    #[arg(long)]
    pub no_calibration_cache: bool,
    /// Extra scout-only prefill contexts [default: 8k,64k,128k; with --sim: 16k].
    #[arg(long, allow_hyphen_values = true)]
    pub prefill_contexts: Option<String>,
    /// Prefill headline: client, auto or prometheus (ttft and aiperf mean client).
    #[arg(long, default_value = "client")]
    pub prefill_metric: String,
    /// No prefill measurement.
    #[arg(long)]
    pub skip_prefill: bool,
    /// Repeated cold-prefill profile over --prefill-contexts before decode (a unique prefix per sample).
    #[arg(long)]
    pub standalone_prefill: bool,
    /// Seconds of sampling per standalone prefill context (at least 2 samples each).
    #[arg(long, default_value_t = 10.0)]
    pub prefill_duration: f64,
    /// Standalone cold prefill only, then stop (implies --standalone-prefill).
    #[arg(long)]
    pub prefill_only: bool,
    /// Measured requests per cell; > 0 replaces the sustained matrix by finite closed-loop batches.
    #[arg(long, default_value_t = 0)]
    pub request_count: u64,
    /// Discarded warmup requests per request-count cell (needs --request-count).
    #[arg(long, default_value_t = 0)]
    pub warmup_request_count: u64,
    /// After the sustained matrix, run a Burst / E2E matrix of finite batches.
    #[arg(long)]
    pub run_burst: bool,
    /// Measured requests per burst cell (0 = max(C, C × --burst-requests-per-concurrency)).
    #[arg(long, default_value_t = 0)]
    pub burst_request_count: u64,
    /// Warmup requests per burst cell (0 = C).
    #[arg(long, default_value_t = 0)]
    pub burst_warmup_request_count: u64,
    /// Multiplier for the automatic burst request count.
    #[arg(long, default_value_t = 5)]
    pub burst_requests_per_concurrency: u64,
    /// Sampling temperature for decode requests (not sent when unset).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Reference acceptance length for `accept_norm_tps` (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub accept_len_ref: f64,
    /// Seconds between hardware samples (0 disables).
    #[arg(long, default_value_t = 2.0)]
    pub hw_monitor_interval: f64,
    /// Disable hardware sampling.
    #[arg(long)]
    pub no_hw_monitor: bool,
    /// GPUs shown in live panels.
    #[arg(long, default_value_t = 8)]
    pub hw_gpu_limit: usize,
    /// Result JSON path (rewritten atomically after every cell).
    #[arg(long, default_value = "benchmark_results.json")]
    pub output: PathBuf,
    /// screen (live dashboard) or plain (log lines); plain is chosen when stdout is not a terminal.
    #[arg(long)]
    pub display_mode: Option<String>,
    /// Continue the run saved in --output: keep its finished cells and prefill rows, measure
    /// the failed and missing ones (same server, model, engine version and settings required).
    #[arg(long)]
    pub resume: bool,
    /// Discover the server, print the run plan (cells in order, skips with
    /// their reasons, estimated time) and exit 0 without generating anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Benchmark the built-in simulator (scenario name or TOML file; default quickstart).
    #[arg(long, num_args = 0..=1, default_missing_value = "quickstart")]
    pub sim: Option<String>,
    /// Engine personality of the simulator for --sim (default: the scenario's).
    #[arg(long)]
    pub sim_engine: Option<String>,
}
