//! This tool's JSONL trace: one object per line with `timestamp` (seconds
//! from the trace's start), `output_tokens`, and either `input_tokens` (the
//! tool builds the prompt) or a literal `prompt` (one user message) or
//! `messages` (sent unchanged); optional `session_id` (a string or number)
//! and `hash_ids` (shared 512-token blocks, as Mooncake's).

use serde::Deserialize;
use serde_json::Value;

use super::{MOONCAKE_BLOCK_TOKENS, TraceError, TraceMessage, TracePrompt, TraceRequest};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    timestamp: f64,
    output_tokens: u64,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<TraceMessage>>,
    #[serde(default)]
    session_id: Option<Value>,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// One row.
pub fn parse(line_no: u64, line: &str) -> Result<TraceRequest, TraceError> {
    let r: Row = serde_json::from_str(line)
        .map_err(|e| TraceError::at(line_no, format!("not a trace row: {e}")))?;
    let bad = |why: &str| Err(TraceError::at(line_no, why));
    if !r.timestamp.is_finite() || r.timestamp < 0.0 {
        return bad("timestamp is not a time");
    }
    if r.output_tokens == 0 {
        return bad("output_tokens must be at least 1");
    }
    let prompt = match (r.input_tokens, r.prompt, r.messages) {
        (Some(0), None, None) => return bad("input_tokens must be at least 1"),
        (Some(n), None, None) => TracePrompt::Tokens(n),
        (None, Some(p), None) => TracePrompt::Text(p),
        (None, None, Some(m)) if !m.is_empty() => TracePrompt::Messages(m),
        _ => return bad("needs exactly one of input_tokens, prompt, messages (non-empty)"),
    };
    if let (TracePrompt::Tokens(n), false) = (&prompt, r.hash_ids.is_empty())
        && r.hash_ids.len() as u64 != n.div_ceil(MOONCAKE_BLOCK_TOKENS)
    {
        return bad("hash_ids must have one id per 512 input tokens");
    }
    let session_id = match r.session_id {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return bad("session_id must be a string or a number"),
    };
    Ok(TraceRequest {
        line: line_no,
        at_s: r.timestamp,
        prompt,
        output_tokens: r.output_tokens,
        hash_ids: r.hash_ids,
        session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_literal_prompts_and_sessions() {
        let r = parse(
            1,
            r#"{"timestamp": 0.25, "input_tokens": 90, "output_tokens": 4, "session_id": 7}"#,
        )
        .unwrap();
        assert_eq!((r.at_s, r.input_tokens()), (0.25, Some(90)));
        assert_eq!(r.session_id.as_deref(), Some("7"));
        let r = parse(
            2,
            r#"{"timestamp": 1, "prompt": "Say hi", "output_tokens": 4}"#,
        )
        .unwrap();
        assert_eq!(r.prompt, TracePrompt::Text("Say hi".into()));
        let r = parse(
            3,
            r#"{"timestamp": 1, "messages": [{"role": "user", "content": "Hi"}], "output_tokens": 4, "session_id": "a"}"#,
        )
        .unwrap();
        assert!(matches!(r.prompt, TracePrompt::Messages(ref m) if m[0].content == "Hi"));
        for bad in [
            r#"{"timestamp": 1, "output_tokens": 4}"#,
            r#"{"timestamp": 1, "prompt": "x", "input_tokens": 3, "output_tokens": 4}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 0}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 2, "colour": 1}"#,
            r#"{"timestamp": -1, "prompt": "x", "output_tokens": 2}"#,
            "not json",
        ] {
            assert_eq!(parse(5, bad).unwrap_err().line, 5, "{bad}");
        }
    }
}
