//! The OpenAI Responses API's streamed events (`POST /v1/responses`).
//!
//! Text arrives in `response.output_text.delta` (the content channel) and
//! `response.reasoning_text.delta` (reasoning); usage arrives once, in the
//! final `response.completed` (or `response.incomplete`), which also ends
//! the stream: there is no `[DONE]`.

use std::borrow::Cow;

use serde::Deserialize;

use super::ApiEvent;
use crate::chunk::{Channel, ChunkError, ChunkInfo, error_message};

#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    delta: Cow<'a, str>,
    #[serde(borrow, default)]
    item_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Final {
    response: Response,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<f64>,
    #[serde(default)]
    output_tokens: Option<f64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

/// Events that carry nothing the measurement reads (the stream's framing).
const FRAMING: &[&str] = &[
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.done",
    "response.reasoning_text.done",
    "response.reasoning_part.added",
    "response.reasoning_part.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.done",
    "response.function_call_arguments.done",
];

/// Read one payload.
pub(super) fn parse(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let kind: Kind<'_> = from(payload, "an event with a \"type\"")?;
    let channel = match kind.kind.as_ref() {
        "response.output_text.delta" => Channel::Content,
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            Channel::Reasoning
        }
        // Streamed tool-call arguments are answer tokens, as chat's `tool_calls`.
        "response.function_call_arguments.delta" => Channel::Content,
        "response.completed" | "response.incomplete" | "response.failed" => {
            return finished(payload);
        }
        "error" => {
            let v: serde_json::Value = from(payload, "an error event")?;
            let chunk = ChunkInfo {
                error: Some(error_message(&v)),
                ..ChunkInfo::default()
            };
            return Ok(ApiEvent::chunk(chunk));
        }
        k if FRAMING.contains(&k) => return Ok(ApiEvent::default()),
        _ => {
            return Ok(ApiEvent {
                unknown: true,
                ..ApiEvent::default()
            });
        }
    };
    let d: Delta<'_> = from(payload, &format!("{} with a string \"delta\"", kind.kind))?;
    let text = Some(d.delta).filter(|t| !t.is_empty());
    let tokens = text.is_some() || kind.kind.starts_with("response.function_call");
    let chunk = ChunkInfo {
        id: d.item_id,
        has_tokens: tokens,
        channel: if tokens { channel } else { Channel::None },
        text: text.filter(|_| !kind.kind.starts_with("response.function_call")),
        has_choices: true,
        ..ChunkInfo::default()
    };
    Ok(ApiEvent::chunk(chunk))
}

/// `response.completed` / `.incomplete` / `.failed`: usage, why it stopped,
/// and the end of the stream.
fn finished(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let f: Final = from(payload, "a final event with a \"response\" object")?;
    let r = f.response;
    let mut chunk = ChunkInfo {
        id: r.id.map(Cow::Owned),
        ..ChunkInfo::default()
    };
    if let Some(e) = r.error.filter(|e| !e.is_null()) {
        chunk.error = Some(error_message(&e));
    } else if r.status.as_deref() == Some("failed") {
        chunk.error = Some("response failed".into());
    }
    if let Some(u) = r.usage {
        match super::count(u.output_tokens) {
            Ok(c) => chunk.completion_tokens = c,
            Err(()) => chunk.usage_invalid = true,
        }
        chunk.prompt_tokens = super::count(u.input_tokens).ok().flatten();
        chunk.cached_tokens = super::count(u.input_tokens_details.and_then(|d| d.cached_tokens))
            .ok()
            .flatten();
        chunk.reasoning_tokens =
            super::count(u.output_tokens_details.and_then(|d| d.reasoning_tokens))
                .ok()
                .flatten();
    }
    chunk.finish_reason =
        chat_finish(r.incomplete_details.and_then(|i| i.reason), r.status).map(Cow::Owned);
    Ok(ApiEvent {
        chunk,
        end: true,
        unknown: false,
    })
}

/// Deserialize `payload`, or say which event shape it failed to be.
pub(super) fn from<'a, T: Deserialize<'a>>(payload: &'a [u8], what: &str) -> Result<T, ChunkError> {
    serde_json::from_slice(payload).map_err(|e| ChunkError(format!("expected {what}: {e}")))
}

/// Why a response ended, in the chat API's words: an incomplete response's
/// reason (`max_output_tokens` is chat's `length`), else none. `completed`
/// does not say whether the model stopped or reached the limit (llama.cpp
/// reports `completed` at the limit; recorded in the fixtures), so it is no
/// finish reason: early stops are not counted on this API.
fn chat_finish(incomplete: Option<String>, status: Option<String>) -> Option<String> {
    match (incomplete, status.as_deref()) {
        (Some(r), _) if r == "max_output_tokens" => Some("length".into()),
        (Some(r), _) => Some(r),
        (None, Some("completed")) | (None, None) => None,
        (None, Some(s)) => Some(s.to_owned()),
    }
}
