//! A trace's agent rows as chat messages (docs/workloads.md, "Agent
//! traces"): each message literal or built, with its calls, the call it
//! answers and its reasoning; the row's tools; and, under
//! `--trace-sessions`, what becomes of the previous turn's real reply:
//!
//! - a row opening with an `assistant` message carries the reply as the
//!   trace recorded it, which stands in for the server's (not resent);
//! - a row opening with `tool` messages answers the previous reply, which
//!   is resent carrying those calls (its own streamed call when it made
//!   one, else a call with empty arguments to the first tool it was
//!   offered, or to `tool`);
//! - any other row follows the reply, resent as generated.

use std::sync::Arc;

use ldb_client::stream::ChannelTexts;
use ldb_core::prompt::{Message, ToolPart};
use ldb_core::tools::ToolSet;
use ldb_core::trace::{TraceMessage, TraceRequest};
use serde_json::{Value, json};

/// What a turn's messages open with, for the reply before it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Opening {
    /// A new message: the previous reply is resent as generated.
    #[default]
    New,
    /// The recorded reply: it stands in for the server's.
    Recorded,
    /// Results of these calls: the previous reply is resent making them.
    Answers(Vec<String>),
}

impl Opening {
    /// The opening of a row's messages.
    pub(super) fn of(msgs: &[TraceMessage]) -> Opening {
        match msgs.first().map(|m| m.role.as_str()) {
            Some("assistant") => Opening::Recorded,
            Some("tool") => Opening::Answers(
                msgs.iter()
                    .take_while(|m| m.role == "tool")
                    .filter_map(|m| m.tool_call_id.clone())
                    .collect(),
            ),
            _ => Opening::New,
        }
    }
}

/// The role as the chat API spells it.
fn role(r: &str) -> &'static str {
    match r {
        "system" => "system",
        "assistant" => "assistant",
        "tool" => "tool",
        _ => "user",
    }
}

/// A row's messages to send; `built(i, tokens)` gives the text of message
/// `i` when the row has the tool build it.
pub(super) fn messages(
    msgs: &[TraceMessage],
    mut built: impl FnMut(usize, u64) -> String,
) -> Vec<Message> {
    msgs.iter()
        .enumerate()
        .map(|(i, m)| {
            let content = match (&m.content, m.tokens) {
                (Some(c), _) => c.clone(),
                (None, Some(n)) => built(i, n),
                (None, None) => String::new(),
            };
            let part = ToolPart {
                tool_calls: m.tool_calls.clone(),
                tool_call_id: m.tool_call_id.clone(),
                reasoning_content: m.reasoning_content.clone(),
            };
            Message {
                role: role(&m.role),
                content,
                tool: (part != ToolPart::default()).then_some(part),
            }
        })
        .collect()
}

/// The tools a row offers, if any.
pub(super) fn tools(r: &TraceRequest) -> Option<Arc<ToolSet>> {
    r.agent.as_ref()?.tools.clone().map(Arc::new)
}

/// The previous reply resent as the calls `ids` answer: its own streamed
/// call (name and arguments) for the first, an empty call to the first tool
/// it was `offered` (else `tool`) for any other, or for all when it made
/// none.
pub(super) fn answered(texts: &ChannelTexts, ids: &[String], offered: Option<&ToolSet>) -> Message {
    let fallback = offered
        .and_then(|t| t.names().first().map(|n| n.to_string()))
        .unwrap_or_else(|| "tool".into());
    let calls: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let own = texts.tool_name.as_ref().filter(|_| i == 0);
            let (name, args) = match own {
                Some(n) => (n.clone(), texts.tool_arguments.clone()),
                None => (fallback.clone(), "{}".to_string()),
            };
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    Message {
        role: "assistant",
        content: texts.content.clone(),
        tool: Some(ToolPart {
            tool_calls: Some(Value::Array(calls)),
            ..ToolPart::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(v: Value) -> Vec<TraceMessage> {
        serde_json::from_value(v).expect("messages")
    }

    #[test]
    fn messages_keep_their_parts_and_build_their_text() {
        let m = msgs(json!([
            {"role": "assistant", "tokens": 3, "reasoning_content": "think",
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "42"}
        ]));
        let out = messages(&m, |i, n| format!("built {i} {n}"));
        let v = serde_json::to_value(&out).expect("json");
        assert_eq!(v[0]["content"], "built 0 3");
        assert_eq!(v[0]["reasoning_content"], "think");
        assert_eq!(v[0]["tool_calls"][0]["id"], "c");
        assert_eq!(
            v[1],
            json!({"role": "tool", "content": "42", "tool_call_id": "c"})
        );
        assert_eq!(Opening::of(&m), Opening::Recorded);
        assert_eq!(Opening::of(&m[1..]), Opening::Answers(vec!["c".into()]));
        assert_eq!(
            Opening::of(&msgs(json!([{"role": "user", "content": "x"}]))),
            Opening::New
        );
    }

    #[test]
    fn a_reply_answered_by_results_is_resent_making_those_calls() {
        let mut t = ChannelTexts {
            content: "let me look".into(),
            ..ChannelTexts::default()
        };
        let v = serde_json::to_value(answered(&t, &["a".into()], None)).expect("json");
        assert_eq!(v["content"], "let me look");
        assert_eq!(
            v["tool_calls"][0]["function"],
            json!({"name": "tool", "arguments": "{}"})
        );
        let set = ToolSet::parse(r#"[{"name": "grep"}]"#, Default::default()).expect("tools");
        let v = serde_json::to_value(answered(&t, &["a".into()], Some(&set))).expect("json");
        assert_eq!(v["tool_calls"][0]["function"]["name"], "grep");
        t.tool_name = Some("read".into());
        t.tool_arguments = "{\"p\":1}".into();
        let v = serde_json::to_value(answered(&t, &["a".into(), "b".into()], Some(&set)))
            .expect("json");
        assert_eq!(
            v["tool_calls"][0]["function"],
            json!({"name": "read", "arguments": "{\"p\":1}"})
        );
        assert_eq!(v["tool_calls"][1]["id"], "b");
        assert_eq!(v["tool_calls"][1]["function"]["name"], "grep");
    }
}
