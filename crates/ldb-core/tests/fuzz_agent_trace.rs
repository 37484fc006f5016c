//! Property-based fuzzing of the agent rows of our JSONL and of the AIPerf
//! and AgentX converters, as `fuzz_api.rs` does the event parsers: any
//! text, and row-shaped hostile JSON (the keys these formats use, nested
//! at random, hostile values), must never panic and must take bounded
//! time; a bad row is an error naming its line; well-formed agent rows
//! read back what they carry.

mod common;

use common::bounded;

use ldb_core::trace::convert::{ConvertOptions, Converted, Source};
use ldb_core::trace::{TracePrompt, jsonl};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// The keys of our rows, of AIPerf's and of AgentX's, and of their parts.
const KEYS: &[&str] = &[
    "timestamp",
    "output_tokens",
    "input_tokens",
    "prompt",
    "messages",
    "session_id",
    "hash_ids",
    "tools",
    "tool_choice",
    "think_time",
    "tool_time",
    "role",
    "content",
    "tokens",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
    "id",
    "type",
    "function",
    "name",
    "arguments",
    "input_schema",
    "parameters",
    "input_length",
    "output_length",
    "text_input",
    "delay",
    "payload",
    "block_size",
    "requests",
    "t",
    "in",
    "out",
    "stop",
    "input_types",
    "api_time",
    "agent_id",
];

const WORDS: &[&str] = &[
    "system",
    "user",
    "assistant",
    "tool",
    "function",
    "n",
    "s",
    "subagent",
    "tool_use",
    "tool_result",
    "auto",
    "required",
    "c1",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (0u64..2000).prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,16}".prop_map(Value::String),
        prop::sample::select(WORDS).prop_map(|w| json!(w)),
    ]
}

fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn row_json() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(KEYS), tree()), 0..10).prop_map(|kv| {
        let m: Map<String, Value> = kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Value::Object(m)
    })
}

