//! One streamed chat request whose text the caller sees as it arrives.
//!
//! The measured streams of the matrix (`stream.rs`) count tokens against a
//! window and keep only a tail of the text. The coding-peak probe and the
//! CJK watchdog need the whole text split by channel, a callback per chunk
//! (to echo it, or to stop at the first Han ideograph) and three times:
//! send, first token and end of stream. Same HTTP client, same SSE and chunk
//! parsers; only the bookkeeping differs.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ldb_core::chunk::{Channel, is_done, parse_chunk};
use ldb_core::sse::SseDecoder;

use crate::error::{ClientError, transport_detail};
use crate::http::Http;

/// One chunk's text, as the callback sees it.
#[derive(Debug, Clone, Copy)]
pub struct TextEvent<'a> {
    /// Seconds since the request was sent.
    pub t: f64,
    /// Thinking text of the chunk (may be empty).
    pub reasoning: &'a str,
    /// Answer text of the chunk (may be empty).
    pub content: &'a str,
    /// Cumulative `usage.completion_tokens` so far, when the server sends it.
    pub completion_tokens: Option<u64>,
}

/// What the callback wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// Close the stream now (the connection is dropped; the server frees the request).
    Stop,
}

/// How the request ended. Times are seconds since it was sent.
#[derive(Debug, Clone, Default)]
pub struct TextOutcome {
    /// The first chunk carrying text or a tool call.
    pub first_token: Option<f64>,
    /// The last event read (`[DONE]`, the last chunk, or the chunk the caller stopped at).
    pub end: f64,
    /// `usage.completion_tokens` of the last chunk that carried usage.
    pub completion_tokens: Option<u64>,
    /// The last `finish_reason` seen.
    pub finish_reason: Option<String>,
    /// All thinking text.
    pub reasoning: String,
    /// All answer text.
    pub content: String,
    /// The callback stopped the stream.
    pub stopped: bool,
    /// Why the request failed (HTTP status, transport, mid-stream error,
    /// body cut before its end); `None` when it completed or was stopped.
    pub error: Option<String>,
}

/// Send `body` (a chat request with `stream: true`) to `path` and read the
/// answer to its end, calling `on_text` for every chunk with text. With
/// `first_token_limit`, a request with no token after that long fails.
pub async fn stream_text(
    http: &Http,
    path: &str,
    body: Bytes,
    first_token_limit: Option<Duration>,
    mut on_text: impl FnMut(&TextEvent<'_>) -> Flow,
) -> TextOutcome {
    let sent = Instant::now();
    let since = move || sent.elapsed().as_secs_f64();
    let mut out = TextOutcome::default();
    let url = http.url(path);
    let deadline = first_token_limit.map(|d| tokio::time::Instant::now() + d);
    let send = http
        .request(reqwest::Method::POST, path)
        .header("content-type", "application/json")
        .body(body)
        .send();
    let resp = tokio::select! {
        r = send => r,
        () = sleep_until_opt(deadline) => {
            out.error = Some(no_token(first_token_limit));
            out.end = since();
            return out;
        }
    };
    let mut resp = match resp {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(ClientError::from_reqwest(&url, &e).to_string());
            out.end = since();
            return out;
        }
    };
    let status = resp.status().as_u16();
    if status != 200 {
        let text = tokio::time::timeout(Duration::from_secs(10), resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        out.error = Some(ClientError::from_status(&url, status, &text).to_string());
        out.end = since();
        return out;
    }
    let mut dec = SseDecoder::new();
    let mut done = false;
    loop {
        let waiting = if out.first_token.is_none() {
            deadline
        } else {
            None
        };
        let next = tokio::select! {
            c = resp.chunk() => c,
            () = sleep_until_opt(waiting) => {
                out.error = Some(no_token(first_token_limit));
                break;
            }
        };
        let bytes = match next {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                out.error = Some(format!(
                    "stream broken after the answer began ({url}): {}",
                    transport_detail(&e)
                ));
                break;
            }
        };
        let t = since();
        dec.feed(&bytes, |payload| {
            if !done && out.error.is_none() && !out.stopped {
                on_payload(&mut out, &mut done, t, payload, &mut on_text);
            }
        });
        if dec.overflowed() {
            out.error = Some("an SSE line too long to be an event stream".to_string());
        }
        if done || out.stopped || out.error.is_some() {
            break;
        }
    }
    if !done && !out.stopped && out.error.is_none() {
        let t = since();
        dec.finish(|p| on_payload(&mut out, &mut done, t, p, &mut on_text));
        // A body that ends cleanly after a finish reason is a dialect without
        // `[DONE]`; without either, the connection was cut.
        if !done && out.finish_reason.is_none() && out.error.is_none() && !out.stopped {
            out.error = Some("stream ended without [DONE]".to_string());
        }
    }
    if out.end == 0.0 {
        out.end = since();
    }
    out
}

fn on_payload(
    out: &mut TextOutcome,
    done: &mut bool,
    t: f64,
    payload: &[u8],
    on_text: &mut impl FnMut(&TextEvent<'_>) -> Flow,
) {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    out.end = t;
    if is_done(payload) {
        *done = true;
        return;
    }
    let chunk = match parse_chunk(payload) {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(e.to_string());
            return;
        }
    };
    if let Some(err) = chunk.error {
        out.error = Some(format!("server error mid-stream: {err}"));
        return;
    }
    if let Some(n) = chunk.completion_tokens {
        out.completion_tokens = Some(n);
    }
    if let Some(f) = &chunk.finish_reason {
        out.finish_reason = Some(f.to_string());
    }
    if chunk.has_tokens && out.first_token.is_none() {
        out.first_token = Some(t);
    }
    let text = chunk.text.as_deref().unwrap_or("");
    if text.is_empty() {
        return;
    }
    // A delta with both fields has its thinking first; which of the text is
    // which is not kept, so it counts as answer.
    let (reasoning, content) = match chunk.channel {
        Channel::Reasoning => (text, ""),
        _ => ("", text),
    };
    out.reasoning.push_str(reasoning);
    out.content.push_str(content);
    let ev = TextEvent {
        t,
        reasoning,
        content,
        completion_tokens: out.completion_tokens,
    };
    if on_text(&ev) == Flow::Stop {
        out.stopped = true;
    }
}

fn no_token(limit: Option<Duration>) -> String {
    format!(
        "no token within {:.0} s of sending the request",
        limit.unwrap_or_default().as_secs_f64()
    )
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
