//! Converters from the agent traces other benchmarks replay to our JSONL
//! (`llm-decode-bench convert-trace`): AIPerf's Mooncake-style multi-turn
//! rows (`aiperf.rs`) and the per-conversation JSON traces SemiAnalysis'
//! AgentX replays (`agentx.rs`). Pure: the caller reads the files and
//! writes the rows. The field mapping, and what is dropped and why, is in
//! docs/workloads.md ("Converting AIPerf and AgentX traces").
//!
//! Every row written is read back with our own parser before the
//! conversion is declared done, so a converted file always replays.

pub mod agentx;
pub mod aiperf;

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use super::{TraceError, TraceMessage};

/// A format `convert-trace --from` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// AIPerf's Mooncake-style JSONL (`session_id`, `delay`, …).
    Aiperf,
    /// AgentX's per-conversation JSON traces (`requests` of `in`/`out`).
    Agentx,
}

impl Source {
    /// Parses a `--from` value.
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "aiperf" => Some(Source::Aiperf),
            "agentx" => Some(Source::Agentx),
            _ => None,
        }
    }

    /// Converts one input file's text into `out`.
    pub fn convert(
        self,
        text: &str,
        o: &ConvertOptions,
        out: &mut Converted,
    ) -> Result<(), TraceError> {
        match self {
            Source::Aiperf => aiperf::convert(text, o, out),
            Source::Agentx => agentx::convert(text, o, out),
        }
    }
}

/// How to convert.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvertOptions {
    /// Seconds between the starts of conversations that carry no start
    /// time of their own (AgentX traces all start at 0; AIPerf sessions
    /// without a `timestamp`): conversation i starts at i × this.
    pub start_every_s: f64,
    /// Count and skip rows (AIPerf) or traces (AgentX) that cannot be
    /// converted, instead of stopping at the first.
    pub skip_bad: bool,
}

/// One row of our JSONL as the converters write it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Row {
    /// Seconds.
    pub timestamp: f64,
    /// The conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A built user message of this many tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// A literal user message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Messages the turn adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<TraceMessage>>,
    /// The turn's output length.
    pub output_tokens: u64,
    /// Shared 512-token blocks (single requests only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hash_ids: Vec<u64>,
    /// Tool definitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// Seconds after the previous reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_time: Option<f64>,
    /// Seconds the tool ran before this turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_time: Option<f64>,
}

/// What a conversion gives back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// The rows, in time order once [`Converted::finish`] ran.
    pub rows: Vec<Row>,
    /// Conversations written.
    pub sessions: u64,
    /// Conversations (AgentX traces) read so far: the next one's index.
    pub traces: u64,
    /// Rows or traces skipped (`skip_bad`).
    pub bad_skipped: u64,
    /// Source keys not carried over, with how many rows had each.
    pub dropped: BTreeMap<String, u64>,
    /// Counted facts of the conversion worth a line (tool turns, turns
    /// whose context grew by less than the reply before them, …).
    pub notes: BTreeMap<String, u64>,
}

impl Converted {
    /// Counts one row having source key `key` that is not carried over.
    pub(crate) fn drop_key(&mut self, key: &str) {
        *self.dropped.entry(key.to_string()).or_default() += 1;
    }

    /// Counts one occurrence of `what`.
    pub(crate) fn note(&mut self, what: &str) {
        *self.notes.entry(what.to_string()).or_default() += 1;
    }

    /// Puts the rows in time order (a conversation's turns keep theirs:
    /// their times never go backwards and the sort is stable) and reads
    /// every row back with our parser.
    pub fn finish(&mut self) -> Result<(), TraceError> {
        self.rows
            .sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        for (i, r) in self.rows.iter().enumerate() {
            let line = serde_json::to_string(r).map_err(|e| TraceError::at(0, e.to_string()))?;
            super::jsonl::parse(i as u64 + 1, &line).map_err(|e| {
                TraceError::at(
                    0,
                    format!("converted row {} does not read back: {}", i + 1, e.reason),
                )
            })?;
        }
        Ok(())
    }

    /// Writes the rows as our JSONL.
    pub fn write_jsonl(&self, out: &mut impl Write) -> std::io::Result<()> {
        for r in &self.rows {
            serde_json::to_writer(&mut *out, r)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// One line saying what was converted.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} rows in {} conversations",
            self.rows.len(),
            self.sessions
        );
        if self.bad_skipped > 0 {
            s.push_str(&format!(", {} bad skipped", self.bad_skipped));
        }
        for (k, n) in &self.notes {
            s.push_str(&format!("; {k}: {n}"));
        }
        if !self.dropped.is_empty() {
            let keys: Vec<String> = self
                .dropped
                .iter()
                .map(|(k, n)| format!("{k} ({n})"))
                .collect();
            s.push_str(&format!("; not carried over: {}", keys.join(", ")));
        }
        s
    }
}

/// A wait or time in the source's milliseconds, as our seconds.
pub(crate) fn ms_to_s(key: &str, v: &Value) -> Result<f64, String> {
    v.as_f64()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|ms| ms / 1000.0)
        .ok_or_else(|| format!("{key} must be milliseconds (a number ≥ 0)"))
}

/// A count of tokens.
pub(crate) fn count(key: &str, v: &Value) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("{key} must be a whole number of tokens"))
}

/// Runs `f` on one unit (a row, a trace) at `line`: its error stops the
/// conversion, or is counted under `skip_bad`.
pub(crate) fn unit(
    o: &ConvertOptions,
    out: &mut Converted,
    line: u64,
    f: impl FnOnce(&mut Converted) -> Result<(), String>,
) -> Result<(), TraceError> {
    match f(out) {
        Ok(()) => Ok(()),
        Err(_) if o.skip_bad => {
            out.bad_skipped += 1;
            Ok(())
        }
        Err(e) => Err(TraceError::at(line, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_out_in_time_order_and_read_back() {
        let mut c = Converted::default();
        for (t, s) in [(2.0, "b"), (0.5, "a"), (2.0, "a")] {
            c.rows.push(Row {
                timestamp: t,
                session_id: Some(s.into()),
                input_tokens: Some(10),
                output_tokens: 4,
                ..Row::default()
            });
        }
        c.finish().unwrap();
        let order: Vec<_> = c.rows.iter().map(|r| r.session_id.as_deref()).collect();
        assert_eq!(order, [Some("a"), Some("b"), Some("a")]);
        let mut buf = Vec::new();
        c.write_jsonl(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with(
            r#"{"timestamp":0.5,"session_id":"a","input_tokens":10,"output_tokens":4}"#
        ));
        c.rows[0].output_tokens = 0;
        assert!(
            c.finish()
                .unwrap_err()
                .reason
                .contains("does not read back")
        );
        assert_eq!(Source::parse("agentx"), Some(Source::Agentx));
        assert_eq!(Source::parse("weka"), None);
    }
}
