//! One completion-stats request: its body, and the run record made from
//! what the stream measured and what the scorer said.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ldb_client::stream::{ChannelTexts, StreamOutcome};
use ldb_core::api::{Api, RequestInput};
use ldb_core::prompt::Message;
use ldb_core::window::WindowBounds;
use ldb_eval::cstats::{CsRun, Phase};
use ldb_eval::score::Output;
use ldb_eval::task::{Task, TaskItem};

/// Characters kept in `output_excerpt`.
const EXCERPT_CHARS: usize = 240;

/// The body for `item` in the run's API (written by [`Api::body`]):
/// streaming with usage at the end, no `ignore_eos` (the answer's natural
/// length is what is measured), the token limit only when set (Messages
/// always carries one), then the task's own fields on top.
pub(crate) fn body(
    api: Api,
    model: &str,
    task: &Task,
    item: &TaskItem,
    max_tokens: Option<u64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
) -> Bytes {
    let mut messages = Vec::new();
    if let Some(system) = &task.system_prompt {
        messages.push(Message {
            role: "system",
            content: system.clone(),
            tool: None,
        });
    }
    messages.push(Message {
        role: "user",
        content: item.prompt.clone(),
        tool: None,
    });
    let mut b = api.body(&RequestInput {
        model,
        messages: &messages,
        max_tokens,
        temperature,
        top_p,
        extra: Some(&task.request_overrides),
        ..RequestInput::default()
    });
    if max_tokens == Some(1)
        && let Some(o) = b.as_object_mut()
    {
        // the scout: a task that names its limit `max_completion_tokens`
        // must not override the single token
        o.remove("max_completion_tokens");
    }
    Bytes::from(b.to_string())
}

/// Where a run sits: its index, phase and batch concurrency.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub run_index: usize,
    pub phase: Phase,
    pub concurrency: usize,
}

/// The run record of a finished stream. `ended` is the run-clock time the
/// request was given up on or finished.
pub(crate) fn record(
    slot: Slot,
    item: &TaskItem,
    task: &Task,
    out: &StreamOutcome,
    texts: &Arc<Mutex<ChannelTexts>>,
    ended: f64,
    save_text: bool,
) -> CsRun {
    let s = out.track.to_sample(0.0, WindowBounds::default());
    let texts = texts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let finish = if out.cancelled {
        Some("client_cancelled".to_owned())
    } else {
        Some(s.finish_reason.clone()).filter(|f| !f.is_empty())
    };
    let error = Some(s.error.clone()).filter(|e| !e.is_empty());
    let ok = error.is_none() && !out.cancelled && s.completed;
    let tokens = s.output_tokens;
    let first = s.first_token_s;
    let start = out.track.start();
    let elapsed = match s.end_s {
        Some(end) if s.completed => end - start,
        _ => ended - start,
    }
    .max(0.0);
    let gen_elapsed = match (first, s.end_s) {
        (Some(f), Some(e)) if e > f => e - f,
        _ => 0.0,
    };
    let rate = |d: f64| if d > 0.0 { tokens as f64 / d } else { 0.0 };
    let output = Output {
        reasoning: &texts.reasoning,
        content: &texts.content,
        finish_reason: finish.as_deref(),
    };
    let score = match &task.scorer {
        Some(scorer) if ok => Some(scorer.score(item, &output)),
        _ => None,
    };
    let full = output.full_text();
    CsRun {
        run_index: slot.run_index,
        phase: slot.phase,
        concurrency: slot.concurrency,
        ok,
        correct: score.as_ref().map(|s| s.correct()),
        completion_tokens: tokens,
        prompt_tokens: (s.input_tokens > 0).then_some(s.input_tokens),
        elapsed,
        gen_elapsed,
        ttft: first.map(|f| f - start),
        // second − first output chunk, as in every mode (methodology §7.1):
        // two chunks of one socket read give a true 0, not null
        time_to_second_token: s.time_to_second_token,
        gen_tok_s: rate(gen_elapsed),
        e2e_tok_s: rate(elapsed),
        hit_max_tokens: output.hit_max_tokens(),
        finish_reason: finish.clone(),
        final_answer: output.final_answer(),
        score_label: score.as_ref().map(|s| s.label.as_str().to_owned()),
        score_detail: score.as_ref().map(|s| s.detail.clone()).unwrap_or_default(),
        parsed_answer: score.and_then(|s| s.parsed_answer),
        output_excerpt: if save_text {
            full.chars().take(EXCERPT_CHARS).collect()
        } else {
            String::new()
        },
        output_text: if save_text { full } else { String::new() },
        reasoning_text: if save_text {
            texts.reasoning
        } else {
            String::new()
        },
        content_text: if save_text {
            texts.content
        } else {
            String::new()
        },
        error,
        estimated_tokens: tokens > 0 && !out.track.has_usage(),
        cancelled: out.cancelled,
        item_id: item.item_id.clone(),
        category: item.category.clone(),
        expected_answer: item.expected_answer.clone(),
        sent_at: start,
        first_token_at: first,
        ended_at: start + elapsed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn body_leaves_out_an_unset_limit_and_takes_the_task_fields() {
        let mut task = Task::single_prompt("hi".into(), "inline --prompt".into(), None);
        task.system_prompt = Some("be brief".into());
        task.request_overrides
            .insert("thinking".into(), json!({"type": "enabled"}));
        let item = task.items[0].clone();
        let b: Value =
            serde_json::from_slice(&body(Api::Chat, "m", &task, &item, None, Some(0.0), None))
                .unwrap();
        assert!(b.get("max_tokens").is_none());
        assert!(b.get("ignore_eos").is_none());
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][1]["content"], "hi");
        assert_eq!(b["temperature"], 0.0);
        assert_eq!(b["thinking"]["type"], "enabled");
        let b: Value =
            serde_json::from_slice(&body(Api::Chat, "m", &task, &item, Some(0), None, None))
                .unwrap();
        assert!(b.get("max_tokens").is_none(), "0 means omitted");
        let b: Value =
            serde_json::from_slice(&body(Api::Chat, "m", &task, &item, Some(7), None, None))
                .unwrap();
        assert_eq!(b["max_tokens"], 7);
    }
}
