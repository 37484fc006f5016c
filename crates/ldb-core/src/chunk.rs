//! One streamed OpenAI-style chunk, reduced to what the measurement needs.
//!
//! Handles the chat (`delta.content`, `delta.reasoning`, `delta.reasoning_content`,
//! `delta.tool_calls`) and completions (`text`) shapes of vLLM, SGLang and
//! llama.cpp, usage on every chunk (continuous usage) or on a final
//! `choices: []` chunk, mid-stream `error` objects, and llama.cpp `timings`.
//! Strings are borrowed from the payload where JSON escaping allows.

use std::borrow::Cow;

use serde::Deserialize;

mod fast;

/// Which output channel a chunk's text belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Channel {
    /// No text and no tool call.
    #[default]
    None,
    /// `delta.reasoning` / `delta.reasoning_content`: thinking, not shown as the answer.
    Reasoning,
    /// `delta.content` or completions `text`: the answer.
    Content,
    /// Reasoning and content (or a tool call and text) in one delta: the
    /// split of its tokens is unknown.
    Mixed,
    /// `delta.tool_calls[i].function` name or argument fragments: a call the
    /// client is asked to run, counted on a channel of its own.
    ToolCall,
}

/// What one `data:` payload says.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkInfo<'a> {
    /// Chunk id (the request id for SGLang aborts).
    pub id: Option<Cow<'a, str>>,
    /// Visible text of this chunk (reasoning first, then content).
    pub text: Option<Cow<'a, str>>,
    /// True when the chunk carries tokens: text, or tool calls.
    pub has_tokens: bool,
    /// The channel of the chunk's text (`None` without text).
    pub channel: Channel,
    /// The first function name a tool-call delta of this chunk carried.
    pub tool_call_name: Option<Cow<'a, str>>,
    /// The chunk has at least one choice, so it belongs to the token stream.
    /// The final usage-only chunk (`choices: []`) does not: its usage counts
    /// tokens that earlier chunks delivered.
    pub has_choices: bool,
    /// Cumulative completion tokens, when the chunk carries usage.
    pub completion_tokens: Option<u64>,
    /// Usage was present but not a plausible count (negative, fractional,
    /// absurdly large); `completion_tokens` is then `None`.
    pub usage_invalid: bool,
    /// Cumulative reasoning tokens, when usage details report them.
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens, when the chunk carries usage.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the cache, when reported.
    pub cached_tokens: Option<u64>,
    /// A finish reason was set on a choice.
    pub finish_reason: Option<Cow<'a, str>>,
    /// Error message of a mid-stream error object.
    pub error: Option<String>,
    /// llama.cpp per-request timings (last chunk).
    pub timings: Option<Timings>,
}

/// llama.cpp's `timings` object.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize, serde::Serialize)]
pub struct Timings {
    /// Prompt tokens evaluated (excluding cached ones).
    #[serde(default)]
    pub prompt_n: f64,
    /// Prompt evaluation time in ms.
    #[serde(default)]
    pub prompt_ms: f64,
    /// Tokens generated.
    #[serde(default)]
    pub predicted_n: f64,
    /// Generation time in ms.
    #[serde(default)]
    pub predicted_ms: f64,
    /// Prompt tokens reused from the cache.
    #[serde(default)]
    pub cache_n: f64,
}

/// A payload that is not JSON (or not an object).
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("malformed stream chunk: {0}")]
pub struct ChunkError(pub String);

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Choices<'a>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    timings: Option<Timings>,
    // Flat (pre-0.10 vLLM, SGLang) error shape: {"object":"error","message":...}
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<String>,
}

/// The `choices` array folded while it is read: no vector of choices is
/// built per chunk (this runs once per token).
#[derive(Default)]
struct Choices<'a> {
    any: bool,
    finish_reason: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
    channel: Channel,
    has_tokens: bool,
    tool_call_name: Option<Cow<'a, str>>,
}

