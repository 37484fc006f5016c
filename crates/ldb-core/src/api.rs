//! The request APIs a run can speak (`--api`): where each lives, how a
//! request body is written for it from one description of the request, and
//! how its streamed events are read into the [`ChunkInfo`] the chat parser
//! gives, so that tokens, TTFT, gaps, usage and cached tokens keep one
//! definition whatever the API.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

pub(crate) use crate::chunk::count;
use crate::chunk::{ChunkError, ChunkInfo, parse_chunk};
use crate::prompt::Message;

mod messages;
mod responses;

/// An inference API.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    #[default]
    Chat,
    /// OpenAI (legacy) Completions (`/v1/completions`): prompt text in, `text` out.
    Completions,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Anthropic Messages (`/v1/messages`).
    Messages,
}

impl Api {
    /// Every API, in the order discovery probes them.
    pub const ALL: [Api; 4] = [Api::Chat, Api::Completions, Api::Responses, Api::Messages];

    /// The name `--api` takes and results record.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }

    /// The route a streamed request is posted to.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
        }
    }

    /// The body field that carries the output-token limit.
    pub fn limit_field(self) -> &'static str {
        match self {
            Api::Responses => "max_output_tokens",
            Api::Chat | Api::Completions | Api::Messages => "max_tokens",
        }
    }

    /// The limit the body will carry for a run's `max_tokens` (`None` or 0:
    /// no limit), or `None` when the field is left out: every API may leave
    /// it out but Messages, which sends [`MESSAGES_NO_LIMIT`].
    pub fn limit_sent(self, max_tokens: Option<u64>) -> Option<u64> {
        let set = max_tokens.filter(|n| *n > 0);
        match self {
            Api::Messages => Some(set.unwrap_or(MESSAGES_NO_LIMIT)),
            Api::Chat | Api::Completions | Api::Responses => set,
        }
    }

    /// The streamed request body for `r`.
    pub fn body(self, r: &RequestInput<'_>) -> Value {
        let mut b = Map::new();
        b.insert("model".into(), r.model.into());
        b.insert("stream".into(), true.into());
        match self {
            Api::Chat => {
                b.insert("messages".into(), json!(r.messages));
                usage_options(&mut b, r);
                limit(&mut b, self.limit_field(), r.max_tokens);
            }
            Api::Completions => {
                b.insert("prompt".into(), prompt_text(r.messages).into());
                usage_options(&mut b, r);
                limit(&mut b, self.limit_field(), r.max_tokens);
            }
            Api::Responses => {
                // Usage always comes in `response.completed`: nothing to ask.
                b.insert("input".into(), json!(r.messages));
                limit(&mut b, self.limit_field(), r.max_tokens);
            }
            Api::Messages => {
                let system = system_text(r.messages);
                if !system.is_empty() {
                    b.insert("system".into(), system.into());
                }
                let turns: Vec<&Message> =
                    r.messages.iter().filter(|m| m.role != "system").collect();
                b.insert("messages".into(), json!(turns));
                // The Messages API requires a limit; "none" is the largest
                // count a server takes as real.
                let n = self.limit_sent(r.max_tokens).unwrap_or(MESSAGES_NO_LIMIT);
                b.insert(self.limit_field().into(), n.into());
            }
        }
        if r.ignore_eos {
            b.insert("ignore_eos".into(), true.into());
        }
        if let Some(t) = r.temperature {
            b.insert("temperature".into(), t.into());
        }
        if let Some(p) = r.top_p {
            b.insert("top_p".into(), p.into());
        }
        if let Some(extra) = r.extra {
            for (k, v) in extra {
                b.insert(k.clone(), v.clone());
            }
        }
        Value::Object(b)
    }

    /// [`Api::body`] as bytes to send.
    pub fn body_bytes(self, r: &RequestInput<'_>) -> Vec<u8> {
        serde_json::to_vec(&self.body(r)).unwrap_or_default()
    }

    /// Read one SSE `data:` payload of this API's stream (not `[DONE]`).
    pub fn parse_event(self, payload: &[u8]) -> Result<ApiEvent<'_>, ChunkError> {
        match self {
            Api::Chat | Api::Completions => parse_chunk(payload).map(ApiEvent::chunk),
            Api::Responses => responses::parse(payload),
            Api::Messages => messages::parse(payload),
        }
    }
}

/// `max_tokens` sent on the Messages API when the run sets no limit (the
/// API has no way to leave it out).
pub const MESSAGES_NO_LIMIT: u64 = 32_768;

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Api, String> {
        Api::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            format!("unknown API {s:?} (expected chat, completions, responses or messages)")
        })
    }
}

/// One request, described apart from the API that will carry it. Callers
/// fill what they use and leave the rest at its default; a new request
/// feature (tool definitions, say) is a new field here and a rule per API
/// in [`Api::body`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestInput<'a> {
    /// Served model name.
    pub model: &'a str,
    /// The conversation; completions send its contents as one prompt text.
    pub messages: &'a [Message],
    /// Output token limit; `None` (or 0) leaves it to the server where the
    /// API allows.
    pub max_tokens: Option<u64>,
    /// Ask for usage on every chunk (chat and completions; vLLM's
    /// `continuous_usage_stats`).
    pub continuous_usage: bool,
    /// Send `ignore_eos: true` (vLLM, SGLang and the simulator read it;
    /// vLLM's Messages route drops it).
    pub ignore_eos: bool,
    /// Temperature, if any.
    pub temperature: Option<f64>,
    /// Nucleus sampling, if any.
    pub top_p: Option<f64>,
    /// Fields set on top of the body last (a task's request overrides).
    pub extra: Option<&'a Map<String, Value>>,
}

/// Chat and completions: usage at the end, or on every chunk.
fn usage_options(b: &mut Map<String, Value>, r: &RequestInput<'_>) {
    let mut o = json!({"include_usage": true});
    if r.continuous_usage {
        o["continuous_usage_stats"] = json!(true);
    }
    b.insert("stream_options".into(), o);
}

fn limit(b: &mut Map<String, Value>, key: &str, n: Option<u64>) {
    if let Some(n) = n.filter(|n| *n > 0) {
        b.insert(key.into(), n.into());
    }
}

/// The completions prompt: the messages' contents, one blank line apart
/// (no chat template is applied by that route).
pub fn prompt_text(msgs: &[Message]) -> String {
    let parts: Vec<&str> = msgs.iter().map(|m| m.content.as_str()).collect();
    parts.join("\n\n")
}

/// The Messages API's top-level `system`: the system messages' contents.
fn system_text(msgs: &[Message]) -> String {
    let parts: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == "system")
        .map(|m| m.content.as_str())
        .collect();
    parts.join("\n\n")
}

/// One streamed event of any API, read into the chat measurement's terms.
#[derive(Debug, Default, PartialEq)]
pub struct ApiEvent<'a> {
    /// What the event says about tokens, usage and errors.
    pub chunk: ChunkInfo<'a>,
    /// The API's last event (`response.completed`, `message_stop`): the
    /// request is complete, as at chat's `[DONE]`.
    pub end: bool,
    /// An event type this client does not know: counted and ignored.
    pub unknown: bool,
}

impl<'a> ApiEvent<'a> {
    fn chunk(chunk: ChunkInfo<'a>) -> Self {
        ApiEvent {
            chunk,
            ..ApiEvent::default()
        }
    }
}

#[cfg(test)]
mod tests;
