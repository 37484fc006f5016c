//! Who is serving: models, engine, context length, KV budget, metrics.

use std::time::Duration;

use ldb_core::engine::Engine;
use ldb_core::prometheus::MetricSet;
use serde_json::Value;

use crate::engine_info;
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
    /// SGLang with DP attention: ranks per attention-TP group (`tp_size /
    /// dp_size`), by which scheduler series without a `dp_rank` are told
    /// apart (`MetricSet::parse_grouped`); 0 otherwise.
    pub attn_tp_size: u64,
    /// The request APIs the server serves (`crate::api_probe`; empty until probed).
    pub apis_served: Vec<ldb_core::api::Api>,
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

/// Probe the server. `requested_model` None means "use the first served model".
pub async fn discover(http: &Http, requested_model: Option<&str>) -> Result<Discovery> {
    let models_url = http.url("/v1/models");
    let models = http.get_json("/v1/models", PROBE).await?;
    let mut d = engine_info::from_models(&models, requested_model).map_err(|detail| {
        ClientError::Decode {
            url: models_url,
            detail,
        }
    })?;
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
        engine_info::apply_sglang_info(&info, path, d);
        return;
    }
    if let Some(props) = try_json(http, "/props").await
        && engine_info::apply_llamacpp_props(&props, d)
    {
        // llama-server drops the connection after every streamed response.
        http.set_close_completions(true);
        return;
    }
    if let Some(v) = try_json(http, "/version").await
        && engine_info::apply_vllm_version(&v, d)
    {
        return;
    }
    if let Ok((status, text)) = http.get_text("/metrics", PROBE).await
        && status < 400
    {
        d.engine = engine_info::engine_from_metrics(&text);
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
        engine_info::vllm_kv(&m, d);
    }
}

/// The version string `engine` reports now (`/version`, SGLang's server
/// info, llama.cpp's `/props` build), read the way discovery reads it.
/// `None` when the engine reports none or the server does not answer: a
/// version that changes between cells is a new server process.
pub async fn engine_version(http: &Http, engine: Engine) -> Option<String> {
    let mut d = Discovery::default();
    let found = match engine {
        Engine::Vllm => try_json(http, "/version")
            .await
            .is_some_and(|v| engine_info::apply_vllm_version(&v, &mut d)),
        Engine::Sglang => match sglang_info(http).await {
            Some((info, path)) => {
                engine_info::apply_sglang_info(&info, path, &mut d);
                true
            }
            None => false,
        },
        Engine::LlamaCpp => try_json(http, "/props")
            .await
            .is_some_and(|p| engine_info::apply_llamacpp_props(&p, &mut d)),
        Engine::OpenAiProxy => false,
    };
    (found && !d.engine_version.is_empty()).then_some(d.engine_version)
}
