//! Property-based fuzzing of the agent rows of our JSONL and of the AIPerf
//! and AgentX converters, as `fuzz_api.rs` does the event parsers: any
//! text, and row-shaped hostile JSON (the keys these formats use, nested
//! at random, hostile values), must never panic and must take bounded
//! time; a bad row is an error naming its line; well-formed agent rows
//! read back what they carry.

use std::time::{Duration, Instant};

use ldb_core::trace::convert::{ConvertOptions, Converted, Source};
use ldb_core::trace::{TracePrompt, jsonl};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const PER_INPUT: Duration = Duration::from_secs(2);

fn bounded<T>(f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    assert!(
        t0.elapsed() < PER_INPUT,
        "took {:?} on one input",
        t0.elapsed()
    );
    out
}

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
