//! What agent traces add to a row of our JSONL: messages of every role
//! (assistant calls, tool results, reasoning passed back), the tools a turn
//! offers, and its waits (the user's think time, the tool's run time).
//! Here: the turn's extras and the checks that make a malformed row one
//! line naming what is wrong (docs/workloads.md, "Agent traces").

use serde_json::Value;

use super::TraceMessage;
use crate::tools::{ToolChoice, ToolSet};

/// An agent turn's extras.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTurn {
    /// `tools` (and `tool_choice`, default `auto`), sent with the turn.
    pub tools: Option<ToolSet>,
    /// `think_time`: seconds after the previous reply ended before this
    /// turn (under `--trace-sessions`).
    pub think_time: Option<f64>,
    /// `tool_time`: seconds the tool ran before this turn, which carries
    /// its result (under `--trace-sessions`, added to the think time).
    pub tool_time: Option<f64>,
}

impl AgentTurn {
    /// Seconds after the previous reply's end the turn is due, when the row
    /// states a wait (else it is due at its timestamp).
    pub fn wait(&self) -> Option<f64> {
        match (self.think_time, self.tool_time) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        }
    }
}

/// A wait in seconds: finite and not negative.
pub fn seconds(key: &str, v: Option<f64>) -> Result<Option<f64>, String> {
    match v {
        Some(s) if !s.is_finite() || s < 0.0 => {
            Err(format!("{key} must be seconds (a number ≥ 0)"))
        }
        other => Ok(other),
    }
}

/// The row's tools and choice, checked as `--tools FILE` is.
pub fn tools(tools: Option<Value>, choice: Option<&str>) -> Result<Option<ToolSet>, String> {
    let choice = match choice {
        None => ToolChoice::Auto,
        Some(c) => ToolChoice::parse(c).map_err(|e| format!("tool_choice {e}"))?,
    };
    match tools {
        None if choice != ToolChoice::Auto => Err("tool_choice needs tools".into()),
        None => Ok(None),
        Some(v) => ToolSet::from_value(v, choice)
            .map(Some)
            .map_err(|e| format!("tools {e}")),
    }
}

/// Checks a row's messages: known roles; each message's text literal or
/// built (not both; an assistant message with calls may have neither);
/// calls only on assistant messages and well formed; every `tool` message
/// answering a call, made by an assistant message before it in the row,
/// or (when the row opens with tool messages) by the previous reply.
pub fn check_messages(msgs: &[TraceMessage]) -> Result<(), String> {
    if msgs.is_empty() {
        return Err("messages is empty".into());
    }
    let mut calls: Vec<&str> = Vec::new();
    let mut leading = true;
    for (i, m) in msgs.iter().enumerate() {
        let at = |why: String| format!("message {}: {why}", i + 1);
        check_one(m).map_err(at)?;
        if m.role != "tool" {
            leading = false;
        }
        if let Some(c) = &m.tool_calls {
            calls.extend(call_ids(c).map_err(at)?);
        }
        if let Some(id) = &m.tool_call_id
            && !leading
            && !calls.contains(&id.as_str())
        {
            return Err(at(format!(
                "tool_call_id {id:?} answers no call of an assistant message before it"
            )));
        }
    }
    Ok(())
}

/// One message's own keys.
fn check_one(m: &TraceMessage) -> Result<(), String> {
    let role = m.role.as_str();
    if !matches!(role, "system" | "user" | "assistant" | "tool") {
        return Err(format!(
            "role {role:?} is not system, user, assistant or tool"
        ));
    }
    match (&m.content, m.tokens) {
        (Some(_), Some(_)) => return Err("has both content and tokens".into()),
        (None, None) if !(role == "assistant" && m.tool_calls.is_some()) => {
            return Err("needs content or tokens".into());
        }
        (_, Some(0)) => return Err("tokens must be at least 1".into()),
        _ => {}
    }
    if role != "assistant" && m.tool_calls.is_some() {
        return Err("only an assistant message carries tool_calls".into());
    }
    if role != "assistant" && m.reasoning_content.is_some() {
        return Err("only an assistant message carries reasoning_content".into());
    }
    match (role, &m.tool_call_id) {
        ("tool", None) => Err("a tool message needs tool_call_id".into()),
        ("tool", Some(id)) if id.trim().is_empty() => Err("tool_call_id is empty".into()),
        ("tool", Some(_)) | (_, None) => Ok(()),
        _ => Err("only a tool message carries tool_call_id".into()),
    }
}

