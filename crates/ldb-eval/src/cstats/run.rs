//! One completion-stats request as recorded in the result (`runs[]`).

use serde::{Deserialize, Serialize};

/// Which part of the run a request belonged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The `max_tokens = 1` request that measures the prompt's prefill.
    PrefillScout,
    /// The single batch at a fixed concurrency.
    Profile,
    /// A level of the adaptive search.
    Probe,
    /// Extra batches at the selected concurrency.
    Collect,
}

impl Phase {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::PrefillScout => "prefill_scout",
            Phase::Profile => "profile",
            Phase::Probe => "probe",
            Phase::Collect => "collect",
        }
    }
}

/// One request and what it measured. Times are seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CsRun {
    /// Position in the order requests were handed out (0-based; the scout is 0
    /// of its own phase).
    pub run_index: usize,
    /// Phase.
    pub phase: Phase,
    /// Concurrency of the batch it ran in.
    pub concurrency: usize,
    /// Finished without error and was not cancelled.
    pub ok: bool,
    /// The scorer's verdict; `None` without a scorer or for a failed request.
    pub correct: Option<bool>,
    /// Completion tokens: usage when the server reported it, else chunks.
    pub completion_tokens: u64,
    /// Prompt tokens from usage, when reported.
    pub prompt_tokens: Option<u64>,
    /// Send → last chunk (or failure).
    pub elapsed: f64,
    /// First → last chunk with output.
    pub gen_elapsed: f64,
    /// Send → first reasoning or content chunk.
    pub ttft: Option<f64>,
    /// First → second chunk with output.
    pub time_to_second_token: Option<f64>,
    /// `completion_tokens / gen_elapsed` (0 when not measurable).
    pub gen_tok_s: f64,
    /// `completion_tokens / elapsed` (0 when not measurable).
    pub e2e_tok_s: f64,
    /// The stream's finish reason; `client_cancelled` when stopped by us.
    pub finish_reason: Option<String>,
    /// Last non-empty line of the content (of all output without content).
    pub final_answer: String,
    /// Score label (`pass`, `fail`, `exact`, …) or `None`.
    pub score_label: Option<String>,
    /// The scorer's explanation.
    pub score_detail: String,
    /// The answer the scorer extracted.
    pub parsed_answer: Option<String>,
    /// The first 240 characters of the output, with `--completion-stats-save-text`.
    pub output_excerpt: String,
    /// Full output (reasoning + content), with `--completion-stats-save-text`.
    pub output_text: String,
    /// Full reasoning, with `--completion-stats-save-text`.
    pub reasoning_text: String,
    /// Full content, with `--completion-stats-save-text`.
    pub content_text: String,
    /// Why the request failed.
    pub error: Option<String>,
    /// `finish_reason == "length"`.
    pub hit_max_tokens: bool,
    /// Token count is a chunk count (no usage from the server).
    pub estimated_tokens: bool,
    /// Cut by a stop (q, Ctrl-C, SIGTERM).
    pub cancelled: bool,
    /// Dataset item id, if any.
    pub item_id: Option<String>,
    /// Dataset category, if any.
    pub category: Option<String>,
    /// The expected answer, when known.
    pub expected_answer: Option<String>,
    /// When the request was sent, seconds since the run began.
    pub sent_at: f64,
    /// When its first output chunk arrived (same clock), if one did.
    pub first_token_at: Option<f64>,
    /// When it ended (last chunk, failure or cancellation; same clock).
    pub ended_at: f64,
}

impl CsRun {
    /// Finished and produced tokens: the runs every statistic is over.
    pub fn completed(&self) -> bool {
        self.ok && self.completion_tokens > 0
    }

    /// A scored run that was not correct, or a failed one (`wrong_runs`).
    pub fn wrong_or_failed(&self) -> bool {
        (!self.ok && !self.cancelled) || self.correct == Some(false)
    }
}
