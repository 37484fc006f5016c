//! Parsing and validating generation requests (chat and completions) per personality.

use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::errors::ApiError;
use crate::personality::Personality;
use crate::tokenizer::{self, ChatMessage};

/// Chat or completions endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Chat,
    Completion,
}

#[derive(Debug, Deserialize)]
struct StreamOptionsIn {
    include_usage: Option<bool>,
    continuous_usage_stats: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct MessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    /// An assistant message's calls (a later turn repeating them).
    #[serde(default)]
    pub tool_calls: Option<Value>,
}

/// The body fields the simulator reads; everything else is accepted and ignored.
#[derive(Debug, Deserialize)]
struct GenBody {
    model: Option<String>,
    messages: Option<Vec<MessageIn>>,
    prompt: Option<Value>,
    stream: Option<bool>,
    stream_options: Option<StreamOptionsIn>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    n_predict: Option<i64>,
    ignore_eos: Option<bool>,
    rid: Option<String>,
    request_id: Option<String>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
}

/// A request ready for the engine.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub kind: Kind,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
    pub prompt_tokens: Vec<u32>,
    pub max_new: u32,
    pub stop_at: Option<u32>,
    pub model: String,
    pub id: String,
    pub rid: Option<String>,
    /// The scripted answer (`output.answers`), chosen after the checks.
    pub script: Option<super::script::Script>,
    /// The tool call the reply is (`tool_call.rs`), if any.
    pub tool_call: Option<super::tool_call::ToolCall>,
}

/// Text of a message `content`: a string, or the text parts of an array.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Token ids of a chat message list.
pub(crate) fn chat_tokens(state: &AppState, messages: &[MessageIn]) -> Vec<u32> {
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            let mut t = content_text(&m.content);
            if let Some(calls) = &m.tool_calls {
                t.push_str(&super::tool_call::rendered(calls));
            }
            t
        })
        .collect();
    let msgs: Vec<ChatMessage<'_>> = messages
        .iter()
        .zip(&texts)
        .map(|(m, t)| ChatMessage {
            role: &m.role,
            content: t,
        })
        .collect();
    tokenizer::encode_chat(&state.cfg.tokenizer, &msgs)
}

/// Token ids of a completion prompt: a string, a list of token ids, or a list of strings
/// (the first is used).
pub(crate) fn prompt_tokens(state: &AppState, prompt: &Value) -> Result<Vec<u32>, ApiError> {
    let cfg = &state.cfg.tokenizer;
    match prompt {
        Value::String(s) => Ok(tokenizer::encode_prompt(cfg, s)),
        Value::Array(items) if items.iter().all(Value::is_u64) && !items.is_empty() => Ok(items
            .iter()
            .filter_map(Value::as_u64)
            .map(|t| t as u32)
            .collect()),
        Value::Array(items) => match items.first().and_then(Value::as_str) {
            Some(s) => Ok(tokenizer::encode_prompt(cfg, s)),
            None => Err(ApiError::bad(
                "prompt must be a string or a list",
                Some("prompt"),
            )),
        },
        _ => Err(ApiError::bad(
            "prompt must be a string or a list",
            Some("prompt"),
        )),
    }
}

fn usage_flags(
    p: Personality,
    stream: bool,
    so: Option<&StreamOptionsIn>,
) -> Result<(bool, bool), ApiError> {
    let Some(so) = so else {
        return Ok((false, false));
    };
    match p {
        Personality::Vllm | Personality::OpenAi => {
            if !stream {
                return Err(ApiError::bad(
                    "Stream options can only be defined when `stream=True`.",
                    Some("stream_options"),
                ));
            }
            let include = so.include_usage.unwrap_or(true);
            Ok((
                include,
                include && so.continuous_usage_stats.unwrap_or(false),
            ))
        }
        Personality::Sglang => Ok((
            so.include_usage.unwrap_or(false),
            so.continuous_usage_stats.unwrap_or(false),
        )),
        Personality::LlamaCpp => Ok((so.include_usage.unwrap_or(false), false)),
    }
}

/// Output token budget after the personality's context checks.
fn output_budget(
    state: &AppState,
    kind: Kind,
    requested: Option<i64>,
    prompt: u32,
) -> Result<u32, ApiError> {
    let p = state.personality;
    let limit = state.cfg.max_model_len;
    let room = limit.saturating_sub(prompt);
    let default = match kind {
        Kind::Chat => room,
        Kind::Completion if p == Personality::LlamaCpp => room,
        Kind::Completion => 16,
    };
    let m = match requested {
        Some(m) if m >= 1 => u32::try_from(m).unwrap_or(u32::MAX),
        Some(_) if p == Personality::LlamaCpp => room,
        Some(m) => {
            return Err(ApiError::bad(
                format!("max_tokens must be at least 1, got {m}."),
                Some("max_tokens"),
            ));
        }
        None => default,
    };
    let context = ApiError::Context {
        prompt,
        max_tokens: m.max(1),
        limit,
    };
    if prompt >= limit {
        return Err(context);
    }
    match p {
        Personality::LlamaCpp => Ok(m.min(room)),
        _ if u64::from(prompt) + u64::from(m) > u64::from(limit) => Err(context),
        _ => Ok(m),
    }
}

