//! Property-based fuzzing of the Responses and Messages event parsers, as
//! `fuzz.rs` does the chat chunk parser: arbitrary bytes, and event-shaped
//! JSON (a known or unknown `type`, the APIs' keys nested at random, hostile
//! values), must never panic and must take bounded time; well-formed text
//! deltas must give back their text on the right channel.

mod common;

use common::bounded;

use ldb_core::api::Api;
use ldb_core::chunk::Channel;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const TYPES: &[&str] = &[
    "response.created",
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "text_delta",
    "thinking_delta",
    "input_json_delta",
    "surprise",
];

const KEYS: &[&str] = &[
    "type",
    "delta",
    "text",
    "thinking",
    "partial_json",
    "response",
    "message",
    "usage",
    "input_tokens",
    "output_tokens",
    "input_tokens_details",
    "cached_tokens",
    "output_tokens_details",
    "reasoning_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "stop_reason",
    "status",
    "incomplete_details",
    "reason",
    "error",
    "id",
    "item_id",
];

fn event_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,24}".prop_map(Value::String),
        prop::sample::select(TYPES).prop_map(|t| json!(t)),
    ];
    let tree = leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    });
    (
        prop::sample::select(TYPES),
        prop::collection::vec((prop::sample::select(KEYS), tree), 0..6),
    )
        .prop_map(|(t, kv)| {
            let mut m: Map<String, Value> =
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            m.insert("type".into(), json!(t));
            Value::Object(m)
        })
}

proptest! {
    #[test]
    fn any_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        for api in Api::ALL {
            bounded(|| { let _ = api.parse_event(&bytes); });
        }
    }

    #[test]
    fn event_shaped_json_never_panics(v in event_json()) {
        let bytes = serde_json::to_vec(&v).expect("serializes");
        for api in [Api::Responses, Api::Messages] {
            bounded(|| { let _ = api.parse_event(&bytes); });
        }
    }

    #[test]
    fn well_formed_deltas_give_back_their_text(text in "\\PC{1,40}", thinking in any::<bool>()) {
        let (kind, field) = if thinking { ("thinking_delta", "thinking") } else { ("text_delta", "text") };
        let m = json!({"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: text}});
        let bytes = serde_json::to_vec(&m).expect("test input");
        let e = Api::Messages.parse_event(&bytes).expect("test input");
        prop_assert_eq!(e.chunk.text.as_deref(), Some(text.as_str()));
        let want = if thinking { Channel::Reasoning } else { Channel::Content };
        prop_assert_eq!(e.chunk.channel, want);
        let kind = if thinking { "response.reasoning_text.delta" } else { "response.output_text.delta" };
        let r = json!({"type": kind, "delta": text, "item_id": "i"});
        let bytes = serde_json::to_vec(&r).expect("test input");
        let e = Api::Responses.parse_event(&bytes).expect("test input");
        prop_assert_eq!(e.chunk.text.as_deref(), Some(text.as_str()));
        prop_assert_eq!(e.chunk.channel, want);
    }
}
