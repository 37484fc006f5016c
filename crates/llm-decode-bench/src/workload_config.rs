//! The workload flags checked into a replay configuration: the trace file
//! is read once here (hash, format, every row of the window), so a bad row
//! or an empty trace is one line and exit 2 before any request is sent.

use ldb_core::replay::session::ThinkTime;
use ldb_core::trace::{TraceFormat, TraceOptions};
use ldb_runner::replay::router::RouterOptions;
use ldb_runner::replay::{ReplayConfig, SessionConfig, ToolLoop, TraceConfig, scan};

use crate::cli::BenchArgs;
use crate::cli_workload::WorkloadArgs;
use crate::config::{ConfigError, bad};

/// Default `--trace-tokenize-checks`.
const TOKENIZE_CHECKS: usize = 200;

fn non_negative(flag: &str, v: Option<f64>) -> Result<Option<f64>, ConfigError> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(bad(flag, "must be ≥ 0 seconds")),
        v => Ok(v),
    }
}

fn trace_options(w: &WorkloadArgs) -> Result<TraceOptions, ConfigError> {
    let speed = w.trace_speed.unwrap_or(1.0);
    if !(speed.is_finite() && speed > 0.0) {
        return Err(bad("--trace-speed", "must be a positive time scale"));
    }
    if w.trace_limit == Some(0) {
        return Err(bad("--trace-limit", "must be at least 1"));
    }
    Ok(TraceOptions {
        speed,
        start_s: non_negative("--trace-start", w.trace_start)?.unwrap_or(0.0),
        duration_s: non_negative("--trace-duration", w.trace_duration)?,
        limit: w.trace_limit,
        model: w.trace_model.clone(),
        log_type: w.trace_log_type.clone(),
        skip_bad: w.trace_skip_bad,
        sort: w.trace_sort,
    })
}