/// The tool call a chat request's reply is, if any (`tool_call.rs`).
fn call_of(
    kind: Kind,
    b: &GenBody,
    max_new: u32,
) -> Result<Option<super::tool_call::ToolCall>, ApiError> {
    match (kind, b.messages.as_deref()) {
        (Kind::Chat, Some(m)) => {
            super::tool_call::decide(b.tools.as_ref(), b.tool_choice.as_ref(), m, max_new)
        }
        _ => Ok(None),
    }
}

/// Where the model stops before `max_tokens`: a tool call's end (whatever
/// `ignore_eos` says), else the scenario's natural length unless the
/// request ignores end-of-sequence and the server honours that.
fn stop_at(
    state: &AppState,
    b: &GenBody,
    call: Option<&super::tool_call::ToolCall>,
) -> Option<u32> {
    let natural = state.cfg.output.natural_length;
    let ignore_eos = b.ignore_eos.unwrap_or(false) && state.cfg.server.honor_ignore_eos;
    call.map(|c| c.tokens)
        .or((!ignore_eos && natural > 0).then_some(natural))
}

/// Parse, tokenize and validate a generation request.
pub(crate) fn prepare(
    state: &AppState,
    kind: Kind,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Prepared, ApiError> {
    let p = state.personality;
    let b: GenBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("invalid request body: {e}"), None))?;
    if matches!(p, Personality::Vllm | Personality::OpenAi)
        && let Some(m) = b.model.as_deref().filter(|m| *m != state.cfg.model)
    {
        return Err(ApiError::ModelNotFound(m.to_string()));
    }
    let stream = b.stream.unwrap_or(false);
    let (include_usage, continuous_usage) = usage_flags(p, stream, b.stream_options.as_ref())?;
    let prompt_tokens = match kind {
        Kind::Chat => match b.messages.as_deref() {
            Some(m) if !m.is_empty() => chat_tokens(state, m),
            _ => {
                return Err(ApiError::bad(
                    "messages must be a non-empty list",
                    Some("messages"),
                ));
            }
        },
        Kind::Completion => match &b.prompt {
            Some(v) => prompt_tokens(state, v)?,
            None => return Err(ApiError::bad("prompt is required", Some("prompt"))),
        },
    };
    let prompt_len = prompt_tokens.len() as u32;
    if prompt_len == 0 {
        return Err(ApiError::bad("The prompt is empty.", Some("prompt")));
    }
    let requested = match kind {
        Kind::Chat => b.max_completion_tokens.or(b.max_tokens),
        Kind::Completion => b.max_tokens,
    };
    let requested = if p == Personality::LlamaCpp {
        requested.or(b.n_predict)
    } else {
        requested
    };
    let max_new = output_budget(state, kind, requested, prompt_len)?;
    if u64::from(prompt_len) + 1 > state.cfg.kv.capacity_tokens() {
        return Err(ApiError::Context {
            prompt: prompt_len,
            max_tokens: max_new,
            limit: state.cfg.kv.capacity_tokens().min(u64::from(u32::MAX)) as u32,
        });
    }
    let tool_call = call_of(kind, &b, max_new)?;
    let stop_at = stop_at(state, &b, tool_call.as_ref());
    let (_, fresh) = state.new_id();
    let prefix = if kind == Kind::Chat {
        "chatcmpl-"
    } else {
        "cmpl-"
    };
    let header_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (id, rid) = match p {
        Personality::Sglang => {
            let rid = b.rid.clone().unwrap_or(fresh);
            (rid.clone(), Some(rid))
        }
        Personality::Vllm | Personality::OpenAi => {
            let base = header_id.or(b.request_id.clone()).unwrap_or(fresh);
            (format!("{prefix}{base}"), None)
        }
        Personality::LlamaCpp => (format!("{prefix}{fresh}"), None),
    };
    let model = match p {
        Personality::Sglang => b.model.unwrap_or_else(|| "default".to_string()),
        Personality::LlamaCpp => b.model.unwrap_or_else(|| state.cfg.model.clone()),
        _ => state.cfg.model.clone(),
    };
    Ok(Prepared {
        kind,
        stream,
        include_usage,
        continuous_usage,
        prompt_tokens,
        max_new,
        stop_at,
        model,
        id,
        rid,
        script: None,
        tool_call,
    })
}
