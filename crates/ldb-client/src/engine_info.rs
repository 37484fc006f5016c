//! Reading what a server says about itself — `/v1/models`, SGLang's server
//! info, llama.cpp's `/props`, vLLM's `/version` and `/metrics` — into a
//! [`Discovery`]. Pure functions over parsed JSON and metrics, so that they
//! can be tested on recorded responses and fuzzed (`tests/fuzz_engine_info.rs`)
//! without a server; `discovery.rs` fetches and calls them.
//!
//! Servers are not trusted: a number may be a string, a float, negative,
//! absurdly large or missing, and products of two reported numbers saturate
//! instead of overflowing.

use ldb_core::engine::Engine;
use ldb_core::prometheus::{MetricSet, Sample};
use serde_json::Value;

use crate::discovery::{Discovery, TokenizeKind};

/// A count from JSON: an integer, a float (cut towards zero, negatives to 0)
/// or a decimal string.
pub fn as_u64(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.max(0.0) as u64)
        })
        .or_else(|| v.as_str()?.trim().parse().ok())
}

/// The served models from a `/v1/models` answer, and the one the run uses:
/// `requested` when served, else the first listed. `Err` is the one-line
/// reason (no model list, the requested model not served, no models).
pub fn from_models(models: &Value, requested: Option<&str>) -> Result<Discovery, String> {
    let cards = models
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| "no `data` list of models".to_string())?;
    let ids: Vec<String> = cards
        .iter()
        .filter_map(|c| c.get("id")?.as_str().map(str::to_string))
        .collect();
    let model = match requested {
        Some(m) if ids.iter().any(|i| i == m) => m.to_string(),
        Some(m) => {
            return Err(format!(
                "model {m:?} is not served; served models: {}",
                ids.join(", ")
            ));
        }
        None => ids
            .first()
            .cloned()
            .ok_or_else(|| "the server lists no models".to_string())?,
    };
    let card = cards
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(model.as_str()));
    Ok(Discovery {
        models: ids,
        model,
        model_context: as_u64(card.and_then(|c| c.get("max_model_len"))).unwrap_or(0),
        ..Discovery::default()
    })
}

/// SGLang's server description (`/server_info` or `/get_server_info`,
/// named by `path`): engine, version, KV tokens, running cap, context.
pub fn apply_sglang_info(info: &Value, path: &str, d: &mut Discovery) {
    d.engine = Engine::Sglang;
    d.engine_version = info
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or("")
        .into();
    d.kv_local_tokens = as_u64(info.get("max_total_num_tokens")).unwrap_or(0);
    d.kv_local_source = format!("sglang:{path}.max_total_num_tokens");
    d.max_running = as_u64(info.get("max_running_requests")).unwrap_or(0);
    if let Some(ctx) = as_u64(info.get("context_length")).filter(|c| *c > 0) {
        d.model_context = ctx;
    }
    d.tokenize = TokenizeKind::Chat;
    d.attn_tp_size = sglang_attn_tp_size(info);
}

/// Ranks per attention-TP group under SGLang's DP attention (`tp_size /
/// dp_size / attn_cp_size`), 0 without DP attention or without the sizes.
pub fn sglang_attn_tp_size(info: &Value) -> u64 {
    let dp_attention = info.get("enable_dp_attention").and_then(Value::as_bool) == Some(true);
    let tp = as_u64(info.get("tp_size")).unwrap_or(0);
    let dp = as_u64(info.get("dp_size")).unwrap_or(0);
    let cp = as_u64(info.get("attn_cp_size")).unwrap_or(1).max(1);
    if !dp_attention || dp < 2 || tp < dp {
        return 0;
    }
    (tp / dp / cp).max(1)
}

/// llama.cpp's `/props`, when it is one (it has `total_slots` or
/// `default_generation_settings`): slots, per-slot context, KV tokens.
/// Returns whether it was.
pub fn apply_llamacpp_props(props: &Value, d: &mut Discovery) -> bool {
    if props.get("total_slots").is_none() && props.get("default_generation_settings").is_none() {
        return false;
    }
    d.engine = Engine::LlamaCpp;
    d.engine_version = props
        .get("build_info")
        .and_then(Value::as_str)
        .unwrap_or("")
        .into();
    let slots = as_u64(props.get("total_slots")).unwrap_or(1).max(1);
    let n_ctx = as_u64(props.pointer("/default_generation_settings/n_ctx")).unwrap_or(0);
    d.max_running = slots;
    if n_ctx > 0 {
        d.model_context = n_ctx;
        d.kv_local_tokens = n_ctx.saturating_mul(slots);
        d.kv_local_source = "llamacpp:/props n_ctx x total_slots".into();
    }
    d.tokenize = TokenizeKind::Content;
    true
}