fn trace_flags_without_trace(w: &WorkloadArgs) -> Option<&'static str> {
    [
        (w.trace_format.is_some(), "--trace-format"),
        (w.trace_speed.is_some(), "--trace-speed"),
        (w.trace_start.is_some(), "--trace-start"),
        (w.trace_duration.is_some(), "--trace-duration"),
        (w.trace_limit.is_some(), "--trace-limit"),
        (w.trace_model.is_some(), "--trace-model"),
        (w.trace_log_type.is_some(), "--trace-log-type"),
        (w.trace_skip_bad, "--trace-skip-bad"),
        (w.trace_sort, "--trace-sort"),
        (w.trace_tokenize_checks.is_some(), "--trace-tokenize-checks"),
        (w.trace_sessions, "--trace-sessions"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

fn session_flags_without_sessions(w: &WorkloadArgs) -> Option<&'static str> {
    [
        (w.turns.is_some(), "--turns"),
        (w.user_tokens.is_some(), "--user-tokens"),
        (w.think_time.is_some(), "--think-time"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// `--session-header`, `--session-header-value`, `--replica-header`: names
/// that are HTTP tokens and not credential or framing headers, a template
/// with known placeholders only (docs/security.md).
fn router(w: &WorkloadArgs) -> Result<RouterOptions, ConfigError> {
    use ldb_runner::replay::router::{DEFAULT_TEMPLATE, check_header_name, header_value};
    if w.session_header.is_none() && w.session_header_value.is_some() {
        return Err(bad(
            "--session-header-value",
            "only applies with --session-header NAME",
        ));
    }
    let session_header = match &w.session_header {
        Some(n) => {
            check_header_name(n).map_err(|e| bad("--session-header", e))?;
            let t = w
                .session_header_value
                .clone()
                .unwrap_or(DEFAULT_TEMPLATE.into());
            header_value(&t, 0, 0).map_err(|e| bad("--session-header-value", e))?;
            Some((n.clone(), t))
        }
        None => None,
    };
    if let Some(n) = &w.replica_header {
        check_header_name(n).map_err(|e| bad("--replica-header", e))?;
    }
    Ok(RouterOptions {
        session_header,
        replica_header: w.replica_header.clone(),
    })
}

fn trace(
    w: &WorkloadArgs,
    path: &std::path::Path,
    api: ldb_core::api::Api,
) -> Result<ReplayConfig, ConfigError> {
    let format = match w.trace_format.as_deref() {
        Some(f) => Some(TraceFormat::parse(f).ok_or_else(|| {
            bad(
                "--trace-format",
                format!("{f:?} (use mooncake, burstgpt or jsonl)"),
            )
        })?),
        None => None,
    };
    let options = trace_options(w)?;
    let scan = scan(path, format, &options).map_err(ConfigError)?;
    if w.trace_sessions
        && let Some(f) = scan.format.filter(|f| *f != TraceFormat::Jsonl)
    {
        return Err(bad(
            "--trace-sessions",
            format!(
                "{} traces carry no session id (only this tool's JSONL has session_id)",
                f.name()
            ),
        ));
    }
    if scan.chat_only_rows > 0 && api != ldb_core::api::Api::Chat {
        return Err(bad(
            "--trace",
            format!(
                "{}: {} rows offer tools or carry tool calls or reasoning, which are sent with --api chat only (not --api {})",
                path.display(),
                scan.chat_only_rows,
                api.name()
            ),
        ));
    }
    Ok(ReplayConfig::Trace(TraceConfig {
        path: path.to_path_buf(),
        scan,
        options,
        tokenize_checks: w.trace_tokenize_checks.unwrap_or(TOKENIZE_CHECKS),
        corpus: corpus(w)?,
        sessions: w.trace_sessions,
        router: router(w)?,
    }))
}

fn sessions(
    w: &WorkloadArgs,
    n: u64,
    tool_loop: Option<(ThinkTime, u64)>,
) -> Result<ReplayConfig, ConfigError> {
    if n == 0 {
        return Err(bad("--sessions", "must be at least 1"));
    }
    let turns = w.turns.unwrap_or(4);
    if turns == 0 {
        return Err(bad("--turns", "must be at least 1"));
    }
    let user_tokens = w.user_tokens.unwrap_or(256);
    if user_tokens == 0 {
        return Err(bad("--user-tokens", "must be at least 1"));
    }
    let think_time = match w.think_time.as_deref() {
        Some(t) => ThinkTime::parse(t).map_err(ConfigError)?,
        None => ThinkTime::Fixed(0.0),
    };
    Ok(ReplayConfig::Sessions(SessionConfig {
        sessions: n,
        turns,
        user_tokens,
        think_time,
        corpus: corpus(w)?,
        router: router(w)?,
        tool_loop: tool_loop.map(|(latency, result_tokens)| ToolLoop {
            latency,
            result_tokens,
        }),
    }))
}

/// `--prompt-corpus`, read and cut (a bad corpus: one line, exit 2).
fn corpus(w: &WorkloadArgs) -> Result<Option<ldb_runner::replay::PromptCorpus>, ConfigError> {
    w.prompt_corpus
        .as_deref()
        .map(ldb_runner::replay::load_corpus)
        .transpose()
        .map_err(ConfigError)
}

/// The replay the flags ask for, if any (the configuration built around
/// it then runs no matrix: `config::build` sizes nothing).
pub(crate) fn replay(a: &BenchArgs) -> Result<Option<ReplayConfig>, ConfigError> {
    let w = &a.workload;
    if w.trace.is_none()
        && let Some(flag) = trace_flags_without_trace(w)
    {
        return Err(bad(
            flag,
            "only applies to a trace replay: add --trace FILE",
        ));
    }
    if w.sessions.is_none()
        && let Some(flag) = session_flags_without_sessions(w)
    {
        return Err(bad(flag, "only applies to sessions: add --sessions N"));
    }
    if w.sessions.is_none()
        && !w.trace_sessions
        && let Some(flag) = [
            (w.session_header.is_some(), "--session-header"),
            (w.replica_header.is_some(), "--replica-header"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    {
        return Err(bad(flag, "only applies to --sessions or --trace-sessions"));
    }
    if let Some(v) = w.replay_limit
        && !(v.is_finite() && v > 0.0)
    {
        return Err(bad(
            "--replay-limit",
            "must be a positive number of seconds",
        ));
    }
    let tool_loop = crate::cli_tools::tool_loop(&a.tools, w.sessions.is_some())?;
    if w.trace.is_some() && a.tools.tools.is_some() {
        return Err(bad(
            "--tools",
            "applies to synthetic runs (matrix, burst, open loop, sessions), not --trace",
        ));
    }
    let replay = match (&w.trace, w.sessions) {
        (Some(_), Some(_)) => {
            return Err(bad("--sessions", "cannot be combined with --trace"));
        }
        (Some(path), None) => trace(w, path, a.api)?,
        (None, Some(n)) => sessions(w, n, tool_loop)?,
        (None, None) if w.replay_limit.is_some() => {
            return Err(bad(
                "--replay-limit",
                "only applies to --trace or --sessions",
            ));
        }
        (None, None) if w.prompt_corpus.is_some() => {
            return Err(bad(
                "--prompt-corpus",
                "only applies to --trace or --sessions (the matrix's prompts are not built from it yet)",
            ));
        }
        (None, None) => return Ok(None),
    };
    for (given, flag) in [
        (a.request_rate.is_some(), "--request-rate"),
        (a.run_burst, "--run-burst"),
        (a.prefill_only, "--prefill-only"),
        (a.resume, "--resume"),
    ] {
        if given {
            return Err(bad(flag, "cannot be combined with --trace or --sessions"));
        }
    }
    if a.max_in_flight == Some(0) {
        return Err(bad(
            "--max-in-flight",
            "must be at least 1 (leave it out for no cap)",
        ));
    }
    Ok(Some(replay))
}
