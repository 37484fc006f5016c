//! AgentX's agent traces (schema of the `agentx-harness` 1.0.12 package's
//! `WekaTrace`, the recorded coding-agent conversations it replays): one
//! JSON object per conversation (a file holds one, or one a line) with `id`,
//! `block_size`, and `requests`, each a call (`type` `n` or `s`) with `t`
//! (**s** from the conversation's start), `in` (the whole prompt's tokens),
//! `out`, `hash_ids` (the prompt's blocks of `block_size` tokens), `stop`
//! (`tool_use`, `end_turn`), `input_types`, `api_time` and `think_time`
//! (**s**), or a `subagent` entry with requests of its own.
//!
//! Mapping (docs/workloads.md has the table): the calls that extend one
//! another's prompt (the previous prompt's full blocks are a prefix of
//! the next one's `hash_ids`) are the turns of one conversation; a call
//! that does not (a side request, a compacted context) starts another
//! (`ID#2`, …), and a subagent's calls are conversations of their own
//! (`ID/AGENT`). A turn adds `in − in_prev − out_prev` new tokens (the
//! previous reply is the server's own, resent): a `tool` message answering
//! the previous reply when its input was a tool result, else a user
//! message; it is due the recorded idle gap after the previous reply
//! (`t − t_prev − api_time_prev`, else the recorded `think_time`), as
//! `tool_time` or `think_time`.

use serde::Deserialize;
use serde_json::Value;

use super::{ConvertOptions, Converted, Row, unit};
use crate::trace::{TraceError, TraceMessage};

/// A conversation (keys this converter does not use are let through: the
/// mapping table says which and why).
#[derive(Deserialize)]
struct Trace {
    id: String,
    block_size: u64,
    requests: Vec<Value>,
}

/// One call (the keys it uses).
#[derive(Deserialize, Clone)]
struct Call {
    t: f64,
    #[serde(rename = "in")]
    input: u64,
    #[serde(rename = "out")]
    output: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
    #[serde(default)]
    input_types: Vec<String>,
    #[serde(default)]
    stop: String,
    #[serde(default)]
    api_time: Option<f64>,
    #[serde(default)]
    think_time: Option<f64>,
}

/// A subagent's entry: when it started and its calls.
#[derive(Deserialize)]
struct Subagent {
    t: f64,
    agent_id: String,
    #[serde(default)]
    requests: Vec<Value>,
}

/// Converts the traces of one file: the whole text one JSON object, or
/// one object a line.
pub fn convert(text: &str, o: &ConvertOptions, out: &mut Converted) -> Result<(), TraceError> {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return unit(o, out, 1, |out| trace(v, o, out));
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        unit(o, out, i as u64 + 1, |out| {
            let v = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
            trace(v, o, out)
        })?;
    }
    Ok(())
}

