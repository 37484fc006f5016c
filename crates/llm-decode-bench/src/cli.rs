//! Command-line flags (clap derive). Parsing only; validation is in `config.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit codes, also printed in `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0    every measured cell is valid (ok or capacity-limited)
  1    compare only: a cell or prefill row regressed beyond --threshold
  2    bad command line or configuration (nothing was sent)
  3    server unreachable, rejected the request (e.g. HTTP 401: check --api-key), or does not serve the model;
       or it stopped answering mid-run and did not return within --server-down-grace (the result is saved)
  4    the run finished but some cells are invalid (ERROR or no tokens in the window;
       with --prefill-only: no prefill row was measured;
       with --amd-fabric-only/--p2pmark-only: a diagnostic asked for is not ok)
  5    the result file (or a report file of `report`: CSV, Markdown, HTML, JSONL) could not be written
  6    --shards: a follower lost its leader (its record is saved), or the leader lost a follower
       under --on-shard-loss stop
  130  interrupted (q, Ctrl-C, SIGTERM or SIGHUP): the partial result was saved and reported;
       a second Ctrl-C or signal exits at once, leaving the last saved result file";

/// Sustained-decode and prefill benchmark for LLM inference servers.
#[derive(Debug, Parser)]
// As the reference's parser: unambiguous prefixes of long flags (`--conc`),
// and a repeated flag takes its last value.
#[command(
    name = "llm-decode-bench",
    version,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    infer_long_args = true,
    args_override_self = true
)]
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
    /// Compare result files: each NEW run against BASE, cell by cell (exit 1 on a regression).
    Compare(CompareArgs),
    /// Print the final report of a saved result file; write it as CSV, Markdown, HTML or JSONL.
    Report(ReportArgs),
    /// Measure this host's client ceiling: streams from an in-process simulator at rising load.
    Selftest(SelftestArgs),
    /// Stream chat completions and watch for Han (Chinese) ideographs in the output
    /// (exit 2 when one appears).
    CjkWatchdog(CjkWatchdogArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) to stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout.
    Man,
    /// Run the measurement flags recorded in a result file again (planning afresh); flags
    /// after the file override them (e.g. --host, --output). Flags that run programs, touch
    /// local files or ports, or choose the server are left out unless given again
    /// (docs/security.md).
    Rerun(RerunArgs),
    /// Print what runs a sharded benchmark on a cluster: a Kubernetes Indexed Job
    /// (`deploy k8s`) or an sbatch script (`deploy slurm`); benchmark flags after `--`.
    Deploy(crate::deploy::DeployArgs),
    /// Combine offline shards' records (--start-at) into one result, cell by cell from
    /// their requests; refused when their windows differ (docs/shards.md).
    Merge(crate::merge::MergeArgs),
    /// Convert the agent traces AIPerf (`--from aiperf`) or AgentX (`--from agentx`) replay
    /// to this tool's JSONL, for `--trace FILE --trace-sessions` (docs/workloads.md).
    ConvertTrace(crate::convert_trace::ConvertTraceArgs),
}

/// `completions` flags.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `rerun` flags.
#[derive(Debug, Args)]
pub struct RerunArgs {
    /// Also replay the recorded flags a stranger's file must not set: programs, local
    /// files read or written, listening ports, shard roles, endpoints other than the
    /// server, and the server itself (which then receives the API key). Only for a result
    /// file you trust (docs/security.md).
    #[arg(long)]
    pub trust_recorded_flags: bool,
    /// A result file written by a run of this tool.
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// Benchmark flags replacing the recorded ones (default --output: RESULT's name with
    /// `-rerun` added, never RESULT itself).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "FLAGS"
    )]
    pub flags: Vec<String>,
}

/// Exit codes of `cjk-watchdog`, printed in its `--help`.
pub const CJK_EXIT_CODES: &str = "\
Exit codes:
  0    no Han ideograph was streamed (one iteration, or --loop ended without one)
  2    a Han ideograph was streamed; also a bad command line (as the reference script)
  3    the server was unreachable or answered with an error (the loop ends there)
  130  interrupted (Ctrl-C, SIGTERM or SIGHUP)";

