//! Request traces: timestamped requests read from a file, one at a time.
//!
//! Three formats (docs/workloads.md): Mooncake JSONL (`timestamp` in ms,
//! `input_length`, `output_length`, `hash_ids` = shared 512-token blocks),
//! BurstGPT CSV (`Timestamp` in s, `Model`, `Request tokens`, `Response
//! tokens`, `Total tokens`, `Log Type`) and our own JSONL (`timestamp` in s,
//! `input_tokens` or a literal `prompt`/`messages`, `output_tokens`, optional
//! `session_id`; an agent turn's messages, tools and waits: [`agent`]).
//! AIPerf's and AgentX's agent traces convert to ours ([`convert`]). The
//! reader is an iterator over a [`std::io::BufRead`]: the
//! file is streamed, never held whole (except under `--trace-sort`, see
//! [`sorted`]). Pure: the caller opens the file.
//!
//! Two stages: the row parser ([`rows::Rows`]: one line → one request on the
//! trace's own clock, BurstGPT's model/log-type filters, bad rows skipped
//! and counted under `--trace-skip-bad`), then the window ([`window::Window`]:
//! time origin, `--trace-start`, `--trace-duration`, `--trace-limit`,
//! `--trace-speed`, and the refusal of timestamps that go backwards).

pub mod agent;
pub mod burstgpt;
pub mod convert;
pub mod corpus;
pub mod jsonl;
pub mod mooncake;
pub mod prompt;
pub mod rows;
pub mod window;

use serde::{Deserialize, Serialize};

pub use rows::Rows;
pub use window::{Window, sorted};

/// Longest trace line read, bytes (16 MiB: a literal prompt of a few
/// million tokens); a longer one ends the reading with its line number.
pub const MAX_TRACE_LINE_BYTES: usize = 16 << 20;

/// Most input or output tokens one trace row may ask for (2²⁴, above every
/// model context of today). A row beyond it is a bad row at read time (with
/// its line; skipped under `--trace-skip-bad`); rows within it but beyond
/// the server's context are skipped by the replay before their prompt is
/// built.
pub const MAX_TRACE_ROW_TOKENS: u64 = 1 << 24;

/// Tokens per Mooncake `hash_ids` block.
pub const MOONCAKE_BLOCK_TOKENS: u64 = 512;

/// A trace file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake JSONL.
    Mooncake,
    /// BurstGPT CSV.
    Burstgpt,
    /// This tool's JSONL.
    Jsonl,
}

impl TraceFormat {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Burstgpt => "burstgpt",
            TraceFormat::Jsonl => "jsonl",
        }
    }

    /// Parses a `--trace-format` value.
    pub fn parse(s: &str) -> Option<TraceFormat> {
        match s {
            "mooncake" => Some(TraceFormat::Mooncake),
            "burstgpt" => Some(TraceFormat::Burstgpt),
            "jsonl" => Some(TraceFormat::Jsonl),
            _ => None,
        }
    }
}

/// Guesses the format from the first non-empty line: a JSON object with
/// `input_length`, or with `hash_ids` and no `output_tokens`, is Mooncake,
/// any other JSON object ours (which may carry `hash_ids` too), a line with
/// commas BurstGPT (its header or a data row).
pub fn detect(first_line: &str) -> Option<TraceFormat> {
    let line = first_line.trim();
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let o = v.as_object()?;
        return Some(
            if o.contains_key("input_length")
                || (o.contains_key("hash_ids") && !o.contains_key("output_tokens"))
            {
                TraceFormat::Mooncake
            } else {
                TraceFormat::Jsonl
            },
        );
    }
    line.contains(',').then_some(TraceFormat::Burstgpt)
}

/// One message of a trace row (`messages`): a role, and its text either
/// literal (`content`) or built by the tool (`tokens`); an assistant message
/// may carry its calls (`tool_calls`) and reasoning to pass back
/// (`reasoning_content`), a `tool` message the call it answers
/// (`tool_call_id`). Checked by [`agent::check_messages`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Literal text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Text of this many tokens, built by the tool (instead of `content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// An assistant message's calls, in the chat API's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<serde_json::Value>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An assistant message's reasoning, sent back with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// What a request sends.
#[derive(Debug, Clone, PartialEq)]
pub enum TracePrompt {
    /// A prompt of this many tokens, built by the tool.
    Tokens(u64),
    /// A literal prompt, sent unchanged as one user message.
    Text(String),
    /// Messages, sent in order (literal text as written, `tokens` built).
    Messages(Vec<TraceMessage>),
}

impl TracePrompt {
    /// Whether any of its text is literal (the tool did not build it, so
    /// it cannot say what it shares).
    pub fn literal(&self) -> bool {
        match self {
            TracePrompt::Tokens(_) => false,
            TracePrompt::Text(_) => true,
            TracePrompt::Messages(m) => m.iter().any(|m| m.content.is_some()),
        }
    }

