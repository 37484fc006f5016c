//! `--reset-prefix-cache`: emptying the server's prefix cache before the run
//! or before every cell, the same way on every engine that offers it.
//!
//! - vLLM: `POST /reset_prefix_cache`, which answers `{"success": false}`
//!   while blocks are still held (retried for a while); the route exists only
//!   when the server runs with `VLLM_SERVER_DEV_MODE=1` (404 otherwise).
//! - SGLang: `GET /flush_cache?timeout=S`, which waits up to S seconds for
//!   the server to go idle (400 when it does not).
//! - llama.cpp: `POST /slots/{id}?action=erase` for every slot (`total_slots`
//!   from `/props`); every slot action is 501 unless the server was started
//!   with `--slot-save-path`.
//!
//! A refusal is said once per run with how to enable the reset, and the
//! cells record `refused`. The intended-cache model is cleared at every
//! reset point either way (see `prefix.rs`).

use std::time::Duration;

use ldb_core::engine::Engine;
use ldb_core::result::ResetStatus;
use serde_json::{Value, json};

use crate::ctx::RunCtx;
use crate::prefix::ResetMode;

/// Tries of a vLLM reset that answers `success: false` (blocks still held).
const VLLM_TRIES: u32 = 40;
/// Pause between those tries.
const VLLM_RETRY: Duration = Duration::from_millis(250);
/// Seconds SGLang may wait for idle before flushing.
const SGLANG_FLUSH_WAIT_S: u64 = 30;
/// Limit of one reset call.
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// Why a reset did not happen: the engine's words and how to enable it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal(pub(crate) String);

/// The reset before the run (`before-run`, `before-cell`); records the
/// outcome for the run. Nothing is sent with `never`.
pub(crate) async fn reset_before_run(rc: &RunCtx) {
    let status = match rc.cfg.prefix_cache.reset {
        ResetMode::Never => ResetStatus::NotRequested,
        ResetMode::BeforeRun | ResetMode::BeforeCell => reset_now(rc, "before the run").await,
    };
    rc.prefix.set_run_reset(status);
}

/// The reset before a cell under `before-cell` (the first cell's is the
/// run's own); `None` in the other modes, when the cell records nothing.
pub(crate) async fn reset_before_cell(rc: &RunCtx, first: bool) -> Option<ResetStatus> {
    if rc.cfg.prefix_cache.reset != ResetMode::BeforeCell {
        return None;
    }
    if first && let Some(s) = rc.prefix.run_reset() {
        return Some(s);
    }
    Some(reset_now(rc, "before the cell").await)
}

/// Resets the server's prefix cache now and clears the intended model.
async fn reset_now(rc: &RunCtx, when: &str) -> ResetStatus {
    rc.prefix.clear();
    match reset_engine(rc).await {
        Ok(()) => {
            rc.live.event(format!("prefix cache reset {when}"));
            ResetStatus::Done
        }
        Err(Refusal(why)) => {
            if rc.prefix.first_refusal() {
                rc.live.event(format!(
                    "prefix cache NOT reset: {why}; cells record prefix_cache_reset \"refused\""
                ));
            }
            ResetStatus::Refused
        }
    }
}

async fn reset_engine(rc: &RunCtx) -> Result<(), Refusal> {
    match rc.engine {
        Engine::Vllm => reset_vllm(rc).await,
        Engine::Sglang => flush_sglang(rc).await,
        Engine::LlamaCpp => erase_llamacpp(rc).await,
        _ => Err(Refusal(
            "this server has no known prefix-cache reset endpoint".into(),
        )),
    }
}

async fn post(rc: &RunCtx, path: &str) -> Result<(u16, Value), Refusal> {
    rc.http
        .post_json(path, &json!({}), CALL_LIMIT)
        .await
        .map_err(|e| Refusal(format!("{path} failed: {e}")))
}