/// `cjk-watchdog` flags (the reference script's names and defaults).
#[derive(Debug, Args)]
#[command(after_help = CJK_EXIT_CODES, version)]
pub struct CjkWatchdogArgs {
    /// Server host name, or a full URL (the port is appended only when the URL has none).
    #[arg(long, default_value = "localhost")]
    pub host: String,
    /// Server port.
    #[arg(long, default_value_t = 5000)]
    pub port: u16,
    /// API key sent as `Authorization: Bearer` (empty: none; never printed).
    #[arg(
        long,
        env = "LLM_BENCH_API_KEY",
        hide_env_values = true,
        default_value = ""
    )]
    pub api_key: String,
    /// Model name (empty: the first model the server lists).
    #[arg(long, default_value = "")]
    pub model: String,
    /// Put a synthetic document of about N tokens before the prompt (0 = none).
    #[arg(short = 'c', long, default_value_t = 0)]
    pub context_tokens: u64,
    /// The user prompt.
    #[arg(short = 'p', long, default_value = ldb_core::coding_peak::DEFAULT_PROMPT)]
    pub prompt: String,
    /// max_tokens per request.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: u64,
    /// Repeat until a Han ideograph appears (the stream is closed at the first one).
    #[arg(short = 'L', long = "loop")]
    pub repeat: bool,
    /// No live status rows at the bottom of the terminal (plain output).
    #[arg(long)]
    pub no_overlay: bool,
}

/// `selftest` flags.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// The highest number of streams to try (levels 16, 64, 256, 1024, … up to this).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_streams: u32,
    /// Window of each level, seconds (after a 1 s warmup).
    #[arg(long, default_value_t = 3.0, value_parser = crate::cli_float::selftest_window)]
    pub window: f64,
    /// Measure every level, also after the first one the client misses.
    #[arg(long)]
    pub all_levels: bool,
    /// Print the levels and the verdict as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Exit codes of `compare`, printed in its `--help`.
pub const COMPARE_EXIT_CODES: &str = "\
Exit codes (like diff):
  0    no cell or prefill row regressed beyond --threshold
  1    some cell or prefill row regressed beyond --threshold (or stopped being valid)
  2    bad input: a file that is not a readable result, a bad flag, or runs that are
       not comparable without --force";

/// `compare` flags.
#[derive(Debug, Args)]
#[command(after_help = COMPARE_EXIT_CODES)]
pub struct CompareArgs {
    /// Result files: the base run first, then one or more new runs (each compared with the base).
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Percent change (of the base value) beyond which a metric counts as a regression or an improvement.
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 5.0, value_name = "PCT")]
    pub threshold: f64,
    /// Output: text (aligned table), markdown (for pull requests) or json (for scripts).
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Compare runs whose settings differ (engine, model, engine version, matrix, window, prompts).
    #[arg(long)]
    pub force: bool,
}

/// `compare --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// Aligned tables for a terminal.
    Text,
    /// GitHub-flavoured Markdown.
    Markdown,
    /// One JSON object with stable keys (docs/compare.md).
    Json,
}

/// `report` flags.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A result file written by a run; more files are only for --html, which overlays them.
    #[arg(value_name = "RESULT", required = true, num_args = 1..)]
    pub results: Vec<PathBuf>,
    /// Write one CSV row per cell (decode and burst) to FILE (`-`: stdout, instead of the report).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the main tables as Markdown to FILE (`-`: stdout, instead of the report).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write a self-contained HTML report (tables and charts; several RESULT files overlay
    /// their curves) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write every request sample as one JSON object per line to FILE (`-`: stdout, instead
    /// of the report).
    #[arg(long, value_name = "FILE")]
    pub requests_jsonl: Option<PathBuf>,
    /// Print the tok/s of capacity-limited cells instead of ∅ (also on when the run had it).
    #[arg(long)]
    pub show_capacity_limited_values: bool,
    /// Judge the saved cells against latency targets, `key=seconds,…` (replaces the run's own
    /// --slo verdicts; see --help of the benchmark for the keys).
    #[arg(long, value_name = "SPEC")]
    pub slo: Option<String>,
    /// Judge the saved cells against a named set of public targets (see --help of the
    /// benchmark); --slo keys override its keys.
    #[arg(long, value_name = "NAME")]
    pub slo_preset: Option<String>,
    /// Print one decode cell's per-second timeline instead of the report; CELL is C:CTX
    /// (e.g. 16:8k).
    #[arg(long, value_name = "CELL")]
    pub timeline: Option<String>,
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
    /// A per-step token budget shared by decodes and chunked prefill, as vLLM's
    /// --max-num-batched-tokens (default: the scenario's; must exceed its running cap).
    #[arg(long, value_name = "N")]
    pub max_num_batched_tokens: Option<u32>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// The simulated prefix cache (`cli_prefix.rs`).
    #[command(flatten)]
    pub cache: crate::cli_prefix::SimCacheArgs,
}

