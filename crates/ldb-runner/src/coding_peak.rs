//! `--coding-peak`: after the matrix, single requests one after another with
//! a coding prompt; the section `coding_peak` of the result file
//! (`ldb_core::coding_peak` holds the model and the definitions).

use std::time::Duration;

use bytes::Bytes;
use ldb_client::Http;
use ldb_client::text_stream::{Flow, stream_text};
use ldb_core::coding_peak::{CodingPeak, Measured, Sample, chat_request};
use ldb_core::prompt::Message;

/// The probe's settings (`--coding-peak-*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CodingPeakConfig {
    /// Sequential runs (≥ 1).
    pub runs: u32,
    /// `max_tokens` per run (≥ 1).
    pub max_tokens: u64,
    /// The user message.
    pub prompt: String,
    /// Sampling temperature (not sent when unset).
    pub temperature: Option<f64>,
}

/// A run with no token after this long fails (and the next one starts): a
/// cold server may queue or prefill for a while, a hung one must not hold
/// the end of the benchmark forever.
const FIRST_TOKEN_LIMIT: Duration = Duration::from_secs(600);

/// Run the probe against `model` on `http`; `on_sample` sees each run as it
/// ends (for progress lines). A failed run is a sample, never an error.
pub async fn run(
    http: &Http,
    model: &str,
    cfg: &CodingPeakConfig,
    mut on_sample: impl FnMut(&Sample),
) -> CodingPeak {
    let messages = [Message {
        role: "user",
        content: cfg.prompt.clone(),
        tool: None,
    }];
    let body = chat_request(model, &messages, cfg.max_tokens, cfg.temperature);
    let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    let mut samples = Vec::with_capacity(cfg.runs as usize);
    for run in 1..=cfg.runs {
        let out = stream_text(
            http,
            "/v1/chat/completions",
            body.clone(),
            Some(FIRST_TOKEN_LIMIT),
            |_| Flow::Continue,
        )
        .await;
        let sample = match out.error {
            Some(e) => Sample::failed(run, e),
            None => Sample::measured(
                run,
                &Measured {
                    finish_reason: out.finish_reason,
                    completion_tokens: out.completion_tokens,
                    first_token: out.first_token,
                    end: out.end,
                    content: out.content,
                    reasoning: out.reasoning,
                },
            ),
        };
        on_sample(&sample);
        samples.push(sample);
    }
    CodingPeak::new(
        &cfg.prompt,
        cfg.runs,
        cfg.max_tokens,
        cfg.temperature,
        samples,
    )
}