/// vLLM's `/version` (`{"version": "…"}`). Returns whether it was one.
pub fn apply_vllm_version(v: &Value, d: &mut Discovery) -> bool {
    let Some(ver) = v.get("version").and_then(Value::as_str) else {
        return false;
    };
    d.engine = Engine::Vllm;
    d.engine_version = ver.to_string();
    d.tokenize = TokenizeKind::Chat;
    true
}

/// The engine a `/metrics` page belongs to, from the metric prefixes in its
/// first 4,000 characters; a plain OpenAI-compatible proxy otherwise.
pub fn engine_from_metrics(text: &str) -> Engine {
    let head: String = text.chars().take(4000).collect();
    if head.contains("vllm:") {
        Engine::Vllm
    } else if head.contains("sglang:") {
        Engine::Sglang
    } else if head.contains("llamacpp:") {
        Engine::LlamaCpp
    } else {
        Engine::OpenAiProxy
    }
}

/// vLLM's KV budget (`cache_config_info`: block size × blocks) and the
/// context-parallel size its config-info labels carry.
pub fn vllm_kv(m: &MetricSet, d: &mut Discovery) {
    if let Some(info) = m.first("vllm:cache_config_info") {
        let bs = info.label("block_size").and_then(|v| v.parse::<u64>().ok());
        let nb = info
            .label("num_gpu_blocks")
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(bs), Some(nb)) = (bs, nb) {
            d.kv_local_tokens = bs.saturating_mul(nb);
            d.kv_blocks = Some((nb, bs));
            d.kv_local_source = "vllm:cache_config_info block_size x num_gpu_blocks".into();
        }
    }
    let infos = [
        "vllm:parallel_config_info",
        "vllm:vllm_config_info",
        "vllm:cache_config_info",
    ];
    let num = |s: &Sample, k: &str| {
        s.label(k)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
    };
    for name in infos {
        let Some(s) = m.first(name) else { continue };
        if let Some(cp) = num(s, "cp_world_size") {
            d.cp_from_labels = Some((cp, format!("{name}.cp_world_size")));
            return;
        }
        if let (Some(p), Some(dc)) = (
            num(s, "prefill_context_parallel_size"),
            num(s, "decode_context_parallel_size"),
        ) {
            d.cp_from_labels = Some((
                p.saturating_mul(dc),
                format!("{name}.prefill_context_parallel_size*decode_context_parallel_size"),
            ));
            return;
        }
    }
    for name in infos {
        let Some(s) = m.first(name) else { continue };
        for key in ["dcp_world_size", "decode_context_parallel_size"] {
            if let Some(cp) = num(s, key) {
                d.cp_from_labels = Some((cp, format!("{name}.{key}")));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_come_from_numbers_floats_and_strings() {
        assert_eq!(as_u64(Some(&json!(4096))), Some(4096));
        assert_eq!(as_u64(Some(&json!(4096.7))), Some(4096));
        assert_eq!(as_u64(Some(&json!(" 512 "))), Some(512));
        assert_eq!(as_u64(Some(&json!(-3))), Some(0));
        assert_eq!(as_u64(Some(&json!("many"))), None);
        assert_eq!(as_u64(Some(&json!(null))), None);
        assert_eq!(as_u64(None), None);
    }

    #[test]
    fn hostile_llamacpp_props_saturate_instead_of_overflowing() {
        let mut d = Discovery::default();
        let props = json!({
            "total_slots": u64::MAX,
            "default_generation_settings": {"n_ctx": u64::MAX}
        });
        assert!(apply_llamacpp_props(&props, &mut d));
        assert_eq!(d.kv_local_tokens, u64::MAX);
        assert_eq!(d.max_running, u64::MAX);
    }

    #[test]
    fn models_pick_the_requested_or_the_first() {
        let v = json!({"data": [{"id": "a", "max_model_len": 2048}, {"id": "b"}]});
        let d = from_models(&v, None).expect("ok");
        assert_eq!((d.model.as_str(), d.model_context), ("a", 2048));
        assert_eq!(from_models(&v, Some("b")).expect("ok").model, "b");
        let e = from_models(&v, Some("c")).unwrap_err();
        assert_eq!(e, "model \"c\" is not served; served models: a, b");
        assert_eq!(
            from_models(&json!({"data": []}), None).unwrap_err(),
            "the server lists no models"
        );
        assert_eq!(
            from_models(&json!([1, 2]), None).unwrap_err(),
            "no `data` list of models"
        );
    }
}
