//! Mooncake JSONL rows: `timestamp` (ms from the trace's start),
//! `input_length`, `output_length` (tokens) and `hash_ids`, the ids of the
//! prompt's 512-token blocks (equal ids = the same content, shareable KV).

use serde::Deserialize;

use super::{MOONCAKE_BLOCK_TOKENS, TraceError, TracePrompt, TraceRequest};

#[derive(Deserialize)]
struct Row {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// One row; the time comes back in seconds.
pub fn parse(line_no: u64, line: &str) -> Result<TraceRequest, TraceError> {
    let r: Row = serde_json::from_str(line).map_err(|e| {
        // AIPerf's multi-turn rows look like Mooncake's but for their
        // sessions: say how to replay them.
        let hint = if line.contains("\"delay\"") || line.contains("\"session_id\"") {
            " (an AIPerf multi-turn row? convert it: llm-decode-bench convert-trace --from aiperf)"
        } else {
            ""
        };
        TraceError::at(line_no, format!("not a Mooncake row: {e}{hint}"))
    })?;
    if !r.timestamp.is_finite() || r.timestamp < 0.0 {
        return Err(TraceError::at(line_no, "timestamp is not a time"));
    }
    if r.input_length == 0 || r.output_length == 0 {
        return Err(TraceError::at(
            line_no,
            "input_length and output_length must be at least 1",
        ));
    }
    // Each id covers 512 tokens, the last one the rest: the ids must cover
    // the input exactly, or the prompt's sharing cannot be the trace's.
    if !r.hash_ids.is_empty() {
        let blocks = r.input_length.div_ceil(MOONCAKE_BLOCK_TOKENS);
        if r.hash_ids.len() as u64 != blocks {
            return Err(TraceError::at(
                line_no,
                format!(
                    "{} hash_ids for input_length {} (expected {blocks}, one per 512 tokens)",
                    r.hash_ids.len(),
                    r.input_length
                ),
            ));
        }
    }
    Ok(TraceRequest {
        line: line_no,
        at_s: r.timestamp / 1000.0,
        prompt: TracePrompt::Tokens(r.input_length),
        output_tokens: r.output_length,
        hash_ids: r.hash_ids,
        session_id: None,
        agent: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_and_bad_rows() {
        let r = parse(
            3,
            r#"{"timestamp": 1500, "input_length": 1100, "output_length": 7, "hash_ids": [4, 5, 9]}"#,
        )
        .unwrap();
        assert_eq!(r.at_s, 1.5);
        assert_eq!(r.input_tokens(), Some(1100));
        assert_eq!((r.output_tokens, r.line), (7, 3));
        assert_eq!(r.hash_ids, vec![4, 5, 9]);
        let e = parse(
            8,
            r#"{"timestamp": 0, "input_length": 1100, "output_length": 7, "hash_ids": [4]}"#,
        )
        .unwrap_err();
        assert_eq!(e.line, 8);
        assert!(e.reason.contains("expected 3"), "{e}");
        assert_eq!(parse(2, "{}").unwrap_err().line, 2);
        // a later turn of AIPerf's multi-turn rows: told how to replay it
        let e = parse(
            4,
            r#"{"session_id": "s", "delay": 500, "input_length": 5, "output_length": 2}"#,
        )
        .unwrap_err();
        assert!(e.reason.contains("convert-trace --from aiperf"), "{e}");
        assert!(
            parse(
                2,
                r#"{"timestamp": 0, "input_length": 5, "output_length": 0}"#
            )
            .is_err()
        );
    }
}
