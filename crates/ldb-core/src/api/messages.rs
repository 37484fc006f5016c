//! The Anthropic Messages API's streamed events (`POST /v1/messages`).
//!
//! `message_start` carries the prompt's usage (`input_tokens` plus the
//! cache's `cache_read_input_tokens` and `cache_creation_input_tokens`: the
//! three together are the prompt); `content_block_delta` carries text
//! (`text_delta`: content) or thinking (`thinking_delta`: reasoning);
//! `message_delta` the output usage and the stop reason; `message_stop`
//! ends the stream (there is no `[DONE]`).

use std::borrow::Cow;

use serde::Deserialize;

use super::ApiEvent;
use super::responses::from;
use crate::chunk::{Channel, ChunkError, ChunkInfo, error_message};

#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Start {
    message: StartMessage,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<f64>,
    #[serde(default)]
    output_tokens: Option<f64>,
    #[serde(default)]
    cache_read_input_tokens: Option<f64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MessageDelta {
    delta: StopDelta,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StopDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Read one payload.
pub(super) fn parse(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let kind: Kind<'_> = from(payload, "an event with a \"type\"")?;
    match kind.kind.as_ref() {
        "message_start" => start(payload),
        "content_block_delta" => block_delta(payload),
        "message_delta" => message_delta(payload),
        "message_stop" => Ok(ApiEvent {
            end: true,
            ..ApiEvent::default()
        }),
        "content_block_start" | "content_block_stop" | "ping" => Ok(ApiEvent::default()),
        "error" => {
            let v: serde_json::Value = from(payload, "an error event")?;
            Ok(ApiEvent::chunk(ChunkInfo {
                error: Some(error_message(&v)),
                ..ChunkInfo::default()
            }))
        }
        _ => Ok(ApiEvent {
            unknown: true,
            ..ApiEvent::default()
        }),
    }
}

fn start(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let s: Start = from(payload, "message_start with a \"message\" object")?;
    let mut chunk = ChunkInfo {
        id: s.message.id.map(Cow::Owned),
        ..ChunkInfo::default()
    };
    if let Some(u) = &s.message.usage {
        prompt_usage(u, &mut chunk);
    }
    Ok(ApiEvent::chunk(chunk))
}

fn block_delta(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let d: BlockDelta<'_> = from(payload, "content_block_delta with a \"delta\" object")?;
    let d = d.delta;
    let (text, channel, tool) = match d.kind.as_ref() {
        "text_delta" => (need(d.text, "text_delta")?, Channel::Content, false),
        "thinking_delta" => (
            need(d.thinking, "thinking_delta")?,
            Channel::Reasoning,
            false,
        ),
        // Streamed tool input is answer tokens, as chat's `tool_calls`.
        "input_json_delta" => (
            need(d.partial_json, "input_json_delta")?,
            Channel::Content,
            true,
        ),
        // The thinking block's signature, and future delta kinds: no tokens.
        "signature_delta" => return Ok(ApiEvent::default()),
        _ => {
            return Ok(ApiEvent {
                unknown: true,
                ..ApiEvent::default()
            });
        }
    };
    let tokens = !text.is_empty();
    Ok(ApiEvent::chunk(ChunkInfo {
        has_tokens: tokens,
        channel: if tokens { channel } else { Channel::None },
        text: Some(text).filter(|t| !t.is_empty() && !tool),
        has_choices: true,
        ..ChunkInfo::default()
    }))
}

fn need<'a>(field: Option<Cow<'a, str>>, kind: &str) -> Result<Cow<'a, str>, ChunkError> {
    field.ok_or_else(|| ChunkError(format!("{kind} without its text")))
}

fn message_delta(payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
    let m: MessageDelta = from(payload, "message_delta with a \"delta\" object")?;
    let mut chunk = ChunkInfo {
        finish_reason: m.delta.stop_reason.map(|r| Cow::Owned(chat_finish(r))),
        ..ChunkInfo::default()
    };
    if let Some(u) = m.usage {
        prompt_usage(&u, &mut chunk);
        match super::count(u.output_tokens) {
            Ok(c) => chunk.completion_tokens = c,
            Err(()) => chunk.usage_invalid = true,
        }
    }
    Ok(ApiEvent::chunk(chunk))
}

/// The prompt's usage, wherever it comes (vLLM repeats it in
/// `message_delta` with the cache's share): the prompt is
/// `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`,
/// the cached part `cache_read_input_tokens`.
fn prompt_usage(u: &Usage, chunk: &mut ChunkInfo<'_>) {
    let c = |v| super::count(v).ok().flatten();
    let read = c(u.cache_read_input_tokens);
    let parts = [c(u.input_tokens), read, c(u.cache_creation_input_tokens)];
    if parts.iter().any(Option::is_some) {
        chunk.prompt_tokens = Some(parts.iter().flatten().sum());
    }
    chunk.cached_tokens = read;
}

/// A Messages `stop_reason` in the chat API's words, so that a finish
/// reason means one thing whatever the API (early stops count `stop`,
/// completion stats' limit hits `length`); a reason chat has no word for
/// is kept as the server wrote it.
fn chat_finish(reason: String) -> String {
    match reason.as_str() {
        "end_turn" | "stop_sequence" => "stop".into(),
        "max_tokens" => "length".into(),
        "tool_use" => "tool_calls".into(),
        _ => reason,
    }
}
