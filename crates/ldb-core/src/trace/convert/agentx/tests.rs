//! The AgentX converter on synthetic traces: written for these tests, in
//! the published schema of the `agentx-harness` 1.0.12 package's
//! `WekaTrace` (no number comes from a recorded conversation).

use super::*;

fn ids(from: u64, n: u64) -> String {
    let v: Vec<String> = (from..from + n).map(|i| i.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// One conversation: a tool call, its result, a side request that shares
/// nothing, the user's next message, and a subagent of two calls.
fn conversation(id: &str) -> String {
    format!(
        r#"{{"id": "{id}", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
  "tool_tokens": 0, "system_tokens": 0, "requests": [
  {{"t": 0.0, "type": "s", "model": "m", "in": 640, "out": 40, "hash_ids": {h1},
    "stop": "tool_use", "api_time": 1.0, "ttft": 0.2}},
  {{"t": 3.0, "type": "s", "model": "m", "in": 880, "out": 30, "hash_ids": {h2},
    "input_types": ["tool_result"], "stop": "end_turn", "api_time": 0.5}},
  {{"t": 3.2, "type": "n", "model": "m", "in": 100, "out": 5, "hash_ids": [900, 901]}},
  {{"t": 3.5, "type": "subagent", "agent_id": "agent_001", "subagent_type": "Explore",
    "status": "completed", "models": ["m"], "requests": [
      {{"t": 0.2, "type": "s", "model": "m", "in": 300, "out": 20, "hash_ids": {h3}, "stop": "end_turn"}},
      {{"t": 4.5, "type": "s", "model": "m", "in": 370, "out": 10, "hash_ids": {h4}, "think_time": 0.3}}]}},
  {{"t": 4.0, "type": "s", "model": "m", "in": 1000, "out": 50, "hash_ids": {h5},
    "input_types": ["text"], "stop": "end_turn"}}]}}"#,
        h1 = ids(1, 10),
        h2 = ids(1, 14),
        h3 = ids(500, 5),
        h4 = ids(500, 6),
        h5 = ids(1, 16),
    )
}

fn run(text: &str, skip_bad: bool) -> Result<Converted, TraceError> {
    let o = ConvertOptions {
        start_every_s: 100.0,
        skip_bad,
    };
    let mut c = Converted::default();
    convert(text, &o, &mut c)?;
    c.finish()?;
    Ok(c)
}

#[test]
fn calls_become_turns_of_the_conversations_their_prompts_extend() {
    let c = run(&conversation("a"), false).unwrap();
    assert_eq!(c.sessions, 3, "{:?}", c.rows);
    let got: Vec<_> = c
        .rows
        .iter()
        .map(|r| {
            (
                r.session_id.clone().unwrap(),
                r.timestamp,
                r.input_tokens,
                r.messages
                    .as_ref()
                    .map(|m| (m[0].role.clone(), m[0].tokens)),
                r.output_tokens,
            )
        })
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        [
            (s("a"), 0.0, Some(640), None, 40),
            // 880 − 640 − 40 new tokens, a tool result
            (s("a"), 3.0, None, Some((s("tool"), Some(200))), 30),
            (s("a#2"), 3.2, Some(100), None, 5),
            (s("a/agent_001"), 3.7, Some(300), None, 20),
            // 1000 − 880 − 30 new tokens from the user
            (s("a"), 4.0, Some(90), None, 50),
            (s("a/agent_001"), 4.5, Some(50), None, 10),
        ]
    );
    // the recorded idle gaps: 3.0 − 0 − 1.0 after a tool, 4.0 − 3.0 − 0.5
    // after the user, and the recorded think time without an api_time
    assert_eq!(c.rows[1].tool_time, Some(2.0));
    assert_eq!(c.rows[1].think_time, None);
    assert_eq!(c.rows[4].think_time, Some(0.5));
    assert_eq!(c.rows[5].think_time, Some(0.3));
    let m = c.rows[1].messages.as_ref().unwrap();
    assert_eq!(m[0].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(c.notes.get("tool-result turns"), Some(&1));
    assert_eq!(c.notes.get("subagent conversations"), Some(&1));
}

#[test]
fn one_trace_a_line_each_start_later() {
    let text = format!(
        "{}\n{}\n",
        conversation("a").replace('\n', " "),
        conversation("b").replace('\n', " ")
    );
    let c = run(&text, false).unwrap();
    assert_eq!(c.sessions, 6);
    let b: Vec<f64> = c
        .rows
        .iter()
        .filter(|r| r.session_id.as_deref() == Some("b"))
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(b, [100.0, 103.0, 104.0]);
}

#[test]
fn a_prompt_that_grew_less_than_the_reply_is_counted_and_kept_at_one_token() {
    let text = r#"{"id": "x", "block_size": 64, "requests": [
      {"t": 0, "type": "n", "in": 100, "out": 50},
      {"t": 1, "type": "n", "in": 120, "out": 5, "stop": "end_turn"}]}"#;
    let c = run(text, false).unwrap();
    assert_eq!(c.rows[1].input_tokens, Some(1));
    assert_eq!(
        c.notes
            .get("turns whose prompt grew by less than the reply before them"),
        Some(&1)
    );
    // without ids and api_time, no wait: due at its time
    assert_eq!(c.rows[1].think_time, None);
}

#[test]
fn bad_traces_name_their_line_and_request_or_are_skipped() {
    let good = conversation("ok").replace('\n', " ");
    for (bad, why) in [
        ("{\"id\": \"x\"}", "not an AgentX trace"),
        ("[1, 2]", "not an AgentX trace"),
        ("{oops", "not JSON"),
        (
            r#"{"id": "x", "block_size": 0, "requests": []}"#,
            "block_size",
        ),
        (
            r#"{"id": "x", "block_size": 8, "requests": [{"t": 0, "type": "q"}]}"#,
            "request 1: type",
        ),
        (
            r#"{"id": "x", "block_size": 8, "requests": [{"t": -1, "type": "n", "in": 5, "out": 1}]}"#,
            "t is not a time",
        ),
        (
            r#"{"id": "x", "block_size": 8, "requests": [{"t": 0, "type": "n", "in": 0, "out": 1}]}"#,
            "in must be",
        ),
        (
            r#"{"id": "x", "block_size": 8, "requests": [{"t": 0, "type": "n", "out": 1}]}"#,
            "not a call",
        ),
        (
            r#"{"id": "x", "block_size": 8, "requests": [{"t": 0, "type": "subagent"}]}"#,
            "subagent",
        ),
    ] {
        let text = format!("{good}\n{bad}\n");
        let e = run(&text, false).unwrap_err();
        assert_eq!(e.line, 2, "{bad}: {e}");
        assert!(e.reason.contains(why), "{bad}: {e}");
        let c = run(&text, true).unwrap();
        assert_eq!((c.sessions, c.bad_skipped), (3, 1), "{bad}");
    }
}
