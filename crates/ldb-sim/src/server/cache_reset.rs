//! The prefix-cache reset routes of each personality, guarded as the real
//! servers guard them (`server.cache_reset_enabled` stands for vLLM's
//! `VLLM_SERVER_DEV_MODE=1` and llama.cpp's `--slot-save-path`):
//! - vLLM `POST /reset_prefix_cache` → `{"success": bool}` (false while
//!   blocks are held); the route is absent (404) unless enabled;
//! - SGLang `GET|POST /flush_cache?timeout=S` → 200, or 400 when the server
//!   did not go idle within S seconds (0: must be idle now);
//! - llama.cpp `POST /slots/{id}?action=erase` → `{"id_slot", "n_erased"}`,
//!   501 `not_supported_error` unless enabled. The simulator has one cache
//!   for all slots: erasing any slot empties it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::oneshot;

use super::AppState;
use crate::engine::Command;

/// One reset through the engine task: true when done.
async fn reset(st: &AppState) -> bool {
    let (tx, rx) = oneshot::channel();
    if st.engine.tx.send(Command::ResetPrefixCache(tx)).is_err() {
        return false;
    }
    rx.await.unwrap_or(false)
}

/// `POST /reset_prefix_cache` (vLLM, dev mode).
pub(crate) async fn vllm_reset(State(st): State<Arc<AppState>>) -> Json<serde_json::Value> {
    st.count("POST /reset_prefix_cache");
    Json(json!({"success": reset(&st).await}))
}

/// `GET|POST /flush_cache` (SGLang).
pub(crate) async fn sglang_flush(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    st.count("/flush_cache");
    let wait = q
        .get("timeout")
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t > 0.0)
        .unwrap_or(0.0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(wait.min(3600.0));
    loop {
        if reset(&st).await {
            return (
                StatusCode::OK,
                "Cache flushed.\nPlease check backend logs for more details. (When there are \
                 running or waiting requests, the operation will not be performed.)\n",
            )
                .into_response();
        }
        if tokio::time::Instant::now() >= deadline {
            return (
                StatusCode::BAD_REQUEST,
                "Cache not flushed: the server is busy. Try again when idle, or pass \
                 a timeout.\n",
            )
                .into_response();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /slots/{id}?action=…` (llama.cpp).
pub(crate) async fn llamacpp_slot_action(
    State(st): State<Arc<AppState>>,
    Path(id): Path<u32>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    st.count("POST /slots");
    if !st.cfg.server.cache_reset_enabled {
        let e = json!({"error": {"code": 501, "message": "This server does not support slots \
            action. Start it with `--slot-save-path`", "type": "not_supported_error"}});
        return (StatusCode::NOT_IMPLEMENTED, Json(e)).into_response();
    }
    if id >= st.cfg.scheduler.max_running || q.get("action").map(String::as_str) != Some("erase") {
        let e = json!({"error": {"code": 400, "message": "Invalid slot id or action",
            "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, Json(e)).into_response();
    }
    let erased = reset(&st).await;
    Json(json!({"id_slot": id, "n_erased": u32::from(erased)})).into_response()
}
