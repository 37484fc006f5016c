//! Tool calls (`tools`, `tool_choice` on the chat route): whether a request
//! calls one, the call's streamed text, and how a later turn's template
//! renders the call it repeats.
//!
//! Which requests call a tool: a named `tool_choice` calls that function,
//! `required` the first tool; `auto` (or none given) calls the first tool
//! when the conversation's last message is the user's, and answers in text
//! after a `tool` result; `none` never calls. A call is
//! [`CALL_TOKENS`] tokens long (fewer when `max_tokens` is smaller) and
//! ends there, whatever `ignore_eos` says: token 0 carries the function's
//! name, the others the arguments `{"text":"…"}` whose text is the
//! generated words of tokens 1 … n−1. So a later turn that repeats the call
//! renders it as the reply's words, and the prefix cache matches it as it
//! matches a text reply. The streamed shape is vLLM 0.32's (recorded in
//! `crates/ldb-client/tests/fixtures/vllm-0.32.0/tool-call-*.sse`): the
//! name in a delta of its own with the call's id and type, then argument
//! fragments; the finish reason is `tool_calls`, or `stop` for a call
//! forced by name (as vLLM's guided decoding reports it).

use serde_json::Value;

use super::errors::ApiError;
use super::request::MessageIn;
use crate::tokenizer::output_piece;

/// Tokens of one call.
pub(crate) const CALL_TOKENS: u32 = 16;

/// The call a request makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The function called.
    pub name: String,
    /// Forced by a named `tool_choice` (finish `stop`, like vLLM).
    pub named: bool,
    /// Tokens of the call.
    pub tokens: u32,
}

/// The call `tools` and `tool_choice` ask of a conversation, if any.
pub(crate) fn decide(
    tools: Option<&Value>,
    choice: Option<&Value>,
    messages: &[MessageIn],
    max_new: u32,
) -> Result<Option<ToolCall>, ApiError> {
    let names: Vec<&str> = tools
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let Some(&first) = names.first() else {
        return Ok(None);
    };
    let call = |name: &str, named| ToolCall {
        name: name.to_string(),
        named,
        tokens: CALL_TOKENS.min(max_new),
    };
    let last_is_user = messages.last().is_some_and(|m| m.role == "user");
    Ok(match choice {
        None => last_is_user.then(|| call(first, false)),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => last_is_user.then(|| call(first, false)),
            "required" => Some(call(first, false)),
            "none" => None,
            other => {
                return Err(ApiError::bad(
                    format!("unknown tool_choice {other:?}"),
                    Some("tool_choice"),
                ));
            }
        },
        Some(v) => {
            let name = v["function"]["name"].as_str().unwrap_or("");
            if !names.contains(&name) {
                return Err(ApiError::bad(
                    format!("tool_choice names {name:?}, which is not among the tools"),
                    Some("tool_choice"),
                ));
            }
            Some(call(name, true))
        }
    })
}

/// The argument fragment token `i` (1 ≤ i < n) of an `n`-token call writes.
pub(crate) fn argument_piece(i: u32, n: u32) -> String {
    let open = if i == 1 { "{\"text\":\"" } else { "" };
    let close = if i + 1 == n { "\"}" } else { "" };
    format!("{open}{}{close}", output_piece(i))
}

/// The text a later turn's template gives an assistant message's calls:
/// for a call in this simulator's shape, the words its tokens generated
/// (the name's token, then the arguments' text); otherwise name and
/// arguments as sent.
pub(crate) fn rendered(tool_calls: &Value) -> String {
    let mut out = String::new();
    for c in tool_calls.as_array().into_iter().flatten() {
        let f = &c["function"];
        let args = f["arguments"].as_str().unwrap_or("");
        match serde_json::from_str::<Value>(args)
            .ok()
            .and_then(|v| v["text"].as_str().map(str::to_string))
        {
            Some(text) => {
                out.push_str(output_piece(0));
                out.push_str(&text);
            }
            None => {
                out.push_str(f["name"].as_str().unwrap_or(""));
                out.push_str(args);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::frames::text_of;
    use serde_json::json;

    fn user() -> Vec<MessageIn> {
        vec![MessageIn {
            role: "user".into(),
            content: json!("hi"),
            tool_calls: None,
        }]
    }

    #[test]
    fn the_choice_decides_the_call() {
        let tools = json!([{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]);
        let d =
            |c: Option<Value>, m: &[MessageIn]| decide(Some(&tools), c.as_ref(), m, 100).unwrap();
        assert_eq!(d(None, &user()).map(|c| c.name), Some("a".into()));
        let named = d(
            Some(json!({"type":"function","function":{"name":"b"}})),
            &user(),
        )
        .unwrap();
        assert!(named.named && named.name == "b" && named.tokens == CALL_TOKENS);
        assert_eq!(d(Some(json!("none")), &user()), None);
        let after_tool = vec![MessageIn {
            role: "tool".into(),
            content: json!("result"),
            tool_calls: None,
        }];
        assert_eq!(d(Some(json!("auto")), &after_tool), None);
        assert!(d(Some(json!("required")), &after_tool).is_some());
        assert!(
            decide(
                Some(&tools),
                Some(&json!({"function":{"name":"c"}})),
                &user(),
                9
            )
            .is_err()
        );
        assert_eq!(
            decide(Some(&tools), Some(&json!("required")), &user(), 3)
                .unwrap()
                .unwrap()
                .tokens,
            3
        );
        assert_eq!(
            decide(None, Some(&json!("required")), &user(), 3).unwrap(),
            None
        );
    }

    #[test]
    fn a_repeated_call_renders_as_the_words_it_generated() {
        let n = 5;
        let args: String = (1..n).map(|i| argument_piece(i, n)).collect();
        let v: Value = serde_json::from_str(&args).expect("the arguments are JSON");
        assert!(v["text"].is_string());
        let calls = json!([{"id":"x","type":"function","function":{"name":"a","arguments":args}}]);
        assert_eq!(rendered(&calls), text_of(0, n));
        let other = json!([{"function":{"name":"f","arguments":"{\"city\":1}"}}]);
        assert_eq!(rendered(&other), "f{\"city\":1}");
    }
}
