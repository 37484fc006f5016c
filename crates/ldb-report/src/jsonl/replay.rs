//! The JSON lines of trace replays and sessions, after the request samples.
//!
//! A replay keeps no per-request samples in the result, only its summary,
//! so each replay gives: one line with its result (`layer` `trace` or
//! `sessions`, its keys as in `trace_results[]` / `session_results[]`
//! without the lists that get lines of their own), one line per turn index
//! of a session run (`session_turn`), and one line per 1 s bucket
//! (`replay_second`, with `replay_layer` saying which replay). Every line
//! carries `replay_index`, the replay's position in its list from 0.

use std::io::{self, Write};

use ldb_core::document::ResultDocument;
use ldb_core::replay::Bucket;
use ldb_core::replay::TraceResult;
use ldb_core::replay::session::{SessionResult, TurnStats};
use serde::Serialize;

/// One line: the layer and replay index, then the value's own keys.
#[derive(Serialize)]
struct Line<'a, T: Serialize> {
    layer: &'static str,
    replay_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    replay_layer: Option<&'static str>,
    #[serde(flatten)]
    value: &'a T,
}

fn line<T: Serialize>(
    w: &mut impl Write,
    layer: &'static str,
    replay_index: usize,
    replay_layer: Option<&'static str>,
    value: &T,
) -> io::Result<()> {
    let l = Line {
        layer,
        replay_index,
        replay_layer,
        value,
    };
    serde_json::to_writer(&mut *w, &l)?;
    w.write_all(b"\n")
}

fn seconds(
    w: &mut impl Write,
    of: &'static str,
    index: usize,
    buckets: &[Bucket],
) -> io::Result<u64> {
    for b in buckets {
        line(w, "replay_second", index, Some(of), b)?;
    }
    Ok(buckets.len() as u64)
}

fn trace(w: &mut impl Write, index: usize, t: &TraceResult) -> io::Result<u64> {
    let mut lean = t.clone();
    lean.summary.buckets.clear();
    line(w, "trace", index, None, &lean)?;
    Ok(1 + seconds(w, "trace", index, &t.summary.buckets)?)
}

fn sessions(w: &mut impl Write, index: usize, s: &SessionResult) -> io::Result<u64> {
    let mut lean = s.clone();
    lean.summary.buckets.clear();
    lean.by_turn.clear();
    line(w, "sessions", index, None, &lean)?;
    for t in &s.by_turn {
        line::<TurnStats>(w, "session_turn", index, None, t)?;
    }
    Ok(1 + s.by_turn.len() as u64 + seconds(w, "sessions", index, &s.summary.buckets)?)
}

/// Writes the replay lines of `doc`; returns how many.
pub(super) fn write(doc: &ResultDocument, w: &mut impl Write) -> io::Result<u64> {
    let mut n = 0;
    for (i, t) in doc.trace_results.iter().enumerate() {
        n += trace(w, i, t)?;
    }
    for (i, s) in doc.session_results.iter().enumerate() {
        n += sessions(w, i, s)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::replay_fixture;

    #[test]
    fn a_line_per_replay_turn_and_second_that_reads_back()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let doc = replay_fixture::doc(1.0);
        let mut buf = Vec::new();
        assert_eq!(super::super::write(&doc, &mut buf)?, 1 + 3 + 1 + 3 + 3);
        let lines: Vec<Value> = String::from_utf8(buf)?
            .lines()
            .map(serde_json::from_str)
            .collect::<std::result::Result<_, _>>()?;
        let layers: Vec<&str> = lines.iter().filter_map(|l| l["layer"].as_str()).collect();
        assert_eq!(
            layers,
            [
                "trace",
                "replay_second",
                "replay_second",
                "replay_second",
                "sessions",
                "session_turn",
                "session_turn",
                "session_turn",
                "replay_second",
                "replay_second",
                "replay_second"
            ]
        );
        // The summary line reads back as the result, less its own lists.
        let back: TraceResult = serde_json::from_value(lines[0].clone())?;
        assert_eq!(back.summary.output_tps, 200.0);
        assert!(back.summary.buckets.is_empty());
        assert_eq!(lines[1]["replay_layer"], "trace");
        assert_eq!(lines[1]["output_tokens"], 200);
        let turn: TurnStats = serde_json::from_value(lines[7].clone())?;
        assert_eq!((turn.turn, turn.prompt_tokens_mean), (3, 900.0));
        let s: SessionResult = serde_json::from_value(lines[4].clone())?;
        assert!(s.prefix_cache.differs && s.by_turn.is_empty());
        assert_eq!(lines[8]["replay_layer"], "sessions");
        Ok(())
    }
}