impl<'a> Choices<'a> {
    fn fold(&mut self, choice: RawChoice<'a>) {
        self.any = true;
        if let Some(f) = choice.finish_reason {
            self.finish_reason = Some(f);
        }
        let mut text = non_empty(choice.text);
        let mut channel = if text.is_some() {
            Channel::Content
        } else {
            Channel::None
        };
        if let Some(d) = choice.delta {
            let reasoning = non_empty(d.reasoning).or(non_empty(d.reasoning_content));
            let content = non_empty(d.content);
            (text, channel) = match (reasoning, content) {
                (Some(r), Some(c)) => (Some(Cow::Owned(format!("{r}{c}"))), Channel::Mixed),
                (Some(r), None) => (Some(r), Channel::Reasoning),
                (None, Some(c)) => (Some(c), Channel::Content),
                (None, None) => (text, channel),
            };
            if let Some(calls) = d.tool_calls {
                let (name, args) = tool_call_parts(calls);
                if name.is_some() || args.is_some() {
                    self.tool_call_name = self.tool_call_name.take().or(name);
                    if channel == Channel::None {
                        (text, channel) = (args, Channel::ToolCall);
                    } else {
                        // text and a call in one delta: like reasoning with
                        // content, the split of its tokens is unknown
                        channel = Channel::Mixed;
                    }
                }
            }
        }
        if channel != Channel::None {
            self.has_tokens = true;
            self.channel = channel;
        }
        if text.is_some() {
            self.text = text;
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fold<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Fold<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Choices<'a>, A::Error> {
                let mut acc = Choices::default();
                while let Some(choice) = seq.next_element::<RawChoice<'a>>()? {
                    acc.fold(choice);
                }
                Ok(acc)
            }
        }
        d.deserialize_seq(Fold(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(borrow, default)]
    delta: Option<RawDelta<'a>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<RawToolCall<'a>>>,
}

/// One entry of `delta.tool_calls`. `index` is required: it says which call
/// a fragment continues, and a delta without it cannot be attributed (the
/// request fails as a bad response, with serde's reason).
#[derive(Deserialize)]
struct RawToolCall<'a> {
    #[serde(rename = "index")]
    _index: u64,
    #[serde(borrow, default)]
    function: Option<RawFunction<'a>>,
}

#[derive(Deserialize)]
struct RawFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

/// The first name and the argument fragments (joined) of a delta's calls;
/// `None` for what is absent or empty (vLLM opens a call with `""` arguments).
fn tool_call_parts(calls: Vec<RawToolCall<'_>>) -> (Option<Cow<'_, str>>, Option<Cow<'_, str>>) {
    let (mut name, mut args): (Option<Cow<'_, str>>, Option<Cow<'_, str>>) = (None, None);
    for f in calls.into_iter().filter_map(|c| c.function) {
        name = name.or(non_empty(f.name));
        args = match (args, non_empty(f.arguments)) {
            (Some(a), Some(b)) => Some(Cow::Owned(format!("{a}{b}"))),
            (a, b) => a.or(b),
        };
    }
    (name, args)
}

// Counts are read as any JSON number and checked afterwards, so that a
// server sending `-3` or `1.5` gets the chunk counted by its text (and the
// anomaly noted) instead of failing the whole request as malformed.
#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    completion_tokens: Option<f64>,
    #[serde(default)]
    prompt_tokens: Option<f64>,
    #[serde(default)]
    prompt_tokens_details: Option<RawDetails>,
    #[serde(default)]
    completion_tokens_details: Option<RawCompletionDetails>,
}

#[derive(Deserialize)]
struct RawDetails {
    #[serde(default)]
    cached_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct RawCompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<f64>,
}

/// Largest token count taken as real; beyond it a count is an anomaly.
const MAX_PLAUSIBLE_TOKENS: f64 = 1e9;

/// A token count, or `Err` when it is not a plausible one.
pub(crate) fn count(v: Option<f64>) -> Result<Option<u64>, ()> {
    match v {
        None => Ok(None),
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= MAX_PLAUSIBLE_TOKENS => Ok(Some(x as u64)),
        Some(_) => Err(()),
    }
}

fn non_empty(s: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    s.filter(|t| !t.is_empty())
}

/// Parse one `data:` payload (not `[DONE]`).
///
/// The usual chunk is read by a strict hand-written scanner ([`fast`]);
/// anything it does not fully understand, errors included, by serde_json.
pub fn parse_chunk(payload: &[u8]) -> Result<ChunkInfo<'_>, ChunkError> {
    let raw = match fast::raw(payload) {
        Some(raw) => raw,
        None => serde_raw(payload)?,
    };
    Ok(reduce(raw))
}

/// Parse one payload with serde_json alone (what the fast path must match).
#[cfg(test)]
fn parse_chunk_serde(payload: &[u8]) -> Result<ChunkInfo<'_>, ChunkError> {
    serde_raw(payload).map(reduce)
}