/// One conversation, with its subagents.
fn trace(v: Value, o: &ConvertOptions, out: &mut Converted) -> Result<(), String> {
    let t: Trace = serde_json::from_value(v).map_err(|e| format!("not an AgentX trace: {e}"))?;
    let at = |why: String| format!("trace {:?}: {why}", t.id);
    if t.block_size == 0 {
        return Err(at("block_size must be at least 1".into()));
    }
    let base = out.traces as f64 * o.start_every_s;
    let mut main = Vec::new();
    let mut subs = Vec::new();
    for (i, r) in t.requests.iter().enumerate() {
        let at = |why: String| at(format!("request {}: {why}", i + 1));
        match r.get("type").and_then(Value::as_str) {
            Some("n" | "s") => main.push(call(r).map_err(at)?),
            Some("subagent") => {
                let s: Subagent = serde_json::from_value(r.clone())
                    .map_err(|e| at(format!("not a subagent entry: {e}")))?;
                let calls = s
                    .requests
                    .iter()
                    .map(|c| call(c).map(|c| relative_to(c, s.t)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(at)?;
                subs.push((format!("{}/{}", t.id, s.agent_id), calls));
            }
            other => return Err(at(format!("type {other:?} is not n, s or subagent"))),
        }
    }
    let mut pending = Vec::new();
    emit(&t.id, &main, t.block_size, base, out, &mut pending);
    for (id, calls) in &subs {
        out.note("subagent conversations");
        emit(id, calls, t.block_size, base, out, &mut pending);
    }
    out.rows.append(&mut pending);
    out.traces += 1;
    Ok(())
}

/// One call, checked.
fn call(v: &Value) -> Result<Call, String> {
    let c: Call = serde_json::from_value(v.clone()).map_err(|e| format!("not a call: {e}"))?;
    if !c.t.is_finite() || c.t < 0.0 {
        return Err("t is not a time".into());
    }
    if c.input == 0 {
        return Err("in must be at least 1".into());
    }
    Ok(c)
}

/// A subagent's call on the conversation's clock: older traces wrote its
/// `t` from the subagent's start, newer ones from the conversation's (a
/// `t` before the start is the older kind).
fn relative_to(mut c: Call, start: f64) -> Call {
    if c.t + 1e-6 < start {
        c.t += start;
    }
    c
}

/// Which earlier chain each call continues: the latest whose last prompt's
/// full blocks are a prefix of the call's `hash_ids` (without ids, the
/// latest whose prompt the call's does not undercut); else a new one.
fn chains(calls: &[Call], block: u64) -> Vec<usize> {
    let mut last: Vec<usize> = Vec::new();
    let mut of = Vec::with_capacity(calls.len());
    for (k, c) in calls.iter().enumerate() {
        let mut order: Vec<usize> = (0..last.len()).collect();
        order.sort_by_key(|&j| std::cmp::Reverse(last[j]));
        let found = order
            .into_iter()
            .find(|&j| extends(&calls[last[j]], c, block));
        let j = found.unwrap_or_else(|| {
            last.push(k);
            last.len() - 1
        });
        last[j] = k;
        of.push(j);
    }
    of
}

/// Whether `c`'s prompt resends all of `p`'s.
fn extends(p: &Call, c: &Call, block: u64) -> bool {
    if p.hash_ids.is_empty() || c.hash_ids.is_empty() {
        return c.input >= p.input;
    }
    let need = (p.input / block).max(1) as usize;
    let common = p
        .hash_ids
        .iter()
        .zip(&c.hash_ids)
        .take_while(|(a, b)| a == b)
        .count();
    common >= need.min(p.hash_ids.len())
}

/// The rows of `calls`' conversations, named `id`, `id#2`, ….
fn emit(id: &str, calls: &[Call], block: u64, base: f64, out: &mut Converted, rows: &mut Vec<Row>) {
    let of = chains(calls, block);
    let n = of.iter().copied().max().map_or(0, |m| m + 1);
    out.sessions += n as u64;
    let mut prev: Vec<Option<(usize, f64)>> = vec![None; n];
    for (k, c) in calls.iter().enumerate() {
        let j = of[k];
        let session = if j == 0 {
            id.to_string()
        } else {
            format!("{id}#{}", j + 1)
        };
        let mut r = Row {
            timestamp: base + c.t,
            session_id: Some(session),
            output_tokens: c.output.max(1),
            ..Row::default()
        };
        match prev[j] {
            None => r.input_tokens = Some(c.input),
            Some((p, last_ts)) => {
                r.timestamp = r.timestamp.max(last_ts);
                turn(&calls[p], c, p, out, &mut r);
            }
        }
        prev[j] = Some((k, r.timestamp));
        rows.push(r);
    }
}

/// A later turn: its new tokens as a tool result or a user message, and
/// the recorded idle gap before it.
fn turn(p: &Call, c: &Call, p_index: usize, out: &mut Converted, r: &mut Row) {
    let grown = c.input as i64 - p.input as i64 - p.output as i64;
    if grown < 1 {
        out.note("turns whose prompt grew by less than the reply before them");
    }
    let new = grown.max(1) as u64;
    let gap = match p.api_time.filter(|a| a.is_finite()) {
        Some(api) => Some((c.t - p.t - api).max(0.0)),
        None => c.think_time.filter(|s| s.is_finite() && *s >= 0.0),
    };
    let tool = if c.input_types.is_empty() {
        p.stop == "tool_use"
    } else {
        c.input_types.iter().any(|t| t == "tool_result")
    };
    if tool {
        out.note("tool-result turns");
        r.messages = Some(vec![TraceMessage {
            role: "tool".into(),
            tokens: Some(new),
            tool_call_id: Some(format!("call_{}", p_index + 1)),
            ..TraceMessage::default()
        }]);
        r.tool_time = gap;
    } else {
        r.input_tokens = Some(new);
        r.think_time = gap;
    }
}

#[cfg(test)]
mod tests;
