//! AIPerf's Mooncake-style trace rows (schema of the `aiperf` 0.13.0
//! package's `MooncakeTrace`, which its agentic-code synthesizer writes):
//! one JSON object a line with exactly one of `input_length` (tokens of
//! the turn's *new* input), `text_input`, `messages` (the whole
//! conversation so far, recorded replies included) or `payload`; and
//! `output_length`, `hash_ids`, `timestamp` (**ms**, a session's first
//! turn), `delay` (**ms** after the previous reply, later turns),
//! `session_id`, `tools`, `extra`.
//!
//! Mapping (docs/workloads.md has the table): `input_length` becomes
//! `input_tokens`, `text_input` a `prompt`, `timestamp` and `delay` our
//! seconds (`timestamp`, `think_time`); a session's `messages` become the
//! messages each turn *adds* (the part after the previous row's array, which
//! opens with the recorded reply: under `--trace-sessions` it stands in
//! for the server's own, as AIPerf sends the arrays as recorded). A row
//! whose array does not extend the previous one starts a conversation of
//! its own (`ID~2`, …). `payload` rows (a raw request body) cannot be
//! replayed with exact lengths and are refused.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{ConvertOptions, Converted, Row, count, ms_to_s, unit};
use crate::trace::{MOONCAKE_BLOCK_TOKENS, TraceError, TraceMessage};

/// Keys read; every other key of a row is counted as not carried over.
const KNOWN: [&str; 11] = [
    "type",
    "session_id",
    "input_length",
    "text_input",
    "messages",
    "tools",
    "payload",
    "output_length",
    "hash_ids",
    "timestamp",
    "delay",
];

/// A session seen so far.
#[derive(Default)]
struct Session {
    /// The id written (`ID`, then `ID~2` … after a rewritten array).
    out_id: String,
    part: u32,
    last_s: f64,
    /// The previous row's whole message array, when it had one.
    messages: Option<Vec<TraceMessage>>,
}

/// Converts the rows of one file.
pub fn convert(text: &str, o: &ConvertOptions, out: &mut Converted) -> Result<(), TraceError> {
    let mut sessions: HashMap<String, Session> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        unit(o, out, i as u64 + 1, |out| row(line, o, &mut sessions, out))?;
    }
    Ok(())
}

/// One row.
fn row(
    line: &str,
    o: &ConvertOptions,
    sessions: &mut HashMap<String, Session>,
    out: &mut Converted,
) -> Result<(), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(m) = v else {
        return Err("not a JSON object".into());
    };
    if let Some(t) = m.get("type").filter(|t| *t != "mooncake_trace") {
        return Err(format!("type {t} is not an AIPerf Mooncake-style row"));
    }
    if m.contains_key("payload") {
        return Err("a raw request body (payload) cannot be replayed with exact lengths".into());
    }
    let output_tokens = match m.get("output_length") {
        Some(v) => count("output_length", v)?,
        None => return Err("needs output_length (the replay asks for a fixed length)".into()),
    };
    if output_tokens == 0 {
        return Err("output_length must be at least 1".into());
    }
    let sid = match m.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err("session_id must be a string".into()),
    };
    let mut r = Row {
        output_tokens,
        tools: m.get("tools").cloned(),
        ..Row::default()
    };
    let first = timing(&m, sid.as_deref(), o, sessions, out, &mut r)?;
    content(&m, (sid.as_deref(), first), sessions, out, &mut r)?;
    for k in m.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        out.drop_key(k);
    }
    out.rows.push(r);
    Ok(())
}

/// The row's time: a session's first turn at its `timestamp` (else at
/// `start_every` × its index) plus any `delay`; a later turn `delay` after
/// the previous reply (`think_time`), placed in the file by the previous
/// turn's time plus the delay; or at its own `timestamp` when it has one.
/// True when the row starts a conversation.
fn timing(
    m: &Map<String, Value>,
    sid: Option<&str>,
    o: &ConvertOptions,
    sessions: &mut HashMap<String, Session>,
    out: &mut Converted,
    r: &mut Row,
) -> Result<bool, String> {
    let ts = m
        .get("timestamp")
        .map(|v| ms_to_s("timestamp", v))
        .transpose()?;
    let delay = m.get("delay").map(|v| ms_to_s("delay", v)).transpose()?;
    let later = sid.and_then(|s| sessions.get_mut(s));
    match later {
        Some(s) => {
            r.timestamp = match ts {
                Some(t) => t.max(s.last_s),
                None => {
                    let think = delay.unwrap_or(0.0);
                    r.think_time = Some(think);
                    s.last_s + think
                }
            };
            s.last_s = r.timestamp;
            r.session_id = Some(s.out_id.clone());
            Ok(false)
        }
        None => {
            let start = ts.unwrap_or(out.sessions as f64 * o.start_every_s);
            r.timestamp = start + delay.unwrap_or(0.0);
            out.sessions += 1;
            if let Some(s) = sid {
                sessions.insert(
                    s.to_string(),
                    Session {
                        out_id: s.to_string(),
                        part: 1,
                        last_s: r.timestamp,
                        messages: None,
                    },
                );
                r.session_id = Some(s.to_string());
            }
            Ok(true)
        }
    }
}

