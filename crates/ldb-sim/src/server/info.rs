//! Discovery and utility routes: models, version, health, tokenize, SGLang server info and
//! abort, llama.cpp props and slots.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::AppState;
use super::errors::ApiError;
use super::request::{MessageIn, chat_tokens, prompt_tokens};
use crate::engine::Command;
use crate::personality::Personality;

/// `GET /v1/models`.
pub(crate) async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /v1/models");
    let cfg = &st.cfg;
    let created = st.started_unix;
    let card = match st.personality {
        Personality::Vllm | Personality::OpenAi => json!({
            "id": cfg.model, "object": "model", "created": created, "owned_by": "vllm",
            "root": cfg.model_path(), "parent": null, "max_model_len": cfg.max_model_len,
            "permission": [{
                "id": "modelperm-sim", "object": "model_permission", "created": created,
                "allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
                "allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
                "organization": "*", "group": null, "is_blocking": false
            }]
        }),
        Personality::Sglang => json!({
            "id": cfg.model, "object": "model", "created": created, "owned_by": "sglang",
            "root": cfg.model, "parent": null, "max_model_len": cfg.max_model_len
        }),
        Personality::LlamaCpp => json!({
            "id": cfg.model, "object": "model", "created": created, "owned_by": "llamacpp",
            "meta": {
                "vocab_type": 2, "n_vocab": 151_000, "n_ctx_train": cfg.max_model_len.max(131_072),
                "n_embd": 4096, "n_params": 8_030_261_248_u64, "size": 4_920_734_720_u64
            }
        }),
    };
    Json(json!({"object": "list", "data": [card]}))
}

/// `GET /version` (vLLM).
pub(crate) async fn version(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /version");
    Json(json!({"version": st.cfg.server.version}))
}

/// `GET /health`.
pub(crate) async fn health(State(st): State<Arc<AppState>>) -> Response {
    st.count("GET /health");
    match st.personality {
        Personality::LlamaCpp => Json(json!({"status": "ok"})).into_response(),
        _ => StatusCode::OK.into_response(),
    }
}

/// `POST /tokenize`.
pub(crate) async fn tokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    st.count("POST /tokenize");
    let p = st.personality;
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return ApiError::bad(format!("invalid request body: {e}"), None).into_response_for(p);
        }
    };
    let tokens = if let Some(msgs) = v.get("messages") {
        match serde_json::from_value::<Vec<MessageIn>>(msgs.clone()) {
            Ok(m) => chat_tokens(&st, &m),
            Err(e) => {
                return ApiError::bad(format!("invalid messages: {e}"), Some("messages"))
                    .into_response_for(p);
            }
        }
    } else if let Some(prompt) = v.get("prompt").or_else(|| v.get("content")) {
        match prompt_tokens(&st, prompt) {
            // llama.cpp `/tokenize` does not add BOS unless asked.
            Ok(t) if p == Personality::LlamaCpp && prompt.is_string() => t[1..].to_vec(),
            Ok(t) => t,
            Err(e) => return e.into_response_for(p),
        }
    } else {
        return ApiError::bad("expected `prompt`, `content` or `messages`", Some("prompt"))
            .into_response_for(p);
    };
    match p {
        Personality::LlamaCpp => Json(json!({"tokens": tokens})).into_response(),
        _ => Json(
            json!({"count": tokens.len(), "max_model_len": st.cfg.max_model_len, "tokens": tokens}),
        )
        .into_response(),
    }
}

fn spec_fields(st: &AppState) -> (Value, Value, Value) {
    match &st.cfg.spec {
        Some(s) => (
            json!(s.method),
            json!(s.num_speculative_tokens),
            json!(s.num_speculative_tokens + 1),
        ),
        None => (Value::Null, Value::Null, Value::Null),
    }
}