/// Flags of the benchmark (names and defaults of the reference tool where they exist).
#[derive(Debug, Args, Default)]
pub struct BenchArgs {
    /// Read flags from a TOML file (keys are long flag names: `max-tokens = 512`); flags on
    /// the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (defaults, presets and --config applied) as TOML
    /// and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Serve the run's live state (cell, window progress, tok/s, requests in flight,
    /// errors, client CPU, loop lag) in the Prometheus text format at http://ADDR:PORT/metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
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
    /// Request API of every generation request: chat (/v1/chat/completions),
    /// completions (/v1/completions), responses (/v1/responses) or messages
    /// (/v1/messages); refused before the run if the server does not serve it.
    #[arg(long, default_value = "chat")]
    pub api: ldb_core::api::Api,
    /// Concurrency levels, comma separated [default: 1,2,4,8,16,32,64,128; with --sim: 1,4,16].
    #[arg(long, allow_hyphen_values = true)]
    pub concurrency: Option<String>,
    /// Context lengths in tokens, `k` = ×1024 [default: 0,16k,32k,64k,128k; with --sim: 0,8k].
    #[arg(long, allow_hyphen_values = true)]
    pub contexts: Option<String>,
    /// max_tokens per decode request [default: 8192; with --sim: 512].
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Seconds of measurement window per cell, or `auto`: each sustained cell stops once its
    /// rate is known to ±--target-ci % (between --min-duration and --max-duration) [default: 30; with --sim: 4].
    #[arg(long, value_parser = parse_duration_arg)]
    pub duration: Option<DurationArg>,
    /// With `--duration auto`: the longest window of a cell, seconds [default: 30].
    #[arg(long, value_parser = crate::cli_float::number)]
    pub max_duration: Option<f64>,
    /// With `--duration auto`: a window closes when the 95 % interval of its rate is within ±PCT % of the mean [default: 1].
    #[arg(long, value_parser = crate::cli_float::number, value_name = "PCT")]
    pub target_ci: Option<f64>,
    /// With `--duration auto`: no window closes on its interval before this many seconds [default: 5].
    #[arg(long, value_parser = crate::cli_float::number)]
    pub min_duration: Option<f64>,
    /// Hidden C=1 warmup cell before the matrix, seconds (0 = off) [default: 3; with --sim: 1].
    #[arg(long, value_parser = crate::cli_float::number)]
    pub decode_warmup_seconds: Option<f64>,
    /// Readiness limit per cell in seconds (0 = automatic, scaled with context and prefill speed);
    /// also bounds the warmup's waits (0: 300 s).
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 0.0)]
    pub cell_warmup_timeout_seconds: f64,
    /// Let requests stop at end-of-sequence (by default `ignore_eos: true` is sent).
    #[arg(long)]
    pub respect_eos: bool,
    /// Largest share of failed requests (0–1) that leaves a cell valid; above it the cell is ERROR.
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 0.02)]
    pub max_error_rate: f64,
    /// Seconds to wait for a server that is still starting (connection refused, HTTP 502–504)
    /// before giving up with exit code 3 (0 = fail at once).
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 0.0, value_name = "SECONDS")]
    pub wait_for_server: f64,
    /// Fail a request whose tokens stop for this many seconds after its first one while the
    /// connection stays open (0 = never; the cell's own limits still apply).
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 60.0, value_name = "SECONDS")]
    pub stream_idle_timeout: f64,
    /// When the server stops answering mid-run, wait this many seconds for it to come back; if it
    /// does not, the cells left are labelled error, the result is saved and the run exits with
    /// code 3.
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 30.0, value_name = "SECONDS")]
    pub server_down_grace: f64,
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
    /// Prompt sizing: exact (count each context's prompt where the server can, else estimate) or
    /// estimate (from a two-point calibration alone) [default: exact].
    #[arg(long, value_name = "exact|estimate")]
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
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 10.0)]
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
    /// Open loop: requests per second, comma-separated (e.g. 0.5,1,2); replaces the sustained
    /// matrix by rate × context cells whose requests leave on schedule (latency from the due time).
    #[arg(long, value_name = "R1,R2,…")]
    pub request_rate: Option<String>,
    /// Arrival process of --request-rate: poisson (default) or constant.
    #[arg(long, value_name = "PROCESS")]
    pub arrival: Option<String>,
    /// Seed of the --request-rate schedules (default 42; recorded in the result).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Cap on requests in flight in an open-loop cell (default: no cap); later requests wait.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u64>,
    /// Open loop: stop raising the rate at a context after two saturated cells in a row.
    #[arg(long)]
    pub stop_at_saturation: bool,
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
    #[arg(long, value_parser = crate::cli_float::number)]
    pub temperature: Option<f64>,
    /// Reference acceptance length for `accept_norm_tps` (0 = off).
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 0.0)]
    pub accept_len_ref: f64,
    /// Seconds between hardware samples (0 disables).
    #[arg(long, value_parser = crate::cli_float::number, default_value_t = 2.0)]
    pub hw_monitor_interval: f64,
    /// Seconds between the server's /metrics reads while something is measured (windows, burst
    /// batches, prefill probes); 0 = only at each measurement's start and end. Ramp-up and idle
    /// waits still read every 0.5 s. Reading /metrics costs vLLM and SGLang CPU time.
    #[arg(long, value_parser = crate::cli_float::number, value_name = "SECONDS", default_value_t = ldb_runner::config::DEFAULT_METRICS_INTERVAL)]
    pub metrics_interval: f64,
    /// A replica's /metrics behind a router (repeatable, or comma-separated: one per replica;
    /// `http://HOST:PORT` or `…/metrics`): readiness, the KV budget and server-side validation
    /// read every replica and sum them instead of reading the server named by --host.
    #[arg(long, value_name = "URL", value_delimiter = ',')]
    pub metrics_url: Vec<String>,
    /// Disable hardware sampling.
    #[arg(long)]
    pub no_hw_monitor: bool,
    /// GPUs shown in live panels.
    #[arg(long, default_value_t = 8)]
    pub hw_gpu_limit: usize,
    /// Result JSON path (rewritten atomically after every cell).
    #[arg(long, default_value = "benchmark_results.json")]
    pub output: PathBuf,
    /// Also write a self-contained HTML report to FILE, rewritten after every cell like the
    /// result JSON (open it in a browser and reload to watch the run); a failed write is a
    /// warning.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// At the end, write every request sample as one JSON object per line to FILE.
    #[arg(long, value_name = "FILE")]
    pub requests_jsonl: Option<PathBuf>,
    /// screen (live dashboard) or plain (log lines); plain is chosen when stdout is not a terminal.
    #[arg(long)]
    pub display_mode: Option<String>,
    /// Dashboard redraws per second at most (0.2–10) [default: 10].
    #[arg(long, value_parser = crate::cli_float::number, value_name = "HZ")]
    pub refresh_rate: Option<f64>,
    /// Continue the run saved in --output: keep its finished cells and prefill rows, measure
    /// the failed and missing ones (same server, model, engine version and settings required).
    #[arg(long)]
    pub resume: bool,
    /// Discover the server, print the run plan (cells in order, skips with
    /// their reasons, estimated time) and exit 0 without generating anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Latency targets judged per cell, `key=seconds` comma separated: ttft, ttfo, token_gap or
    /// e2e, each with _p50, _p90 or _p99 (e.g. ttft_p99=2,token_gap_p99=0.05); adds each cell's
    /// verdict and goodput and the highest passing concurrency per context. The exit code does
    /// not depend on it.
    #[arg(long, value_name = "SPEC")]
    pub slo: Option<String>,
    /// Paired per-item comparison against this earlier completion-stats result: with
    /// --compare-candidate, compare the two files without contacting a server.
    #[arg(long, value_name = "FILE")]
    pub compare_baseline: Option<PathBuf>,
    /// The second completion-stats result of a standalone paired comparison (needs
    /// --compare-baseline); the comparison JSON is written only when --output is given.
    #[arg(long, value_name = "FILE")]
    pub compare_candidate: Option<PathBuf>,
    /// Named public latency targets (MLPerf Inference server limits, e.g. mlperf-llama2-70b,
    /// mlperf-llama3.1-405b-interactive; docs/slo.md lists them); --slo keys override its keys.
    #[arg(long, value_name = "NAME")]
    pub slo_preset: Option<String>,
    /// Stop raising the concurrency at a context once two consecutive levels failed the SLO
    /// (needs --slo or --slo-preset; the skipped cells are recorded as skipped_slo).
    #[arg(long)]
    pub slo_search: bool,
    /// After the matrix, measure the levels between the last passing and the first failing
    /// concurrency of each context (bisection) so the SLO frontier is the highest passing level.
    #[arg(long)]
    pub slo_bisect: bool,
    /// Measure every cell of the matrix N times, pass after pass over the matrix; the report
    /// shows mean ± 95 % confidence interval (default 1).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Benchmark the built-in simulator (scenario name or TOML file; default quickstart).
    #[arg(long, num_args = 0..=1, default_missing_value = "quickstart")]
    pub sim: Option<String>,
    /// Engine personality of the simulator for --sim (default: the scenario's).
    #[arg(long)]
    pub sim_engine: Option<String>,
    /// Completion-token statistics mode.
    #[command(flatten)]
    pub cstats: crate::cli_cstats::CsArgs,
    /// After the matrix's report and save, run single-stream coding requests one after
    /// another and add their generation speed to the result (`coding_peak`).
    #[arg(long)]
    pub coding_peak: bool,
    /// Number of sequential coding-peak runs.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub coding_peak_runs: u32,
    /// max_tokens of each coding-peak run (the server's own stop applies: no ignore_eos).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub coding_peak_max_tokens: u64,
    /// The coding-peak prompt.
    #[arg(long, default_value = ldb_core::coding_peak::DEFAULT_PROMPT)]
    pub coding_peak_prompt: String,
    /// Sampling temperature of the coding-peak runs (not sent when unset).
    #[arg(long, value_parser = crate::cli_float::temperature, allow_hyphen_values = true)]
    pub coding_peak_temperature: Option<f64>,
    /// Trace replay and multi-turn sessions (docs/workloads.md).
    #[command(flatten)]
    pub workload: crate::cli_workload::WorkloadArgs,
    /// Tool definitions and the sessions' tool loop.
    #[command(flatten)]
    pub tools: crate::cli_tools::ToolArgs,
    /// The prefill–decode interference probe (`--mixed-prefill-contexts`).
    #[command(flatten)]
    pub mixed: crate::cli_mixed::MixedArgs,
    /// Energy and cost per token (docs/methodology.md §11).
    #[command(flatten)]
    pub energy: crate::cli_energy::EnergyArgs,
    /// Shards: one measurement from several client processes (docs/shards.md).
    #[command(flatten)]
    pub shard: crate::cli_shard::ShardArgs,
    /// Fabric diagnostics (GPU peer-to-peer, CPU/NUMA); last, because its
    /// help heading applies to every flag after it.
    #[command(flatten)]
    pub fabric: crate::cli_fabric::FabricArgs,
    /// Prefix-cache flags (shared prefixes, reset), under their own heading.
    #[command(flatten)]
    pub prefix_cache: crate::cli_prefix::PrefixArgs,
}