    /// Tokens of the text the tool builds (a message's `tokens` summed).
    pub fn built_tokens(&self) -> u64 {
        match self {
            TracePrompt::Tokens(n) => *n,
            TracePrompt::Text(_) => 0,
            TracePrompt::Messages(m) => m
                .iter()
                .filter_map(|m| m.tokens)
                .fold(0, u64::saturating_add),
        }
    }
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// 1-based line of the file.
    pub line: u64,
    /// When to send it: seconds after the replay starts once the window
    /// applied it ([`Window`]); the trace's own clock in seconds before.
    pub at_s: f64,
    /// What to send.
    pub prompt: TracePrompt,
    /// Output tokens to ask for (`max_tokens`).
    pub output_tokens: u64,
    /// Mooncake's shared-block ids (empty elsewhere).
    pub hash_ids: Vec<u64>,
    /// The conversation it belongs to, when the trace says.
    pub session_id: Option<String>,
    /// An agent turn's tools and waits (our JSONL only; `None` when the
    /// row has none of them).
    pub agent: Option<Box<agent::AgentTurn>>,
}

impl TraceRequest {
    /// Whether the row offers tools or carries calls, their results or
    /// reasoning passed back: the chat API's shapes, sent with `--api chat`
    /// only.
    pub fn chat_only(&self) -> bool {
        let agent_parts = |m: &TraceMessage| {
            m.tool_calls.is_some() || m.tool_call_id.is_some() || m.reasoning_content.is_some()
        };
        self.agent.as_ref().is_some_and(|a| a.tools.is_some())
            || matches!(&self.prompt, TracePrompt::Messages(m) if m.iter().any(agent_parts))
    }

    /// Input tokens when the trace states them (not for literal prompts).
    pub fn input_tokens(&self) -> Option<u64> {
        match self.prompt {
            TracePrompt::Tokens(n) => Some(n),
            _ => None,
        }
    }
}

/// A row that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct TraceError {
    /// 1-based line of the file (0: the file as a whole).
    pub line: u64,
    /// Why, in one line.
    pub reason: String,
}

impl TraceError {
    /// An error at `line`.
    pub fn at(line: u64, reason: impl Into<String>) -> Self {
        Self {
            line,
            reason: reason.into(),
        }
    }
}

/// The filters and time scale of a replay (`--trace-*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceOptions {
    /// Time scale: 2 replays twice as fast.
    pub speed: f64,
    /// Trace seconds (from its first request) skipped at the start.
    pub start_s: f64,
    /// Trace seconds replayed after the start (`None`: to the end).
    pub duration_s: Option<f64>,
    /// Requests replayed at most (`None`: all).
    pub limit: Option<u64>,
    /// BurstGPT: keep only this `Model`.
    pub model: Option<String>,
    /// BurstGPT: keep only this `Log Type`.
    pub log_type: Option<String>,
    /// Count and skip unparsable rows instead of stopping.
    pub skip_bad: bool,
    /// Load the whole file and sort it by time (timestamps may go backwards).
    pub sort: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            speed: 1.0,
            start_s: 0.0,
            duration_s: None,
            limit: None,
            model: None,
            log_type: None,
            skip_bad: false,
            sort: false,
        }
    }
}

/// What the reader did with the file's rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceCounts {
    /// Non-empty data rows read (header excluded).
    pub rows: u64,
    /// Unparsable rows skipped (`--trace-skip-bad`).
    pub bad_skipped: u64,
    /// Rows left out by `--trace-model`/`--trace-log-type`, or BurstGPT rows
    /// of failed requests (0 response tokens).
    pub filtered: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_reads_the_first_line() {
        let m = r#"{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}"#;
        assert_eq!(detect(m), Some(TraceFormat::Mooncake));
        assert_eq!(
            detect(r#"{"timestamp": 0.5, "prompt": "hi", "output_tokens": 4}"#),
            Some(TraceFormat::Jsonl)
        );
        // ours may carry hash_ids (a converted session's first turn)
        assert_eq!(
            detect(
                r#"{"timestamp": 0, "input_tokens": 600, "output_tokens": 4, "hash_ids": [1, 2]}"#
            ),
            Some(TraceFormat::Jsonl)
        );
        assert_eq!(
            detect(r#"{"timestamp": 0, "hash_ids": [1], "output_length": 4}"#),
            Some(TraceFormat::Mooncake)
        );
        assert_eq!(
            detect("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"),
            Some(TraceFormat::Burstgpt)
        );
        assert_eq!(
            detect("5,ChatGPT,472,18,490,Conversation log"),
            Some(TraceFormat::Burstgpt)
        );
        assert_eq!(detect("hello"), None);
        assert_eq!(detect("{not json"), None);
        for f in [
            TraceFormat::Mooncake,
            TraceFormat::Burstgpt,
            TraceFormat::Jsonl,
        ] {
            assert_eq!(TraceFormat::parse(f.name()), Some(f));
        }
    }
}