/// The row's input: exactly one of `input_length`, `text_input`, `messages`.
fn content(
    m: &Map<String, Value>,
    (sid, first): (Option<&str>, bool),
    sessions: &mut HashMap<String, Session>,
    out: &mut Converted,
    r: &mut Row,
) -> Result<(), String> {
    let given = ["input_length", "text_input", "messages"]
        .iter()
        .filter(|k| m.contains_key(**k))
        .count();
    if given != 1 {
        return Err("needs exactly one of input_length, text_input, messages".into());
    }
    if let Some(v) = m.get("input_length") {
        let n = count("input_length", v)?;
        if n == 0 {
            return Err("input_length must be at least 1".into());
        }
        r.input_tokens = Some(n);
        hash_ids(m, first, n, out, r);
    } else if let Some(v) = m.get("text_input") {
        let t = v.as_str().ok_or("text_input must be a string")?;
        r.prompt = Some(t.to_string());
    }
    if r.tools.is_some() && !m.contains_key("messages") {
        return Err("tools go with messages".into());
    }
    let Some(v) = m.get("messages") else {
        if let Some(s) = sid.and_then(|s| sessions.get_mut(s)) {
            s.messages = None;
        }
        return Ok(());
    };
    let whole = messages(v, out)?;
    let Some(s) = sid.and_then(|s| sessions.get_mut(s)) else {
        r.messages = Some(whole);
        return Ok(());
    };
    let added = match &s.messages {
        Some(prev) if whole.len() > prev.len() && whole[..prev.len()] == prev[..] => {
            whole[prev.len()..].to_vec()
        }
        Some(prev) if whole[..] == prev[..] => {
            return Err("messages repeat the previous turn's array".into());
        }
        // The array does not extend the previous one (the conversation was
        // rewritten): a conversation of its own from here.
        Some(_) => {
            s.part += 1;
            s.out_id = format!("{}~{}", sid.unwrap_or_default(), s.part);
            r.session_id = Some(s.out_id.clone());
            r.think_time = None;
            out.sessions += 1;
            out.note("conversations split where a message array was rewritten");
            whole.clone()
        }
        None => whole.clone(),
    };
    s.messages = Some(whole);
    r.messages = Some(added);
    Ok(())
}

/// `hash_ids` are kept on a conversation's first turn when they are our
/// 512-token blocks (AIPerf's default block size): sessions then share what
/// their first prompts share, as under AIPerf (its agentic synthesizer
/// opens every session with the global and group prefix blocks). A later
/// turn's, and ids at another block size, are dropped: a later turn's text
/// is the conversation's own.
fn hash_ids(m: &Map<String, Value>, first: bool, n: u64, out: &mut Converted, r: &mut Row) {
    let Some(ids) = m.get("hash_ids").and_then(Value::as_array) else {
        return;
    };
    let ids: Option<Vec<u64>> = ids.iter().map(Value::as_u64).collect();
    match ids {
        Some(ids) if first && ids.len() as u64 == n.div_ceil(MOONCAKE_BLOCK_TOKENS) => {
            r.hash_ids = ids;
        }
        _ => out.drop_key("hash_ids"),
    }
}

/// An OpenAI message array as our messages: text parts joined, the keys we
/// replay kept, others counted as not carried over.
fn messages(v: &Value, out: &mut Converted) -> Result<Vec<TraceMessage>, String> {
    let list = v.as_array().ok_or("messages must be an array")?;
    let mut msgs = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let at = |why: &str| format!("message {}: {why}", i + 1);
        let o = m.as_object().ok_or_else(|| at("not an object"))?;
        let role = o
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| at("no role"))?;
        let mut t = TraceMessage {
            role: role.to_string(),
            content: text_of(o.get("content")).map_err(|e| at(&e))?,
            tool_calls: o.get("tool_calls").filter(|c| !c.is_null()).cloned(),
            tool_call_id: o
                .get("tool_call_id")
                .and_then(Value::as_str)
                .map(str::to_string),
            reasoning_content: o
                .get("reasoning_content")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..TraceMessage::default()
        };
        if t.content.is_none() && !(role == "assistant" && t.tool_calls.is_some()) {
            t.content = Some(String::new());
        }
        for k in o.keys() {
            if !matches!(
                k.as_str(),
                "role" | "content" | "tool_calls" | "tool_call_id" | "reasoning_content"
            ) {
                out.drop_key(&format!("messages[].{k}"));
            }
        }
        msgs.push(t);
    }
    Ok(msgs)
}

/// A message's text: a string, or the text parts of an array (any other
/// part, an image say, cannot be replayed here).
fn text_of(v: Option<&Value>) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut s = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text") | None, Some(Value::String(t))) => s.push_str(t),
                    (kind, _) => {
                        return Err(format!(
                            "a {} part cannot be replayed (text only)",
                            kind.unwrap_or("non-text")
                        ));
                    }
                }
            }
            Ok(Some(s))
        }
        Some(_) => Err("content must be a string or an array of text parts".into()),
    }
}

#[cfg(test)]
mod tests;
