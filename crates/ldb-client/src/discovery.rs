//! Who is serving: models, engine, context length, KV budget, metrics.

use std::time::Duration;

use ldb_core::engine::Engine;
use ldb_core::prometheus::MetricSet;
use serde_json::Value;

use crate::error::{ClientError, Result};
use crate::http::Http;

const PROBE: Duration = Duration::from_secs(10);

/// What discovery found.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Served model ids.
    pub models: Vec<String>,
    /// The model the run uses.
    pub model: String,
    /// Detected engine.
    pub engine: Engine,
    /// Engine version string, if reported.
    pub engine_version: String,
    /// Model context length in tokens (0 = unknown).
    pub model_context: u64,
    /// `/metrics` is usable.
    pub metrics_available: bool,
    /// Why not, when it is not.
    pub metrics_warning: String,
    /// KV tokens reported per context-parallel rank (0 = unknown).
    pub kv_local_tokens: u64,
    /// Where `kv_local_tokens` came from.
    pub kv_local_source: String,
    /// KV blocks and block size when reported (vLLM), for messages.
    pub kv_blocks: Option<(u64, u64)>,
    /// Context-parallel size found in metric labels, with the label it came from.
    pub cp_from_labels: Option<(u64, String)>,
    /// Server's cap on running requests (SGLang `max_running_requests`, llama.cpp slots).
    pub max_running: u64,
    /// The server has a token-counting endpoint usable for chat prompts.
    pub tokenize: TokenizeKind,
    /// Lines for the event log, in order.
    pub notes: Vec<String>,
}

/// How prompt tokens can be counted on this server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenizeKind {
    /// `POST /tokenize {model, messages}` → `{count}` (vLLM, SGLang).
    Chat,
    /// `POST /tokenize {content}` → `{tokens}` (llama.cpp; no chat template).
    Content,
    /// No tokenizer endpoint: calibrate with real requests.
    #[default]
    None,
}

fn as_u64(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f as u64))
        .or_else(|| v.as_str()?.parse().ok())
}

/// Probe the server. `requested_model` None means "use the first served model".
pub async fn discover(http: &Http, requested_model: Option<&str>) -> Result<Discovery> {
    let models_url = http.url("/v1/models");
    let models = http.get_json("/v1/models", PROBE).await?;
    let cards = models
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| ClientError::Decode {
            url: models_url.clone(),
            detail: "no `data` list of models".into(),
        })?;
    let ids: Vec<String> = cards
        .iter()
        .filter_map(|c| c.get("id")?.as_str().map(str::to_string))
        .collect();
    let model = match requested_model {
        Some(m) if ids.iter().any(|i| i == m) => m.to_string(),
        Some(m) => {
            return Err(ClientError::Decode {
                url: models_url,
                detail: format!(
                    "model {m:?} is not served; served models: {}",
                    ids.join(", ")
                ),
            });
        }
        None => ids.first().cloned().ok_or_else(|| ClientError::Decode {
            url: models_url.clone(),
            detail: "the server lists no models".into(),
        })?,
    };
    let card = cards
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(&model));
    let mut d = Discovery {
        models: ids,
        model,
        model_context: as_u64(card.and_then(|c| c.get("max_model_len"))).unwrap_or(0),
        ..Discovery::default()
    };
    detect_engine(http, &mut d).await;
    probe_metrics(http, &mut d).await;
    Ok(d)
}

async fn try_json(http: &Http, path: &str) -> Option<Value> {
    match http.get_text(path, PROBE).await {
        Ok((200, text)) => serde_json::from_str(&text).ok(),
        _ => None,
    }
}

/// SGLang's server description: `/server_info` (SGLang ≥ 0.5 logs the old
/// route as deprecated), else `/get_server_info`.
async fn sglang_info(http: &Http) -> Option<(Value, &'static str)> {
    for path in ["/server_info", "/get_server_info"] {
        if let Some(info) = try_json(http, path).await
            && info.get("max_total_num_tokens").is_some()
        {
            return Some((info, path));
        }
    }
    None
}

async fn detect_engine(http: &Http, d: &mut Discovery) {
    if let Some((info, path)) = sglang_info(http).await {
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
        return;
    }
    if let Some(props) = try_json(http, "/props").await
        && (props.get("total_slots").is_some()
            || props.get("default_generation_settings").is_some())
    {
        d.engine = Engine::LlamaCpp;
        // llama-server drops the connection after every streamed response.
        http.set_close_completions(true);
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
            d.kv_local_tokens = n_ctx * slots;
            d.kv_local_source = "llamacpp:/props n_ctx x total_slots".into();
        }
        d.tokenize = TokenizeKind::Content;
        return;
    }
    if let Some(v) = try_json(http, "/version").await
        && let Some(ver) = v.get("version").and_then(Value::as_str)
    {
        d.engine = Engine::Vllm;
        d.engine_version = ver.to_string();
        d.tokenize = TokenizeKind::Chat;
        return;
    }
    if let Ok((status, text)) = http.get_text("/metrics", PROBE).await
        && status < 400
    {
        let head: String = text.chars().take(4000).collect();
        d.engine = if head.contains("vllm:") {
            Engine::Vllm
        } else if head.contains("sglang:") {
            Engine::Sglang
        } else if head.contains("llamacpp:") {
            Engine::LlamaCpp
        } else {
            Engine::OpenAiProxy
        };
        if d.engine != Engine::OpenAiProxy {
            d.notes.push(format!(
                "engine detected from /metrics: {}",
                d.engine.display_name()
            ));
        }
    }
}

async fn probe_metrics(http: &Http, d: &mut Discovery) {
    let prefix = match d.engine {
        Engine::Vllm => "vllm:",
        Engine::Sglang => "sglang:",
        Engine::LlamaCpp => "llamacpp:",
        Engine::OpenAiProxy => {
            d.metrics_warning =
                "no engine metrics: OpenAI-compatible endpoint, measuring from the stream only"
                    .into();
            return;
        }
    };
    let text = match http.get_text("/metrics", Duration::from_secs(5)).await {
        Ok((200, text)) => text,
        Ok((status, _)) => {
            d.metrics_warning = format!(
                "/metrics answered HTTP {status}; start the server with metrics enabled \
                 (SGLang --enable-metrics, llama.cpp --metrics)"
            );
            return;
        }
        Err(e) => {
            d.metrics_warning = format!("/metrics unavailable: {e}");
            return;
        }
    };
    let m = MetricSet::parse(&text);
    if !m.has_prefix(prefix) {
        d.metrics_warning = format!("/metrics has no {prefix} series; scheduler validation is off");
        return;
    }
    d.metrics_available = true;
    if d.engine == Engine::Vllm {
        vllm_kv(&m, d);
    }
}

fn vllm_kv(m: &MetricSet, d: &mut Discovery) {
    if let Some(info) = m.first("vllm:cache_config_info") {
        let bs = info.label("block_size").and_then(|v| v.parse::<u64>().ok());
        let nb = info
            .label("num_gpu_blocks")
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(bs), Some(nb)) = (bs, nb) {
            d.kv_local_tokens = bs * nb;
            d.kv_blocks = Some((nb, bs));
            d.kv_local_source = "vllm:cache_config_info block_size x num_gpu_blocks".into();
        }
    }
    let infos = [
        "vllm:parallel_config_info",
        "vllm:vllm_config_info",
        "vllm:cache_config_info",
    ];
    let num = |s: &ldb_core::prometheus::Sample, k: &str| {
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
                p * dc,
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
