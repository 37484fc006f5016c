//! The tool-call flags: tool definitions sent with synthetic requests
//! (`--tools`, `--tool-choice`) and the sessions' tool loop
//! (`--tool-latency`, `--tool-result-tokens`); checked here into the run
//! configuration (docs/workloads.md, "Tool calls").

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use ldb_core::replay::session::ThinkTime;
use ldb_core::tools::{ToolChoice, ToolSet};

use crate::config::{ConfigError, bad};

/// Tool-call flags.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Tool calls (docs/workloads.md)")]
pub struct ToolArgs {
    /// Send these tool definitions with every decode and session request: a JSON array of OpenAI ({"type":"function","function":{…}}) or Anthropic ({"name","input_schema"}) tools.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// With --tools: auto (default), required, none, or a function name to force.
    #[arg(long, value_name = "auto|required|none|NAME")]
    pub tool_choice: Option<String>,
    /// Sessions: the tool's run time between a reply that called a tool and the turn with its result: SECONDS or exp:MEAN (default 0).
    #[arg(long, value_name = "S|exp:MEAN")]
    pub tool_latency: Option<String>,
    /// Sessions: tokens of the synthetic tool result sent after a tool call (default 64).
    #[arg(long, value_name = "K")]
    pub tool_result_tokens: Option<u64>,
}

/// Default `--tool-result-tokens`.
const RESULT_TOKENS: u64 = 64;

/// `--tools` read and checked with `--tool-choice`: a bad file is one line
/// naming the file and the problem (exit 2). Tool definitions are sent in
/// the chat API's shape only: another `--api` is refused with them.
pub(crate) fn tool_set(
    a: &ToolArgs,
    api: ldb_core::api::Api,
) -> Result<Option<Arc<ToolSet>>, ConfigError> {
    if a.tools.is_some() && api != ldb_core::api::Api::Chat {
        return Err(bad(
            "--tools",
            format!("is sent with --api chat only (not --api {})", api.name()),
        ));
    }
    let Some(path) = &a.tools else {
        if a.tool_choice.is_some() {
            return Err(bad("--tool-choice", "needs --tools FILE"));
        }
        return Ok(None);
    };
    let choice = match a.tool_choice.as_deref() {
        Some(c) => ToolChoice::parse(c).map_err(|e| bad("--tool-choice", e))?,
        None => ToolChoice::Auto,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad("--tools", format!("{}: {e}", path.display())))?;
    ToolSet::parse(&text, choice)
        .map(|t| Some(Arc::new(t)))
        .map_err(|e| bad("--tools", format!("{} {e}", path.display())))
}

/// The tool loop of `--sessions`: the tool's run time and the result's
/// size; `None` without `--tools`. Either flag without `--tools` is a
/// mistake, as is either without `--sessions`.
pub(crate) fn tool_loop(
    a: &ToolArgs,
    sessions: bool,
) -> Result<Option<(ThinkTime, u64)>, ConfigError> {
    let given = [
        (a.tool_latency.is_some(), "--tool-latency"),
        (a.tool_result_tokens.is_some(), "--tool-result-tokens"),
    ]
    .into_iter()
    .find_map(|(g, f)| g.then_some(f));
    if let Some(flag) = given {
        if a.tools.is_none() {
            return Err(bad(flag, "needs --tools FILE"));
        }
        if !sessions {
            return Err(bad(flag, "needs --sessions"));
        }
    }
    if a.tools.is_none() || !sessions {
        return Ok(None);
    }
    let latency = match a.tool_latency.as_deref() {
        Some(t) => ThinkTime::parse(t).map_err(|_| {
            bad(
                "--tool-latency",
                format!("{t:?}: expected SECONDS or exp:MEAN (≥ 0)"),
            )
        })?,
        None => ThinkTime::Fixed(0.0),
    };
    let tokens = a.tool_result_tokens.unwrap_or(RESULT_TOKENS);
    if tokens == 0 {
        return Err(bad("--tool-result-tokens", "must be at least 1"));
    }
    Ok(Some((latency, tokens)))
}