/// The ids of an assistant message's calls: a non-empty array of
/// `{"id", "type": "function", "function": {"name", "arguments"}}` with a
/// string id and name and the arguments as a JSON string.
fn call_ids(calls: &Value) -> Result<Vec<&str>, String> {
    let Some(list) = calls.as_array().filter(|l| !l.is_empty()) else {
        return Err("tool_calls must be a non-empty array".into());
    };
    let mut ids = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let bad = |why: &str| Err(format!("tool call {}: {why}", i + 1));
        let Some(id) = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return bad("needs a string id");
        };
        if c.get("type").is_some_and(|t| t != "function") {
            return bad("type must be \"function\"");
        }
        let f = &c["function"];
        if f.get("name")
            .and_then(Value::as_str)
            .is_none_or(|n| n.trim().is_empty())
        {
            return bad("function needs a name");
        }
        if f.get("arguments").is_some_and(|a| !a.is_string()) {
            return bad("function arguments must be a JSON string");
        }
        ids.push(id);
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(v: Value) -> Vec<TraceMessage> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_tool_loop_in_one_row_and_a_result_for_the_previous_reply() {
        let call = json!([{"id": "c1", "type": "function",
                           "function": {"name": "read", "arguments": "{}"}}]);
        let row = msgs(json!([
            {"role": "assistant", "tokens": 20, "tool_calls": call, "reasoning_content": "why"},
            {"role": "tool", "tool_call_id": "c1", "tokens": 300},
            {"role": "user", "content": "go on"}
        ]));
        check_messages(&row).unwrap();
        // a row opening with a result answers the previous reply
        check_messages(&msgs(
            json!([{"role": "tool", "tool_call_id": "x", "tokens": 5}]),
        ))
        .unwrap();
        // a call with no text is fine
        check_messages(&msgs(json!([{"role": "assistant", "tool_calls": call}]))).unwrap();
    }

    #[test]
    fn malformed_messages_say_which_and_why() {
        for (v, why) in [
            (json!([]), "empty"),
            (
                json!([{"role": "robot", "content": "x"}]),
                "message 1: role",
            ),
            (json!([{"role": "user"}]), "content or tokens"),
            (
                json!([{"role": "user", "content": "x", "tokens": 3}]),
                "both",
            ),
            (json!([{"role": "user", "tokens": 0}]), "at least 1"),
            (
                json!([{"role": "user", "content": "x", "tool_calls": []}]),
                "only an assistant",
            ),
            (
                json!([{"role": "user", "content": "x", "reasoning_content": "r"}]),
                "reasoning",
            ),
            (
                json!([{"role": "tool", "content": "x"}]),
                "needs tool_call_id",
            ),
            (
                json!([{"role": "user", "content": "x", "tool_call_id": "c"}]),
                "only a tool",
            ),
            (
                json!([{"role": "assistant", "tool_calls": {}}]),
                "non-empty array",
            ),
            (
                json!([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]),
                "string id",
            ),
            (
                json!([{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]),
                "needs a name",
            ),
            (
                json!([{"role": "assistant", "tool_calls":
                    [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}]),
                "JSON string",
            ),
            (
                json!([{"role": "user", "content": "x"},
                       {"role": "tool", "tool_call_id": "c9", "content": "r"}]),
                "message 2: tool_call_id \"c9\" answers no call",
            ),
        ] {
            let e = check_messages(&msgs(v.clone())).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        }
    }

    #[test]
    fn waits_and_tools_are_checked() {
        assert!(seconds("think_time", Some(-1.0)).is_err());
        assert!(seconds("think_time", Some(f64::NAN)).is_err());
        assert_eq!(seconds("think_time", Some(0.5)), Ok(Some(0.5)));
        let t = AgentTurn {
            think_time: Some(0.5),
            tool_time: Some(0.25),
            ..AgentTurn::default()
        };
        assert_eq!(t.wait(), Some(0.75));
        assert_eq!(AgentTurn::default().wait(), None);
        let set = tools(Some(json!([{"name": "f"}])), Some("required"))
            .unwrap()
            .unwrap();
        assert_eq!(set.names(), ["f"]);
        assert!(
            tools(None, Some("required"))
                .unwrap_err()
                .contains("needs tools")
        );
        assert!(
            tools(Some(json!({})), None)
                .unwrap_err()
                .starts_with("tools ")
        );
    }
}
