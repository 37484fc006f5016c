//! The AIPerf converter on synthetic rows: written for these tests, in the
//! published schema of the `aiperf` 0.13.0 package's `MooncakeTrace` (no
//! row comes from a real trace).

use super::*;

fn run(text: &str, skip_bad: bool) -> Result<Converted, TraceError> {
    let o = ConvertOptions {
        start_every_s: 10.0,
        skip_bad,
    };
    let mut c = Converted::default();
    convert(text, &o, &mut c)?;
    c.finish()?;
    Ok(c)
}

/// Two synthesized coding sessions as `aiperf synthesize agentic-code`
/// lays them out: the first turn with a `timestamp` (ms) and the group's
/// shared blocks, later turns with a `delay` (ms) and new tokens only.
const AGENTIC: &str = r#"
{"session_id": "s1", "input_length": 1500, "output_length": 80, "hash_ids": [1, 2, 3], "timestamp": 0.0, "group_id": 0}
{"session_id": "s1", "input_length": 300, "output_length": 120, "hash_ids": [10], "delay": 2500.0}
{"session_id": "s2", "input_length": 900, "output_length": 60, "hash_ids": [1, 2], "timestamp": 1000.0, "group_id": 0, "is_restart": true}
{"session_id": "s1", "input_length": 40, "output_length": 30, "hash_ids": [11], "delay": 500.0}
{"session_id": "s2", "input_length": 200, "output_length": 20, "hash_ids": [12], "delay": 100.0}
"#;

#[test]
fn agentic_sessions_become_turns_with_think_times() {
    let c = run(AGENTIC, false).unwrap();
    assert_eq!(c.sessions, 2);
    let rows: Vec<_> = c
        .rows
        .iter()
        .map(|r| {
            (
                r.session_id.as_deref().unwrap(),
                r.timestamp,
                r.input_tokens,
                r.think_time,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("s1", 0.0, Some(1500), None),
            ("s2", 1.0, Some(900), None),
            ("s2", 1.1, Some(200), Some(0.1)),
            ("s1", 2.5, Some(300), Some(2.5)),
            ("s1", 3.0, Some(40), Some(0.5)),
        ]
    );
    assert_eq!(c.rows[0].output_tokens, 80);
    // a first turn keeps its blocks (the group's shared prefix); a later
    // turn's text is its conversation's own; group and restart marks go
    let blocks: Vec<usize> = c.rows.iter().map(|r| r.hash_ids.len()).collect();
    assert_eq!(blocks, [3, 2, 0, 0, 0]);
    assert_eq!(c.dropped.get("hash_ids"), Some(&3));
    assert_eq!(c.dropped.get("group_id"), Some(&2));
    assert_eq!(c.dropped.get("is_restart"), Some(&1));
}

#[test]
fn message_arrays_become_what_each_turn_adds() {
    let text = r#"
{"session_id": "a", "timestamp": 0, "output_length": 20, "tools": [{"type": "function", "function": {"name": "ls"}}], "messages": [{"role": "system", "content": "You edit code."}, {"role": "user", "content": [{"type": "text", "text": "List "}, {"type": "text", "text": "files"}]}]}
{"session_id": "a", "delay": 1200, "output_length": 30, "messages": [{"role": "system", "content": "You edit code."}, {"role": "user", "content": [{"type": "text", "text": "List "}, {"type": "text", "text": "files"}]}, {"role": "assistant", "content": null, "reasoning_content": "ls first", "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "t1", "content": "a.rs b.rs", "name": "ls"}]}
{"session_id": "a", "delay": 50, "output_length": 10, "messages": [{"role": "user", "content": "start over"}]}
"#;
    let c = run(text, false).unwrap();
    let m = |i: usize| c.rows[i].messages.clone().unwrap();
    assert_eq!(m(0).len(), 2);
    assert_eq!(m(0)[1].content.as_deref(), Some("List files"));
    assert!(c.rows[0].tools.is_some());
    // the second turn adds the recorded call and its result
    assert_eq!(m(1).len(), 2);
    assert_eq!(m(1)[0].role, "assistant");
    assert_eq!(m(1)[0].content, None);
    assert_eq!(m(1)[0].reasoning_content.as_deref(), Some("ls first"));
    assert_eq!(m(1)[1].tool_call_id.as_deref(), Some("t1"));
    assert_eq!(c.rows[1].think_time, Some(1.2));
    assert_eq!(c.dropped.get("messages[].name"), Some(&1));
    // a rewritten array is a conversation of its own
    assert_eq!(c.rows[2].session_id.as_deref(), Some("a~2"));
    assert_eq!(c.rows[2].think_time, None);
    assert_eq!(c.sessions, 2);
}

#[test]
fn single_requests_keep_their_blocks_and_start_every_spaces_them() {
    let c = run(
        "{\"input_length\": 600, \"output_length\": 4, \"hash_ids\": [7, 8]}\n\
         {\"text_input\": \"hello\", \"output_length\": 4}\n",
        false,
    )
    .unwrap();
    assert_eq!(c.rows[0].hash_ids, [7, 8]);
    assert_eq!(c.rows[1].timestamp, 10.0);
    assert_eq!(c.rows[1].prompt.as_deref(), Some("hello"));
    assert_eq!(c.sessions, 2);
}

#[test]
fn rows_that_cannot_be_replayed_name_their_line_or_are_skipped() {
    for (row, why) in [
        ("nope", "not JSON"),
        ("[1]", "not a JSON object"),
        (
            r#"{"payload": {"prompt": "x"}, "output_length": 2}"#,
            "raw request body",
        ),
        (r#"{"input_length": 5}"#, "needs output_length"),
        (r#"{"input_length": 5, "output_length": 0}"#, "at least 1"),
        (
            r#"{"input_length": 5, "text_input": "x", "output_length": 2}"#,
            "exactly one",
        ),
        (
            r#"{"input_length": -5, "output_length": 2}"#,
            "whole number",
        ),
        (
            r#"{"input_length": 5, "output_length": 2, "timestamp": "soon"}"#,
            "milliseconds",
        ),
        (
            r#"{"type": "bailian_trace", "input_length": 5, "output_length": 2}"#,
            "type",
        ),
        (
            r#"{"text_input": "x", "output_length": 2, "tools": []}"#,
            "tools go with",
        ),
        (
            r#"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "output_length": 2}"#,
            "image_url part",
        ),
        (
            r#"{"messages": [{"role": "tool", "content": "x"}], "output_length": 2}"#,
            "does not read back",
        ),
    ] {
        let text = format!("{{\"input_length\": 5, \"output_length\": 2}}\n\n{row}\n");
        let e = run(&text, false).unwrap_err();
        assert!(e.reason.contains(why), "{row}: {e}");
        if !why.contains("read back") {
            assert_eq!(e.line, 3, "{row}");
            let c = run(&text, true).unwrap();
            assert_eq!((c.rows.len(), c.bad_skipped), (1, 1), "{row}");
        }
    }
    let e = run(
        "{\"session_id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output_length\": 2}\n\
         {\"session_id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output_length\": 2}\n",
        false,
    )
    .unwrap_err();
    assert!(e.reason.contains("repeat"), "{e}");
}
