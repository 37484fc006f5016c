//! SSE frames in each engine's chunk shape, written straight into a byte buffer.
//!
//! The per-stream constant parts (id, model, created, fingerprint) are serialized once; each
//! token chunk then costs a few `extend_from_slice` calls and no allocation.

use std::io::Write;

use super::request::Kind;
use crate::engine::{Chunk, FinishReason};
use crate::personality::Personality;
use crate::scenario::ReasoningField;
use crate::tokenizer::output_piece;

use super::script::Script;
use super::tool_call::{ToolCall, argument_piece};

/// llama.cpp `timings` values.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timings {
    pub cache_n: u32,
    pub prompt_n: u32,
    pub prompt_ms: f64,
    pub predicted_n: u32,
    pub predicted_ms: f64,
}

/// Per-stream formatter.
#[derive(Debug)]
pub(crate) struct Frames {
    p: Personality,
    kind: Kind,
    /// `data: {` … `"choices":[` (llama.cpp: `data: {"choices":[`).
    head: Vec<u8>,
    /// llama.cpp only: `,"created":…,"object":"…"` after the choices.
    mid: Vec<u8>,
    prompt: u32,
    reasoning_tokens: u32,
    reasoning_field: ReasoningField,
    pub include_usage: bool,
    pub continuous: bool,
    /// Every n-th token writes no text (0 = off); see `OutputConfig::textless_token_every`.
    pub textless_every: u32,
    /// The scripted answer this stream writes instead of the filler text.
    pub script: Option<Script>,
    /// 1-based index of the token written as a Han ideograph (0 = none); see
    /// `OutputConfig::han_at_token`.
    pub han_at: u32,
    /// The tool call this stream writes instead of text (`tool_call.rs`).
    pub tool_call: Option<ToolCall>,
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// The word of the `han_at_token` token: one ideograph (U+6C34, "water"),
/// written as raw UTF-8 like an engine would.
const HAN_PIECE: &str = " \u{6C34}";

/// The EOS token id reported by SGLang `matched_stop`.
const EOS_ID: u32 = 151_645;

impl Frames {
    #[expect(
        clippy::too_many_arguments,
        reason = "built once per stream from the request and the scenario"
    )]
    pub(crate) fn new(
        p: Personality,
        kind: Kind,
        id: &str,
        model: &str,
        created: u64,
        fingerprint: &str,
        prompt: u32,
        reasoning_tokens: u32,
        reasoning_field: ReasoningField,
    ) -> Self {
        let object = match kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let (head, mid) = if p == Personality::LlamaCpp {
            let mid = format!(
                ",\"created\":{created},\"id\":{},\"model\":{},\"system_fingerprint\":{},\"object\":\"{object}\"",
                q(id),
                q(model),
                q(fingerprint)
            );
            (b"data: {\"choices\":[".to_vec(), mid.into_bytes())
        } else {
            let head = format!(
                "data: {{\"id\":{},\"object\":\"{object}\",\"created\":{created},\"model\":{},\"choices\":[",
                q(id),
                q(model)
            );
            (head.into_bytes(), Vec::new())
        };
        Frames {
            p,
            kind,
            head,
            mid,
            prompt,
            reasoning_tokens: if kind == Kind::Chat {
                reasoning_tokens
            } else {
                0
            },
            reasoning_field,
            include_usage: false,
            continuous: false,
            textless_every: 0,
            script: None,
            han_at: 0,
            tool_call: None,
        }
    }

    /// Write a scripted answer: its reasoning share replaces the scenario's.
    pub(crate) fn set_script(&mut self, script: Script) {
        if self.kind == Kind::Chat {
            self.reasoning_tokens = script.reasoning_tokens;
        }
        self.script = Some(script);
    }

    /// The finish reason to write for the engine's `r`.
    fn reason(&self, r: FinishReason) -> FinishReason {
        match &self.tool_call {
            Some(c) if r == FinishReason::Stop && !c.named => FinishReason::ToolCalls,
            Some(_) => r,
            None => self.script.as_ref().map_or(r, |s| s.finish(r)),
        }
    }

    /// The usage object. `last` marks the usage-only chunk at the end;
    /// `cached` is llama.cpp's reused prompt tokens (from its timings).
    fn usage_obj(
        &self,
        buf: &mut Vec<u8>,
        completion: u32,
        reasoning: u32,
        last: bool,
        cached: Option<u32>,
    ) {
        let (p, t) = (self.prompt, self.prompt + completion);
        let _ = match self.p {
            Personality::Sglang => write!(
                buf,
                "{{\"prompt_tokens\":{p},\"total_tokens\":{t},\"completion_tokens\":{completion},\"prompt_tokens_details\":null,\"reasoning_tokens\":{reasoning},\"completion_tokens_details\":null}}"
            ),
            Personality::LlamaCpp => match cached {
                Some(c) => write!(
                    buf,
                    "{{\"completion_tokens\":{completion},\"prompt_tokens\":{p},\"total_tokens\":{t},\"prompt_tokens_details\":{{\"cached_tokens\":{c}}}}}"
                ),
                None => write!(
                    buf,
                    "{{\"completion_tokens\":{completion},\"prompt_tokens\":{p},\"total_tokens\":{t}}}"
                ),
            },
            // vLLM 0.32: per-chunk usage has `completion_tokens_details`, the
            // final usage-only chunk does not.
            _ if last => write!(
                buf,
                "{{\"prompt_tokens\":{p},\"total_tokens\":{t},\"completion_tokens\":{completion}}}"
            ),
            _ => write!(
                buf,
                "{{\"prompt_tokens\":{p},\"total_tokens\":{t},\"completion_tokens\":{completion},\"completion_tokens_details\":null}}"
            ),
        };
    }

    /// Close a frame: usage (when continuous), timings, newline pair.
    fn close(&self, buf: &mut Vec<u8>, usage: Option<u32>, timings: Option<&Timings>) {
        self.close_with(buf, usage, timings, false);
    }

    fn close_with(
        &self,
        buf: &mut Vec<u8>,
        usage: Option<u32>,
        timings: Option<&Timings>,
        last: bool,
    ) {
        buf.extend_from_slice(b"]");
        buf.extend_from_slice(&self.mid);
        if let Some(done) = usage {
            buf.extend_from_slice(b",\"usage\":");
            let cached = timings.map(|t| t.cache_n);
            self.usage_obj(buf, done, done.min(self.reasoning_tokens), last, cached);
        }
        if last && matches!(self.p, Personality::Vllm | Personality::OpenAi) {
            buf.extend_from_slice(b",\"system_fingerprint\":\"vllm-sim\"");
        }
        if let Some(t) = timings.filter(|_| self.p == Personality::LlamaCpp) {
            write_timings(buf, t);
        }
        buf.extend_from_slice(b"}\n\n");
    }

    fn cont(&self, done: u32) -> Option<u32> {
        self.continuous.then_some(done)
    }

    /// Prompt tokens reported in usage.
    pub(crate) fn prompt_tokens(&self) -> u32 {
        self.prompt
    }

    /// The chat role chunk (nothing for completions).
    pub(crate) fn role(&self, buf: &mut Vec<u8>) {
        if self.kind != Kind::Chat {
            return;
        }
        buf.extend_from_slice(&self.head);
        buf.extend_from_slice(match self.p {
            Personality::Sglang => b"{\"index\":0,\"delta\":{\"reasoning_content\":null,\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null}".as_slice(),
            Personality::LlamaCpp => b"{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}".as_slice(),
            _ => b"{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}".as_slice(),
        });
        let usage = if self.p == Personality::Sglang {
            None
        } else {
            self.cont(0)
        };
        self.close(buf, usage, None);
    }

    fn text_frame(
        &self,
        buf: &mut Vec<u8>,
        from: u32,
        n: u32,
        reasoning: bool,
        finish: Option<FinishReason>,
    ) {
        buf.extend_from_slice(&self.head);
        let chat = self.kind == Kind::Chat;
        let (open, close): (&[u8], &[u8]) = match (self.p, chat, reasoning) {
            (Personality::Sglang, true, false) => (
                b"{\"index\":0,\"delta\":{\"reasoning_content\":null,\"content\":\"",
                b"\"},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null",
            ),
            (Personality::Sglang, true, true) => (
                b"{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"",
                b"\"},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null",
            ),
            (Personality::Sglang, false, _) => (
                b"{\"index\":0,\"text\":\"",
                b"\",\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null",
            ),
            (Personality::LlamaCpp, true, false) => (
                b"{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"",
                b"\"}",
            ),
            (Personality::LlamaCpp, true, true) => (
                b"{\"finish_reason\":null,\"index\":0,\"delta\":{\"reasoning_content\":\"",
                b"\"}",
            ),
            (Personality::LlamaCpp, false, _) => (
                b"{\"text\":\"",
                b"\",\"index\":0,\"logprobs\":null,\"finish_reason\":null",
            ),
            (_, true, false) => (
                b"{\"index\":0,\"delta\":{\"content\":\"",
                b"\"},\"logprobs\":null",
            ),
            (_, true, true) => match self.reasoning_field {
                ReasoningField::Reasoning => (
                    b"{\"index\":0,\"delta\":{\"reasoning\":\"",
                    b"\"},\"logprobs\":null",
                ),
                ReasoningField::ReasoningContent => (
                    b"{\"index\":0,\"delta\":{\"reasoning_content\":\"",
                    b"\"},\"logprobs\":null",
                ),
                ReasoningField::Both => (
                    b"{\"index\":0,\"delta\":{\"reasoning\":\"",
                    b"\"},\"logprobs\":null",
                ),
            },
            (_, false, _) => (b"{\"index\":0,\"text\":\"", b"\",\"logprobs\":null"),
        };
        buf.extend_from_slice(open);
        self.write_text(buf, from, n);
        if reasoning
            && self.reasoning_field == ReasoningField::Both
            && self.p == Personality::Vllm
            && chat
        {
            // Mirror the text into the deprecated field.
            buf.extend_from_slice(b"\",\"reasoning_content\":\"");
            self.write_text(buf, from, n);
        }
        buf.extend_from_slice(close);
        if matches!(self.p, Personality::Vllm | Personality::OpenAi) {
            match finish.map(|r| self.reason(r)) {
                Some(r) => {
                    let _ = write!(
                        buf,
                        ",\"finish_reason\":\"{}\",\"stop_reason\":null",
                        r.as_str()
                    );
                    if chat {
                        buf.extend_from_slice(b",\"token_ids\":null");
                    }
                }
                None if chat => {
                    buf.extend_from_slice(b",\"finish_reason\":null,\"token_ids\":null")
                }
                None => buf.extend_from_slice(b",\"finish_reason\":null,\"stop_reason\":null"),
            }
        }
        buf.extend_from_slice(b"}");
        self.close(buf, self.cont(from + n), None);
    }

    /// The text of tokens `from .. from + n`, leaving out the textless ones
    /// and writing the Han token's ideograph in place of its word.
    fn write_text(&self, buf: &mut Vec<u8>, from: u32, n: u32) {
        if let Some(script) = &self.script {
            for i in from..from + n {
                let piece = q(&script.piece(i));
                // the JSON string without its quotes: the frame has them
                buf.extend_from_slice(&piece.as_bytes()[1..piece.len() - 1]);
            }
            return;
        }
        if self.textless_every == 0 && self.han_at == 0 {
            return write_pieces(buf, from, n);
        }
        for i in from..from + n {
            if i + 1 == self.han_at {
                buf.extend_from_slice(HAN_PIECE.as_bytes());
            } else if self.textless_every == 0 || (i + 1) % self.textless_every != 0 {
                buf.extend_from_slice(output_piece(i).as_bytes());
            }
        }
    }

    /// Frames for the tokens of one engine chunk (reasoning first, then content).
    pub(crate) fn tokens(&self, buf: &mut Vec<u8>, chunk: &Chunk) {
        if let Some(c) = &self.tool_call {
            return self.tool_frames(buf, chunk, c);
        }
        let from = chunk.total - chunk.n;
        let split = self.reasoning_tokens.clamp(from, chunk.total);
        let vllm_finish = if matches!(self.p, Personality::Vllm | Personality::OpenAi) {
            chunk.finish
        } else {
            None
        };
        if split > from {
            let fin = if split == chunk.total {
                vllm_finish
            } else {
                None
            };
            self.text_frame(buf, from, split - from, true, fin);
        }
        if chunk.total > split {
            self.text_frame(buf, split, chunk.total - split, false, vllm_finish);
        }
    }

    /// The frames of a tool call's tokens: the name's token in a delta of
    /// its own, then the chunk's argument fragments in one delta.
    fn tool_frames(&self, buf: &mut Vec<u8>, chunk: &Chunk, c: &ToolCall) {
        let from = chunk.total - chunk.n;
        let vllm = matches!(self.p, Personality::Vllm | Personality::OpenAi);
        let fin = chunk.finish.filter(|_| vllm);
        if from == 0 && chunk.total > 0 {
            let body = format!(
                "{{\"index\":0,\"delta\":{{\"content\":null,\"tool_calls\":[{{\"id\":\"chatcmpl-tool-sim\",\"type\":\"function\",\"index\":0,\"function\":{{\"name\":{}}}}}]}},\"logprobs\":null",
                q(&c.name)
            );
            self.tool_frame(buf, &body, fin.filter(|_| chunk.total == 1), 1);
        }
        let first = from.max(1);
        if chunk.total > first {
            let args: String = (first..chunk.total)
                .map(|i| argument_piece(i, c.tokens))
                .collect();
            let body = format!(
                "{{\"index\":0,\"delta\":{{\"content\":null,\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{}}}}}]}},\"logprobs\":null",
                q(&args)
            );
            self.tool_frame(buf, &body, fin, chunk.total);
        }
    }

    fn tool_frame(&self, buf: &mut Vec<u8>, body: &str, finish: Option<FinishReason>, done: u32) {
        buf.extend_from_slice(&self.head);
        buf.extend_from_slice(body.as_bytes());
        if matches!(self.p, Personality::Vllm | Personality::OpenAi) {
            let _ = match finish.map(|r| self.reason(r)) {
                Some(r) => write!(
                    buf,
                    ",\"finish_reason\":\"{}\",\"stop_reason\":null,\"token_ids\":null",
                    r.as_str()
                ),
                None => write!(buf, ",\"finish_reason\":null,\"token_ids\":null"),
            };
        }
        buf.extend_from_slice(b"}");
        self.close(buf, self.cont(done), None);
    }

    /// A separate finish frame (SGLang, llama.cpp; vLLM only for an empty abort chunk).
    pub(crate) fn finish(
        &self,
        buf: &mut Vec<u8>,
        reason: FinishReason,
        total: u32,
        n: u32,
        timings: Option<&Timings>,
    ) {
        let reason = self.reason(reason);
        let r = reason.as_str();
        let chat = self.kind == Kind::Chat;
        match self.p {
            Personality::Sglang => {
                let stop = if reason == FinishReason::Stop {
                    EOS_ID.to_string()
                } else {
                    "null".to_string()
                };
                buf.extend_from_slice(&self.head);
                let _ = if chat {
                    write!(
                        buf,
                        "{{\"index\":0,\"delta\":{{\"reasoning_content\":null}},\"logprobs\":null,\"finish_reason\":\"{r}\",\"matched_stop\":{stop}}}"
                    )
                } else {
                    write!(
                        buf,
                        "{{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"{r}\",\"matched_stop\":{stop}}}"
                    )
                };
                self.close(buf, None, None);
            }
            Personality::LlamaCpp => {
                buf.extend_from_slice(&self.head);
                let _ = if chat {
                    write!(
                        buf,
                        "{{\"finish_reason\":\"{r}\",\"index\":0,\"delta\":{{}}}}"
                    )
                } else {
                    write!(
                        buf,
                        "{{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"{r}\"}}"
                    )
                };
                self.close(buf, None, timings);
            }
            _ if n == 0 => {
                buf.extend_from_slice(&self.head);
                let _ = if chat {
                    write!(
                        buf,
                        "{{\"index\":0,\"delta\":{{}},\"logprobs\":null,\"finish_reason\":\"{r}\",\"stop_reason\":null}}"
                    )
                } else {
                    write!(
                        buf,
                        "{{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"{r}\",\"stop_reason\":null}}"
                    )
                };
                self.close(buf, self.cont(total), None);
            }
            _ => {}
        }
    }

    /// The usage-only chunk (`choices: []`).
    pub(crate) fn usage(&self, buf: &mut Vec<u8>, total: u32, timings: Option<&Timings>) {
        buf.extend_from_slice(&self.head);
        self.close_with(buf, Some(total), timings, true);
    }

    /// `data: [DONE]`.
    pub(crate) fn done(buf: &mut Vec<u8>) {
        buf.extend_from_slice(b"data: [DONE]\n\n");
    }
}