/// `GET /get_server_info` (SGLang). `max_total_num_tokens` is the local (per-DCP-rank) pool.
pub(crate) async fn server_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /get_server_info");
    let cfg = &st.cfg;
    let (algo, steps, draft) = spec_fields(&st);
    let stats = st.engine.snapshot();
    let accept = if stats.spec_drafts > 0 {
        json!(1.0 + stats.spec_accepted as f64 / stats.spec_drafts as f64)
    } else {
        Value::Null
    };
    Json(json!({
        "model_path": cfg.model_path(), "tokenizer_path": cfg.model_path(),
        "served_model_name": cfg.model, "context_length": cfg.max_model_len,
        "max_running_requests": cfg.scheduler.max_running,
        "max_total_tokens": null, "chunked_prefill_size": cfg.scheduler.prefill_chunk_tokens,
        "max_prefill_tokens": 16384, "page_size": cfg.kv.block_size, "schedule_policy": "fcfs",
        "kv_cache_dtype": "auto", "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1,
        "enable_dp_attention": false, "speculative_algorithm": algo,
        "speculative_num_steps": steps, "speculative_eagle_topk": if algo.is_null() { Value::Null } else { json!(1) },
        "speculative_num_draft_tokens": draft, "disaggregation_mode": "null",
        "enable_metrics": true, "enable_cache_report": false,
        "stream_interval": cfg.scheduler.stream_interval,
        "max_total_num_tokens": cfg.kv.local_capacity_tokens(),
        "max_req_input_len": cfg.max_model_len.saturating_sub(5),
        "internal_states": [{
            "last_gen_throughput": stats.interval_gen_throughput,
            "effective_max_running_requests_per_dp": cfg.scheduler.max_running,
            "avg_spec_accept_length": accept,
            "memory_usage": {"weight": 16.0, "kvcache": 40.0, "token_capacity": cfg.kv.local_capacity_tokens(), "graph": 1.0},
        }],
        "version": cfg.server.version,
    }))
}

/// `GET /get_model_info` (SGLang).
pub(crate) async fn model_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /get_model_info");
    Json(json!({
        "model_path": st.cfg.model_path(), "tokenizer_path": st.cfg.model_path(),
        "is_generation": true, "preferred_sampling_params": null, "weight_version": "default"
    }))
}

/// `POST /abort_request` (SGLang): `{"rid": ...}` frees the request at once.
pub(crate) async fn abort(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    st.count("POST /abort_request");
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(rid) = v.get("rid").and_then(Value::as_str) else {
        return ApiError::bad("expected {\"rid\": \"...\"}", Some("rid"))
            .into_response_for(st.personality);
    };
    let (tx, rx) = oneshot::channel();
    let _ = st.engine.tx.send(Command::AbortRid(rid.to_string(), tx));
    let _ = rx.await;
    StatusCode::OK.into_response()
}

fn slot_json(st: &AppState, id: u32, busy: bool) -> Value {
    json!({
        "id": id, "id_task": if busy { json!(id) } else { json!(-1) },
        "n_ctx": st.cfg.max_model_len, "speculative": st.cfg.spec.is_some(),
        "is_processing": busy,
        "params": {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95, "stream": true},
        "next_token": {"has_next_token": busy, "has_new_line": false, "n_remain": -1, "n_decoded": 0}
    })
}

/// `GET /props` (llama.cpp).
pub(crate) async fn props(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /props");
    Json(json!({
        "default_generation_settings": slot_json(&st, 0, false),
        "total_slots": st.cfg.scheduler.max_running,
        "model_path": st.cfg.model_path(),
        "chat_template": "{{ messages }}",
        "chat_template_caps": {},
        "modalities": {"vision": false, "audio": false},
        "build_info": st.cfg.server.build_info,
        "is_sleeping": false,
    }))
}

/// `GET /slots` (llama.cpp).
pub(crate) async fn slots(State(st): State<Arc<AppState>>) -> Json<Value> {
    st.count("GET /slots");
    let running = st.engine.snapshot().running as u32;
    let all: Vec<Value> = (0..st.cfg.scheduler.max_running)
        .map(|i| slot_json(&st, i, i < running))
        .collect();
    Json(Value::Array(all))
}

/// Anything else: 404 in the engine's error shape.
pub(crate) async fn not_found(State(st): State<Arc<AppState>>, uri: Uri) -> Response {
    st.count("other");
    ApiError::RouteNotFound(uri.path().to_string()).into_response_for(st.personality)
}