fn serde_raw(payload: &[u8]) -> Result<Raw<'_>, ChunkError> {
    serde_json::from_slice(payload).map_err(|e| ChunkError(e.to_string()))
}

/// What a parsed payload says, in the shape the measurement uses.
fn reduce(raw: Raw<'_>) -> ChunkInfo<'_> {
    let mut info = ChunkInfo {
        id: raw.id,
        timings: raw.timings,
        ..ChunkInfo::default()
    };
    if let Some(err) = raw.error {
        info.error = Some(error_message(&err));
    } else if raw.object.as_deref() == Some("error") {
        info.error = Some(raw.message.unwrap_or_else(|| "error".into()));
    }
    if let Some(u) = raw.usage {
        match count(u.completion_tokens) {
            Ok(c) => info.completion_tokens = c,
            Err(()) => info.usage_invalid = true,
        }
        info.prompt_tokens = count(u.prompt_tokens).ok().flatten();
        info.cached_tokens = count(u.prompt_tokens_details.and_then(|d| d.cached_tokens))
            .ok()
            .flatten();
        info.reasoning_tokens = count(u.completion_tokens_details.and_then(|d| d.reasoning_tokens))
            .ok()
            .flatten();
    }
    if let Some(c) = raw.choices {
        info.has_choices = c.any;
        info.finish_reason = c.finish_reason;
        info.has_tokens = c.has_tokens;
        info.channel = c.channel;
        info.text = c.text;
        info.tool_call_name = c.tool_call_name;
    }
    info
}

/// True for the `[DONE]` sentinel.
pub fn is_done(payload: &[u8]) -> bool {
    payload.trim_ascii() == b"[DONE]"
}

/// One line describing an error object of any engine's shape.
pub fn error_message(v: &serde_json::Value) -> String {
    let inner = v.get("error").unwrap_or(v);
    let msg = inner
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| inner.as_str().map(str::to_string))
        .unwrap_or_else(|| inner.to_string());
    let first_line = msg.lines().next().unwrap_or("").trim();
    let mut out: String = first_line.chars().take(300).collect();
    if let Some(t) = inner.get("type").and_then(|t| t.as_str()) {
        out = format!("{out} ({t})");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_role_content_usage_chunks() {
        let role = br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":78,"completion_tokens":0,"total_tokens":78}}"#;
        let c = parse_chunk(role).unwrap();
        assert!(!c.has_tokens);
        assert_eq!(c.completion_tokens, Some(0));
        assert_eq!(c.prompt_tokens, Some(78));
        assert_eq!(c.id.as_deref(), Some("chatcmpl-1"));

        let content = br#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel\"lo"}}],"usage":{"prompt_tokens":78,"completion_tokens":3,"total_tokens":81}}"#;
        let c = parse_chunk(content).unwrap();
        assert!(c.has_tokens);
        assert_eq!(c.text.as_deref(), Some("Hel\"lo"));
        assert_eq!(c.completion_tokens, Some(3));

        let usage_only = br#"{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        let c = parse_chunk(usage_only).unwrap();
        assert!(!c.has_tokens);
        assert_eq!(c.cached_tokens, Some(4));
    }

    #[test]
    fn reasoning_fields_and_completions_text() {
        let r = br#"{"choices":[{"delta":{"reasoning":"think"}}]}"#;
        assert_eq!(parse_chunk(r).unwrap().text.as_deref(), Some("think"));
        let r = br#"{"choices":[{"delta":{"reasoning_content":"a","content":null}}]}"#;
        assert_eq!(parse_chunk(r).unwrap().text.as_deref(), Some("a"));
        let t = br#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"xy","finish_reason":null}]}"#;
        assert_eq!(parse_chunk(t).unwrap().text.as_deref(), Some("xy"));
    }

    #[test]
    fn sglang_null_fields_and_finish_chunk() {
        let c = br#"{"id":"abc","choices":[{"index":0,"delta":{"role":null,"content":"x","reasoning_content":null,"tool_calls":null},"finish_reason":null,"matched_stop":null}],"usage":null}"#;
        let c = parse_chunk(c).unwrap();
        assert!(c.has_tokens);
        assert_eq!(c.completion_tokens, None);
        let fin = br#"{"id":"abc","choices":[{"index":0,"delta":{"content":null},"finish_reason":"length","matched_stop":null}]}"#;
        let f = parse_chunk(fin).unwrap();
        assert!(!f.has_tokens);
        assert_eq!(f.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn llamacpp_timings_and_errors() {
        let last = br#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"timings":{"cache_n":0,"prompt_n":12,"prompt_ms":30.5,"predicted_n":16,"predicted_ms":80.0,"prompt_per_second":393.4}}"#;
        let t = parse_chunk(last).unwrap().timings.unwrap();
        assert_eq!(t.prompt_n, 12.0);
        assert_eq!(t.predicted_ms, 80.0);
        let nested =
            br#"{"error":{"message":"too long\nmore","type":"BadRequestError","code":400}}"#;
        assert_eq!(
            parse_chunk(nested).unwrap().error.as_deref(),
            Some("too long (BadRequestError)")
        );
        let flat = br#"{"object":"error","message":"bad","type":"Bad Request","code":400}"#;
        assert_eq!(parse_chunk(flat).unwrap().error.as_deref(), Some("bad"));
        assert!(parse_chunk(b"{not json").is_err());
        assert!(is_done(b"[DONE]"));
    }

    #[test]
    fn choices_channels_and_implausible_usage() {
        // vLLM: a token inside a multi-byte character, empty delta, usage grows.
        let empty = br#"{"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}],"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}"#;
        let c = parse_chunk(empty).unwrap();
        assert!(c.has_choices && !c.has_tokens);
        assert_eq!((c.channel, c.completion_tokens), (Channel::None, Some(7)));
        let usage_only = br#"{"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":3}}}"#;
        let c = parse_chunk(usage_only).unwrap();
        assert!(!c.has_choices);
        assert_eq!(c.reasoning_tokens, Some(3));
        let mixed = br#"{"choices":[{"delta":{"reasoning_content":"a","content":"b"}}]}"#;
        assert_eq!(parse_chunk(mixed).unwrap().channel, Channel::Mixed);
        // a call's opening without name or arguments carries no token
        let tool = br#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#;
        assert_eq!(parse_chunk(tool).unwrap().channel, Channel::None);
        for bad in [
            br#"{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":-3}}"#
                .as_slice(),
            br#"{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":1.5}}"#,
            br#"{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":1e15}}"#,
        ] {
            let c = parse_chunk(bad).unwrap();
            assert!(c.usage_invalid && c.completion_tokens.is_none() && c.has_tokens);
        }
    }

    #[test]
    fn tool_call_fragments_are_their_own_channel() {
        // vLLM opens a call with its name and empty arguments, then streams
        // argument fragments; the name counts as a token of the call.
        let open = br#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#;
        let c = parse_chunk(open).unwrap();
        assert_eq!((c.channel, c.has_tokens), (Channel::ToolCall, true));
        assert_eq!(c.tool_call_name.as_deref(), Some("get_weather"));
        assert_eq!(c.text, None);
        let args = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}}]}"#;
        let c = parse_chunk(args).unwrap();
        assert_eq!(c.channel, Channel::ToolCall);
        assert_eq!(c.text.as_deref(), Some("{\"city\": "));
        assert_eq!(c.tool_call_name, None);
        // two calls in one delta: their fragments are joined
        let two = br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"a"}},{"index":1,"function":{"name":"f","arguments":"b"}}]}}]}"#;
        let c = parse_chunk(two).unwrap();
        assert_eq!(
            (c.text.as_deref(), c.tool_call_name.as_deref()),
            (Some("ab"), Some("f"))
        );
        // text with a call in one delta: the split is unknown
        let mixed = br#"{"choices":[{"delta":{"content":"x","tool_calls":[{"index":0,"function":{"arguments":"a"}}]}}]}"#;
        assert_eq!(parse_chunk(mixed).unwrap().channel, Channel::Mixed);
        let fin = br#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#;
        let c = parse_chunk(fin).unwrap();
        assert_eq!(
            (c.channel, c.finish_reason.as_deref()),
            (Channel::None, Some("tool_calls"))
        );
    }

    #[test]
    fn malformed_tool_call_deltas_fail_with_a_reason() {
        for (bad, why) in [
            (br#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a"}}]}}]}"#.as_slice(), "index"),
            (br#"{"choices":[{"delta":{"tool_calls":{"index":0}}}]}"#, "sequence"),
            (br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":7}}]}}]}"#, "string"),
            (br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":"f"}]}}]}"#, "RawFunction"),
            (br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"#, "EOF"),
        ] {
            let e = parse_chunk(bad).unwrap_err();
            assert!(e.0.contains(why), "{e} for {}", String::from_utf8_lossy(bad));
        }
    }
}
