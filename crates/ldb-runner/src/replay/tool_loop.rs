//! The sessions' tool loop (`--tools` with `--sessions`): a reply that
//! called a tool is followed, after the tool's run time (`--tool-latency`),
//! by a turn that carries the assistant's call and a `tool` message with a
//! synthetic result of `--tool-result-tokens` tokens, in place of the next
//! user message. The tool's run time is waited like think time: wall time,
//! outside every latency of the turn (docs/workloads.md, "Tool calls").

use ldb_client::stream::ChannelTexts;
use ldb_core::prompt::{Message, ToolPart};
use serde_json::json;

use super::config::ToolLoop;
use super::sessions::{Shared, user_text};

/// The turn that answers a tool call: the wait before it and its messages.
#[derive(Debug, Clone)]
pub(super) struct ToolTurn {
    /// The tool's run time, seconds.
    pub wait: f64,
    /// The `tool` message with the result.
    pub result: Message,
    /// Tokens of the result's text.
    pub result_tokens: u64,
}

/// Whether a reply called a tool: it streamed a call's name or arguments,
/// or finished with `tool_calls`. (vLLM 0.32 finishes a call forced by a
/// named `tool_choice` with `stop`: the streamed call is what counts.)
pub(super) fn called(texts: &ChannelTexts, finish: Option<&str>) -> bool {
    texts.tool_name.is_some() || !texts.tool_arguments.is_empty() || finish == Some("tool_calls")
}

/// The assistant message that repeats a reply in the conversation: its
/// text, and its call when it made one (`call_id` names it).
pub(super) fn assistant(texts: &ChannelTexts, call_id: Option<&str>) -> Message {
    let tool = call_id.map(|id| ToolPart {
        tool_calls: Some(json!([{
            "id": id,
            "type": "function",
            "function": {
                "name": texts.tool_name.as_deref().unwrap_or(""),
                "arguments": texts.tool_arguments,
            },
        }])),
        ..ToolPart::default()
    });
    Message {
        role: "assistant",
        content: texts.content.clone(),
        tool,
    }
}

/// The turn after session `id`'s turn `turn` called a tool; `u` is the
/// uniform draw of the tool's run time; `given` the result's text when the
/// leader of shards built it (else it is built here, the same text).
pub(super) fn tool_turn(
    sh: &Shared,
    tl: &ToolLoop,
    (id, turn): (u64, u32),
    u: f64,
    given: Option<String>,
) -> ToolTurn {
    let text = given.unwrap_or_else(|| result_text(sh, tl, (id, turn)));
    ToolTurn {
        wait: tl.latency.sample(u),
        result: Message {
            role: "tool",
            content: text,
            tool: Some(ToolPart {
                tool_call_id: Some(call_id(id, turn)),
                ..ToolPart::default()
            }),
        },
        result_tokens: tl.result_tokens,
    }
}

/// The text of the result that answers session `id`'s turn `turn`'s call.
pub(super) fn result_text(sh: &Shared, tl: &ToolLoop, (id, turn): (u64, u32)) -> String {
    // `!turn` keeps the result's text apart from every user message's
    user_text(sh, id, !turn, tl.result_tokens)
}

/// The id of the call session `id`'s turn `turn` made (the server's own
/// id is not kept: any stable id pairs a result with its call).
pub(super) fn call_id(id: u64, turn: u32) -> String {
    format!("call_{id}_{turn}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_called_a_tool_by_its_stream_or_its_finish_reason() {
        let mut t = ChannelTexts::default();
        assert!(!called(&t, Some("stop")));
        assert!(called(&t, Some("tool_calls")));
        t.tool_name = Some("get_weather".into());
        assert!(
            called(&t, Some("stop")),
            "vLLM's forced named call ends with stop"
        );
        t.tool_arguments = "{\"city\":\"Paris\"}".into();
        let m = assistant(&t, Some("call_0_1"));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["tool_calls"][0]["function"]["name"], "get_weather");
        assert_eq!(
            v["tool_calls"][0]["function"]["arguments"],
            "{\"city\":\"Paris\"}"
        );
        assert_eq!(v["tool_calls"][0]["id"], "call_0_1");
        assert!(v.get("tool_call_id").is_none());
        // a plain reply has no tool keys at all
        let plain = serde_json::to_value(assistant(&ChannelTexts::default(), None)).unwrap();
        assert_eq!(plain, json!({"role": "assistant", "content": ""}));
    }
}