/// What one vLLM reset answer means.
pub(crate) fn vllm_answer(status: u16, body: &Value) -> Option<Result<(), Refusal>> {
    match status {
        // Not done yet: blocks are held by running requests.
        200 if body.get("success") == Some(&Value::Bool(false)) => None,
        200 => Some(Ok(())),
        404 => Some(Err(Refusal(
            "vLLM has no /reset_prefix_cache route; start it with VLLM_SERVER_DEV_MODE=1 \
             to allow resets"
                .into(),
        ))),
        s => Some(Err(Refusal(format!(
            "vLLM answered HTTP {s} to /reset_prefix_cache"
        )))),
    }
}

async fn reset_vllm(rc: &RunCtx) -> Result<(), Refusal> {
    for _ in 0..VLLM_TRIES {
        let (status, body) = post(rc, "/reset_prefix_cache").await?;
        if let Some(done) = vllm_answer(status, &body) {
            return done;
        }
        tokio::time::sleep(VLLM_RETRY).await;
    }
    Err(Refusal(format!(
        "vLLM kept answering success=false to /reset_prefix_cache ({VLLM_TRIES} tries)"
    )))
}

async fn flush_sglang(rc: &RunCtx) -> Result<(), Refusal> {
    let path = format!("/flush_cache?timeout={SGLANG_FLUSH_WAIT_S}");
    let limit = CALL_LIMIT + Duration::from_secs(SGLANG_FLUSH_WAIT_S);
    match rc.http.get_text(&path, limit).await {
        Ok((200, _)) => Ok(()),
        Ok((404, _)) => Err(Refusal("SGLang has no /flush_cache route".into())),
        Ok((s, text)) => Err(Refusal(format!(
            "SGLang answered HTTP {s} to /flush_cache (busy for {SGLANG_FLUSH_WAIT_S} s?): {}",
            text.chars().take(120).collect::<String>()
        ))),
        Err(e) => Err(Refusal(format!("/flush_cache failed: {e}"))),
    }
}

/// Slots to erase: `total_slots` of `/props` (1 when absent).
pub(crate) fn llamacpp_slots(props: &Value) -> u64 {
    props
        .get("total_slots")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1)
}

async fn erase_llamacpp(rc: &RunCtx) -> Result<(), Refusal> {
    let props = rc
        .http
        .get_json("/props", CALL_LIMIT)
        .await
        .unwrap_or(Value::Null);
    for id in 0..llamacpp_slots(&props) {
        let (status, body) = post(rc, &format!("/slots/{id}?action=erase")).await?;
        match status {
            200 => {}
            501 => {
                return Err(Refusal(
                    "llama.cpp refuses slot actions; start llama-server with --slot-save-path DIR \
                     to allow the erase"
                        .into(),
                ));
            }
            s => {
                return Err(Refusal(format!(
                    "llama.cpp answered HTTP {s} to erasing slot {id}: {body}"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_answers_retry_succeed_or_refuse_with_the_way_to_enable() {
        assert_eq!(vllm_answer(200, &json!({"success": false})), None);
        assert_eq!(vllm_answer(200, &json!({"success": true})), Some(Ok(())));
        assert_eq!(
            vllm_answer(200, &Value::String(String::new())),
            Some(Ok(()))
        );
        let Some(Err(Refusal(why))) = vllm_answer(404, &Value::Null) else {
            panic!("404 is a refusal");
        };
        assert!(why.contains("VLLM_SERVER_DEV_MODE=1"));
        assert!(matches!(vllm_answer(500, &Value::Null), Some(Err(_))));
    }

    #[test]
    fn llamacpp_erases_every_slot_of_its_props() {
        let props: Value = serde_json::from_str(include_str!(
            "../../ldb-client/tests/fixtures/llamacpp/props.json"
        ))
        .expect("json");
        assert!(llamacpp_slots(&props) >= 1);
        assert_eq!(llamacpp_slots(&json!({"total_slots": 4})), 4);
        assert_eq!(llamacpp_slots(&Value::Null), 1);
    }
}