/// `--duration`: a number of seconds, or `auto` (stop when the rate is known).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DurationArg {
    /// A fixed window, seconds (validated in `config.rs`).
    Seconds(f64),
    /// `auto`: see `ldb_core::autostop`.
    Auto,
}

/// Parse `--duration`: `auto` or a number (bounded as every float flag;
/// its range is checked in `config.rs`).
fn parse_duration_arg(s: &str) -> Result<DurationArg, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(DurationArg::Auto);
    }
    crate::cli_float::number(s)
        .map(DurationArg::Seconds)
        .map_err(|_| format!("{s:?} is not a number of seconds or `auto`"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_flag_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn compare_takes_a_base_and_one_or_more_new_runs() {
        let cli = Cli::try_parse_from([
            "x", "compare", "a.json", "b.json", "c.json", "--format", "json",
        ])
        .expect("parses");
        let Some(Command::Compare(a)) = cli.command else {
            panic!("not compare");
        };
        assert_eq!(a.files.len(), 3);
        assert_eq!(
            (a.format, a.threshold, a.force),
            (CompareFormat::Json, 5.0, false)
        );
        assert!(Cli::try_parse_from(["x", "compare", "a.json"]).is_err());
        assert!(
            Cli::try_parse_from(["x", "compare", "a.json", "b.json", "--format", "html"]).is_err()
        );
    }

    #[test]
    fn report_takes_several_files_and_html_and_jsonl_outputs() {
        let cli = Cli::try_parse_from([
            "x",
            "report",
            "a.json",
            "b.json",
            "--html",
            "r.html",
            "--requests-jsonl",
            "r.jsonl",
        ])
        .expect("parses");
        let Some(Command::Report(a)) = cli.command else {
            panic!("not report");
        };
        assert_eq!(a.results.len(), 2);
        assert_eq!(a.html, Some(PathBuf::from("r.html")));
        assert_eq!(a.requests_jsonl, Some(PathBuf::from("r.jsonl")));
        assert!(Cli::try_parse_from(["x", "report"]).is_err());
        let cli = Cli::try_parse_from(["x", "--html", "live.html", "--requests-jsonl", "s.jsonl"])
            .expect("parses");
        assert_eq!(cli.bench.html, Some(PathBuf::from("live.html")));
        assert_eq!(cli.bench.requests_jsonl, Some(PathBuf::from("s.jsonl")));
    }
}
