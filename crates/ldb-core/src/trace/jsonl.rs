//! This tool's JSONL trace: one object per line with `timestamp` (seconds
//! from the trace's start), `output_tokens`, and either `input_tokens` (the
//! tool builds the prompt) or a literal `prompt` (one user message) or
//! `messages` (each literal or built, any role: `agent.rs`); optional
//! `session_id` (a string or number), `hash_ids` (shared 512-token blocks,
//! as Mooncake's), and an agent turn's `tools`, `tool_choice`,
//! `think_time` and `tool_time`.

use serde::Deserialize;
use serde_json::Value;

use super::agent::{self, AgentTurn};
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
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    tool_choice: Option<String>,
    #[serde(default)]
    think_time: Option<f64>,
    #[serde(default)]
    tool_time: Option<f64>,
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
        (None, None, Some(m)) => {
            agent::check_messages(&m).map_err(|e| TraceError::at(line_no, e))?;
            TracePrompt::Messages(m)
        }
        _ => return bad("needs exactly one of input_tokens, prompt, messages"),
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
    let agent = agent_turn(&prompt, r.tools, r.tool_choice, (r.think_time, r.tool_time))
        .map_err(|e| TraceError::at(line_no, e))?;
    Ok(TraceRequest {
        line: line_no,
        at_s: r.timestamp,
        prompt,
        output_tokens: r.output_tokens,
        hash_ids: r.hash_ids,
        session_id,
        agent,
    })
}

/// The row's agent extras, checked; `None` when it has none.
fn agent_turn(
    prompt: &TracePrompt,
    tools: Option<Value>,
    choice: Option<String>,
    (think, tool): (Option<f64>, Option<f64>),
) -> Result<Option<Box<AgentTurn>>, String> {
    let think_time = agent::seconds("think_time", think)?;
    let tool_time = agent::seconds("tool_time", tool)?;
    let carries_result =
        matches!(prompt, TracePrompt::Messages(m) if m.iter().any(|m| m.role == "tool"));
    if tool_time.is_some() && !carries_result {
        return Err("tool_time needs a tool message (the result the tool ran for)".into());
    }
    let tools = agent::tools(tools, choice.as_deref())?;
    let turn = AgentTurn {
        tools,
        think_time,
        tool_time,
    };
    Ok((turn != AgentTurn::default()).then(|| Box::new(turn)))
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
        assert!(
            matches!(r.prompt, TracePrompt::Messages(ref m) if m[0].content.as_deref() == Some("Hi"))
        );
        assert!(r.prompt.literal() && r.agent.is_none());
        for bad in [
            r#"{"timestamp": 1, "output_tokens": 4}"#,
            r#"{"timestamp": 1, "prompt": "x", "input_tokens": 3, "output_tokens": 4}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 0}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 2, "colour": 1}"#,
            r#"{"timestamp": 1, "messages": [], "output_tokens": 2}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 2, "think_time": -1}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 2, "tool_time": 1}"#,
            r#"{"timestamp": 1, "prompt": "x", "output_tokens": 2, "tools": [{"nom": 1}]}"#,
            r#"{"timestamp": 1, "messages": [{"role": "user", "text": "x"}], "output_tokens": 2}"#,
            r#"{"timestamp": -1, "prompt": "x", "output_tokens": 2}"#,
            "not json",
        ] {
            assert_eq!(parse(5, bad).unwrap_err().line, 5, "{bad}");
        }
    }

    #[test]
    fn an_agent_turn_carries_its_messages_tools_and_waits() {
        let line = r#"{"timestamp": 2, "session_id": "s", "output_tokens": 40,
            "messages": [
              {"role": "assistant", "tokens": 12, "reasoning_content": "look first",
               "tool_calls": [{"id": "c1", "type": "function",
                               "function": {"name": "grep", "arguments": "{\"q\":\"x\"}"}}]},
              {"role": "tool", "tool_call_id": "c1", "tokens": 300}],
            "tools": [{"name": "grep", "input_schema": {"type": "object"}}],
            "tool_choice": "auto", "think_time": 0.5, "tool_time": 1.5}"#
            .replace('\n', " ");
        let r = parse(9, &line).unwrap();
        assert!(!r.prompt.literal());
        assert_eq!(r.prompt.built_tokens(), 312);
        let a = r.agent.as_deref().unwrap();
        assert_eq!(a.wait(), Some(2.0));
        assert_eq!(a.tools.as_ref().unwrap().names(), ["grep"]);
        let TracePrompt::Messages(m) = &r.prompt else {
            panic!("messages")
        };
        assert_eq!(m[0].reasoning_content.as_deref(), Some("look first"));
        assert_eq!(m[1].tool_call_id.as_deref(), Some("c1"));
        // every malformed agent row is one error naming its line
        let e = parse(4, &line.replace("\"c1\", \"tokens\"", "\"c2\", \"tokens\""));
        assert_eq!(e.unwrap_err().line, 4);
    }
}
