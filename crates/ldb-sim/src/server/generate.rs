//! `POST /v1/chat/completions` and `POST /v1/completions`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::AppState;
use super::errors::ApiError;
use super::frames::{Frames, text_of};
use super::request::{Kind, Prepared, prepare};
use super::script::Script;
use super::stream::{CancelGuard, StreamFaults, StreamState, collect, next_piece};
use crate::engine::{Command, FinishReason, NewRequest, lock};
use crate::personality::Personality;
use crate::tokenizer::block_hashes;

/// Chat completions.
pub(crate) async fn chat(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(st, Kind::Chat, "POST /v1/chat/completions", headers, body).await
}

/// A streamed chat answer for another API's route (`api_frames`), counted
/// under that route.
pub(crate) async fn chat_stream_for(
    st: Arc<AppState>,
    route: &'static str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(st, Kind::Chat, route, headers, body).await
}

/// Text completions.
pub(crate) async fn completions(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(st, Kind::Completion, "POST /v1/completions", headers, body).await
}

async fn generate(
    st: Arc<AppState>,
    kind: Kind,
    route: &'static str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = st.personality;
    st.count(route);
    let f = &st.cfg.faults;
    let ordinal = st.generation_requests.fetch_add(1, Ordering::Relaxed) + 1;
    let chosen = f.error_requests.contains(&ordinal);
    if chosen || (f.error_share > 0.0 && st.draw() < f.error_share) {
        lock(&st.http).injected_errors += 1;
        if f.error_html {
            return html_error(f.error_status);
        }
        return ApiError::Injected(f.error_status).into_response_for(p);
    }
    let req = match prepare(&st, kind, &headers, &body) {
        Ok(mut r) => {
            // a scripted answer is the model's, whatever the route (the
            // completions route has no reasoning parser: its text holds both)
            if r.tool_call.is_none() {
                r.script = Script::next(&st);
                if let Some(s) = &r.script {
                    // the scripted length is where the model stops
                    r.stop_at = Some(s.total);
                }
            }
            r
        }
        Err(e) => {
            lock(&st.http).rejected += 1;
            return e.into_response_for(p);
        }
    };
    {
        let mut http = lock(&st.http);
        if req.stream {
            http.streaming += 1;
        } else {
            http.non_streaming += 1;
        }
        if http.arrivals.len() < super::MAX_ARRIVALS {
            http.arrivals.push(st.started.elapsed().as_secs_f64());
        }
    }
    let keepalive_chosen = f.keepalive_requests.contains(&ordinal);
    if req.stream
        && (keepalive_chosen
            || (f.keepalive_only_share > 0.0 && st.draw() < f.keepalive_only_share))
    {
        lock(&st.http).injected_keepalive_only += 1;
        return keepalive_only(Duration::from_secs_f64(f.keepalive_interval_s));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let (num, _) = st.new_id();
    let start = Instant::now();
    let new = NewRequest {
        id: num,
        rid: req.rid.clone(),
        prompt_len: req.prompt_tokens.len() as u32,
        block_hashes: block_hashes(&req.prompt_tokens, st.cfg.kv.logical_block_tokens()),
        reply_prompt: plain_reply(&st, &req).then(|| req.prompt_tokens.clone()),
        max_new: req.max_new,
        stop_at: req.stop_at,
        arrival: start,
        tx,
    };
    if st.engine.tx.send(Command::Submit(new)).is_err() {
        return ApiError::Injected(503).into_response_for(p);
    }
    let guard = CancelGuard {
        id: num,
        engine: st.engine.tx.clone(),
        armed: true,
    };
    if req.stream {
        stream_response(&st, req, rx, guard, start)
    } else {
        full_response(&st, req, rx, guard).await
    }
}

/// Whether the reply is the plain generated text a next turn repeats
/// token for token (a chat request; no script, reasoning, textless or Han
/// tokens), so the engine can cache its blocks for that turn.
fn plain_reply(st: &AppState, req: &Prepared) -> bool {
    let o = &st.cfg.output;
    st.cfg.kv.prefix_caching
        && req.kind == Kind::Chat
        && req.script.is_none()
        && o.reasoning_tokens == 0
        && o.textless_token_every == 0
        && o.han_at_token == 0
}

fn stream_response(
    st: &AppState,
    req: Prepared,
    rx: mpsc::UnboundedReceiver<crate::engine::Chunk>,
    guard: CancelGuard,
    start: Instant,
) -> Response {
    let cfg = &st.cfg;
    let mut frames = Frames::new(
        st.personality,
        req.kind,
        &req.id,
        &req.model,
        st.created(),
        &cfg.server.build_info,
        req.prompt_tokens.len() as u32,
        cfg.output.reasoning_tokens,
        cfg.server.reasoning_field,
    );
    frames.include_usage = req.include_usage;
    frames.continuous = req.continuous_usage;
    frames.textless_every = cfg.output.textless_token_every;
    if let Some(script) = req.script.clone() {
        frames.set_script(script);
    }
    frames.han_at = cfg.output.han_at_token;
    frames.tool_call = req.tool_call.clone();
    let f = &cfg.faults;
    let nz = |v: u32| (v > 0).then_some(v);
    let mut faults = StreamFaults {
        drop_at: nz(f.drop_after_tokens),
        stall_at: nz(f.stall_after_tokens),
        stall: Duration::from_secs_f64(f.stall_seconds),
        malformed_at: nz(f.malformed_after_tokens),
        frontend_delay: Duration::from_secs_f64(f.frontend_chunk_delay_s),
    };
    if faults.drop_at.is_some() && f.drop_share < 1.0 && st.draw() >= f.drop_share {
        faults.drop_at = None;
    }
    {
        let mut http = lock(&st.http);
        http.injected_drops += u64::from(faults.drop_at.is_some());
        http.injected_stalls += u64::from(faults.stall_at.is_some());
        http.injected_malformed += u64::from(faults.malformed_at.is_some());
    }
    let state = StreamState {
        rx,
        frames,
        guard,
        faults,
        start,
        first_at: None,
        done: false,
        fail_next: false,
        stall_next: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(state, next_piece));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn full_response(
    st: &AppState,
    req: Prepared,
    mut rx: mpsc::UnboundedReceiver<crate::engine::Chunk>,
    mut guard: CancelGuard,
) -> Response {
    let p = st.personality;
    let Some((total, cached, reason)) = collect(&mut rx, &mut guard).await else {
        return ApiError::Injected(503).into_response_for(p);
    };
    let prompt = req.prompt_tokens.len() as u32;
    let reasoning = if req.kind == Kind::Chat {
        st.cfg.output.reasoning_tokens.min(total)
    } else {
        0
    };
    let (reasoning, content, reason_text, reason) = match &req.script {
        Some(s) => {
            let (r, c) = s.texts(total);
            (s.reasoning_tokens.min(total), c, r, s.finish(reason))
        }
        None => (
            reasoning,
            text_of(reasoning, total - reasoning),
            text_of(0, reasoning),
            reason,
        ),
    };
    let finish = reason.as_str();
    let mut usage = json!({"prompt_tokens": prompt, "total_tokens": prompt + total, "completion_tokens": total});
    let created = st.created();
    let choice = match req.kind {
        Kind::Chat => {
            let mut msg = json!({"role": "assistant", "content": content});
            if reasoning > 0 {
                let field = match p {
                    Personality::Vllm | Personality::OpenAi
                        if st.cfg.server.reasoning_field
                            == crate::scenario::ReasoningField::Reasoning =>
                    {
                        "reasoning"
                    }
                    _ => "reasoning_content",
                };
                msg[field] = json!(reason_text);
            }
            json!({"index": 0, "message": msg, "logprobs": null, "finish_reason": finish})
        }
        Kind::Completion => {
            json!({"index": 0, "text": content, "logprobs": null, "finish_reason": finish})
        }
    };
    let mut choice: Value = choice;
    match p {
        Personality::Sglang => {
            choice["matched_stop"] = if reason == FinishReason::Stop {
                json!(151_645)
            } else {
                Value::Null
            };
            usage["prompt_tokens_details"] = Value::Null;
            usage["reasoning_tokens"] = json!(reasoning);
        }
        Personality::Vllm | Personality::OpenAi => choice["stop_reason"] = Value::Null,
        Personality::LlamaCpp => {}
    }
    let object = if req.kind == Kind::Chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    let mut out = json!({
        "id": req.id, "object": object, "created": created, "model": req.model,
        "choices": [choice], "usage": usage,
    });
    if p == Personality::LlamaCpp {
        out["system_fingerprint"] = json!(st.cfg.server.build_info);
        out["timings"] = json!({"cache_n": cached, "prompt_n": prompt.saturating_sub(cached), "predicted_n": total});
    }
    (StatusCode::OK, Json(out)).into_response()
}

/// HTTP 200, then an SSE keep-alive comment every `every` and nothing else
/// until the client hangs up (`faults.keepalive_only_share`).
fn keepalive_only(every: Duration) -> Response {
    let pings = futures_util::stream::unfold(true, move |first| async move {
        if !first {
            tokio::time::sleep(every).await;
        }
        Some((
            Ok::<_, std::io::Error>(Bytes::from_static(b": ping\n\n")),
            false,
        ))
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(pings),
    )
        .into_response()
}

/// An error page as a reverse proxy (nginx) writes it for a dead backend.
fn html_error(status: u16) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let words = code.canonical_reason().unwrap_or("Error");
    let page = format!(
        "<!DOCTYPE html>\n<html>\n<head><title>{status} {words}</title>\n\
         <style>body {{ font-family: sans-serif; }}</style></head>\n<body>\n\
         <center><h1>{status} {words}</h1></center>\n<hr><center>nginx</center>\n\
         </body>\n</html>\n"
    );
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "text/html")],
        page,
    )
        .into_response()
}