/// One message of an agent row: known and unknown roles, the keys our
/// rows use, each present or not, with plausible or hostile values.
fn message_json() -> impl Strategy<Value = Value> {
    let call = json!([{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{}"}}]);
    (
        prop::sample::select(&["system", "user", "assistant", "tool", "robot"][..]),
        prop::option::of(leaf()),
        prop::option::of(prop_oneof![(0u64..2000).prop_map(|n| json!(n)), leaf()]),
        prop::option::of(prop_oneof![Just(call), tree()]),
        prop::option::of(prop_oneof![Just(json!("c1")), leaf()]),
        prop::option::of(leaf()),
    )
        .prop_map(|(role, content, tokens, calls, answers, reasoning)| {
            let mut m = Map::new();
            m.insert("role".into(), json!(role));
            for (k, v) in [
                ("content", content),
                ("tokens", tokens),
                ("tool_calls", calls),
                ("tool_call_id", answers),
                ("reasoning_content", reasoning),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

/// An agent row: messages of every role, tools and waits, each present or
/// not.
fn agent_row_json() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(message_json(), 0..5),
        prop::option::of(tree()),
        prop::option::of(prop_oneof![Just(json!("auto")), Just(json!("f")), leaf()]),
        prop::option::of(leaf()),
        prop::option::of(leaf()),
    )
        .prop_map(|(msgs, tools, choice, think, tool)| {
            let mut m = Map::new();
            m.insert("timestamp".into(), json!(1.0));
            m.insert("output_tokens".into(), json!(4));
            m.insert("messages".into(), Value::Array(msgs));
            for (k, v) in [
                ("tools", tools),
                ("tool_choice", choice),
                ("think_time", think),
                ("tool_time", tool),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

/// An AgentX call or subagent entry with plausible or hostile values.
fn agentx_call() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["n", "s", "subagent", "q"][..]),
        prop_oneof![(0u32..100).prop_map(|t| json!(f64::from(t) / 4.0)), leaf()],
        prop_oneof![(0u64..3000).prop_map(|n| json!(n)), leaf()],
        (0u64..300).prop_map(|n| json!(n)),
        prop::collection::vec(0u64..12, 0..12),
        prop::sample::select(&["", "tool_use", "end_turn"][..]),
        prop::option::of(prop_oneof![
            Just(json!(["tool_result"])),
            Just(json!(["text"])),
            tree()
        ]),
        prop::option::of(leaf()),
        prop::option::of(leaf()),
    )
        .prop_map(|(kind, t, input, output, ids, stop, types, api, think)| {
            let mut m = Map::new();
            for (k, v) in [
                ("type", json!(kind)),
                ("t", t),
                ("in", input),
                ("out", output),
                ("hash_ids", json!(ids)),
                ("stop", json!(stop)),
                ("agent_id", json!("a1")),
            ] {
                m.insert(k.into(), v);
            }
            for (k, v) in [
                ("input_types", types),
                ("api_time", api),
                ("think_time", think),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        })
}

fn convert(source: Source, text: &str) {
    for skip_bad in [false, true] {
        let o = ConvertOptions {
            start_every_s: 1.0,
            skip_bad,
        };
        let mut c = Converted::default();
        if source.convert(text, &o, &mut c).is_ok() {
            let _ = c.finish();
            let _ = c.summary();
        }
    }
}

proptest! {
    #[test]
    fn any_text_never_panics(text in "\\PC{0,600}") {
        bounded(|| {
            if let Err(e) = jsonl::parse(7, &text) {
                assert_eq!(e.line, 7);
            }
            convert(Source::Aiperf, &text);
            convert(Source::Agentx, &text);
        });
    }

    #[test]
    fn row_shaped_json_never_panics(rows in prop::collection::vec(row_json(), 1..4)) {
        let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        let text = text.join("\n");
        bounded(|| {
            for (i, line) in text.lines().enumerate() {
                if let Err(e) = jsonl::parse(i as u64 + 1, line) {
                    assert_eq!(e.line, i as u64 + 1);
                    assert!(!e.reason.contains('\n'), "one line: {}", e.reason);
                }
            }
            convert(Source::Aiperf, &text);
            convert(Source::Agentx, &text);
        });
    }

    #[test]
    fn agent_shaped_rows_never_panic_and_fail_with_their_line(row in agent_row_json()) {
        let text = row.to_string();
        bounded(|| match jsonl::parse(3, &text) {
            Ok(r) => {
                let wait = r.agent.as_deref().and_then(|a| a.wait()).unwrap_or(0.0);
                assert!(wait.is_finite() && wait >= 0.0);
            }
            Err(e) => {
                assert_eq!(e.line, 3);
                assert!(!e.reason.contains('\n'), "one line: {}", e.reason);
            }
        });
    }

    #[test]
    fn what_the_agentx_converter_writes_always_reads_back(
        calls in prop::collection::vec(agentx_call(), 0..8),
        inner in prop::collection::vec(agentx_call(), 0..4),
        block in prop_oneof![(1u64..128).prop_map(|b| json!(b)), leaf()],
    ) {
        let mut calls = calls;
        calls.push(json!({"type": "subagent", "t": 1.0, "agent_id": "a1", "requests": inner}));
        let trace = json!({"id": "x", "block_size": block, "requests": calls});
        bounded(|| {
            let mut c = Converted::default();
            let o = ConvertOptions::default();
            if Source::Agentx.convert(&trace.to_string(), &o, &mut c).is_ok() {
                let back = c.finish();
                assert!(back.is_ok(), "{back:?}: {trace}");
            }
        });
    }

    #[test]
    fn well_formed_agent_rows_read_back(
        tokens in 1u64..100_000,
        text in "\\PC{0,40}",
        reasoning in "\\PC{0,40}",
        think in 0.0f64..1e6,
        tool in 0.0f64..1e6,
        name in "[a-z_]{1,12}",
    ) {
        let row = json!({
            "timestamp": 1.5, "session_id": "s", "output_tokens": 9,
            "messages": [
                {"role": "assistant", "content": text, "reasoning_content": reasoning,
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": name, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "tokens": tokens}
            ],
            "tools": [{"name": name, "input_schema": {"type": "object"}}],
            "think_time": think, "tool_time": tool
        });
        let r = jsonl::parse(1, &row.to_string()).expect("well formed");
        let a = r.agent.as_deref().expect("agent extras");
        prop_assert_eq!(a.wait(), Some(think + tool));
        let TracePrompt::Messages(m) = &r.prompt else { panic!("messages") };
        prop_assert_eq!(m[0].content.as_deref(), Some(text.as_str()));
        prop_assert_eq!(m[0].reasoning_content.as_deref(), Some(reasoning.as_str()));
        prop_assert_eq!(m[1].tokens, Some(tokens));
        prop_assert!(r.chat_only());
    }
}