/// The generated text of tokens `from .. from + n`.
pub(crate) fn write_pieces(buf: &mut Vec<u8>, from: u32, n: u32) {
    for i in from..from + n {
        buf.extend_from_slice(output_piece(i).as_bytes());
    }
}

/// The generated text of tokens `from .. from + n`, as a string.
pub(crate) fn text_of(from: u32, n: u32) -> String {
    let mut v = Vec::new();
    write_pieces(&mut v, from, n);
    String::from_utf8_lossy(&v).into_owned()
}

fn write_timings(buf: &mut Vec<u8>, t: &Timings) {
    let per = |ms: f64, n: u32| if n > 0 { ms / f64::from(n) } else { 0.0 };
    let rate = |ms: f64, n: u32| {
        if ms > 0.0 {
            1000.0 * f64::from(n) / ms
        } else {
            0.0
        }
    };
    let _ = write!(
        buf,
        ",\"timings\":{{\"cache_n\":{},\"prompt_n\":{},\"prompt_ms\":{:.3},\"prompt_per_token_ms\":{:.3},\"prompt_per_second\":{:.3},\"predicted_n\":{},\"predicted_ms\":{:.3},\"predicted_per_token_ms\":{:.3},\"predicted_per_second\":{:.3}}}",
        t.cache_n,
        t.prompt_n,
        t.prompt_ms,
        per(t.prompt_ms, t.prompt_n),
        rate(t.prompt_ms, t.prompt_n),
        t.predicted_n,
        t.predicted_ms,
        per(t.predicted_ms, t.predicted_n),
        rate(t.predicted_ms, t.predicted_n),
    );
}
