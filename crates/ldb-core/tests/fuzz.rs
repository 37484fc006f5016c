//! Property-based fuzzing of everything that reads bytes a server or a file
//! hands us: the SSE decoder, the chunk parser, the Prometheus parser and the
//! result loader. Each target feeds arbitrary bytes and structure-aware
//! inputs (well-formed shapes with hostile values, split at random places)
//! and checks that nothing panics, that each input is handled in bounded
//! time, and, where the input is well formed, that the answer is right.
//!
//! CI runs proptest's default number of cases per target; more with
//! `PROPTEST_CASES`. The ten-million-input long run uses the cheaper mutation
//! fuzzer `crates/ldb-client/examples/fuzz_long.rs` (docs/reliability.md).

use std::time::{Duration, Instant};

use ldb_core::chunk::parse_chunk;
use ldb_core::document::ResultDocument;
use ldb_core::prometheus::MetricSet;
use ldb_core::sse::SseDecoder;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Far beyond what any of these inputs (a few KB) needs; a parser that takes
/// this long on one has gone quadratic or worse.
const PER_INPUT: Duration = Duration::from_secs(2);

fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    let took = t0.elapsed();
    assert!(took < PER_INPUT, "{what} took {took:?} on one input");
    out
}

/// Feed `bytes` to a fresh decoder in pieces cut at `cuts` (positions taken
/// modulo the length), then finish; the payloads in order.
fn decode_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| if bytes.is_empty() { 0 } else { c % bytes.len() })
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut dec = SseDecoder::new();
    let mut start = 0;
    for &cut in at.iter().chain(std::iter::once(&bytes.len())) {
        dec.feed(&bytes[start..cut], |p| out.push(p.to_vec()));
        start = cut;
    }
    dec.finish(|p| out.push(p.to_vec()));
    out
}

/// One SSE event as servers write it: a payload (no newline inside), maybe
/// preceded by a keep-alive comment or an `event:` line, `\n` or `\r\n` ends.
fn sse_event() -> impl Strategy<Value = (String, String)> {
    (
        "[^\r\n]{0,80}",
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(payload, crlf, comment, event_line, space)| {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut wire = String::new();
            if comment {
                wire.push_str(&format!(": keep-alive{nl}"));
            }
            if event_line {
                wire.push_str(&format!("event: message{nl}"));
            }
            let sep = if space { "data: " } else { "data:" };
            wire.push_str(&format!("{sep}{payload}{nl}{nl}"));
            // One space after the colon belongs to the framing (the SSE
            // rule): "data: x" and "data:x" both carry "x", "data:  x" " x".
            let carried = if space {
                payload
            } else {
                payload.strip_prefix(' ').unwrap_or(&payload).to_string()
            };
            (wire, carried)
        })
}

/// Chunk-shaped JSON: the keys the parser looks at, holding values of every
/// type, nested a few levels.
fn chunk_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,24}".prop_map(Value::String),
    ];
    let keys = prop::sample::select(vec![
        "id",
        "object",
        "choices",
        "delta",
        "content",
        "reasoning_content",
        "reasoning",
        "text",
        "finish_reason",
        "usage",
        "completion_tokens",
        "prompt_tokens",
        "prompt_tokens_details",
        "cached_tokens",
        "completion_tokens_details",
        "reasoning_tokens",
        "timings",
        "predicted_n",
        "error",
        "message",
        "index",
        "tool_calls",
        "function",
        "name",
        "arguments",
    ]);
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// A Prometheus sample line and what it says: name, labels, value.
fn metric_line() -> impl Strategy<Value = (String, Vec<(String, String)>, f64)> {
    (
        "[a-z_:][a-z0-9_:]{0,30}",
        prop::collection::vec(("[a-z][a-z0-9_]{0,12}", "[^\"\\\\\n]{0,16}"), 0..4),
        -1e12f64..1e12,
    )
        .prop_map(|(name, labels, value)| {
            // Keys the parser treats specially (pipeline and tensor ranks)
            // are left out, and each key appears once.
            let mut seen = std::collections::BTreeSet::new();
            let labels = labels
                .into_iter()
                .filter(|(k, _)| !k.ends_with("_rank") && seen.insert(k.clone()))
                .collect();
            (name, labels, value)
        })
}

fn exposition_line(name: &str, labels: &[(String, String)], value: f64) -> String {
    if labels.is_empty() {
        format!("{name} {value}\n")
    } else {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{name}{{{}}} {value}\n", l.join(","))
    }
}

/// A small valid result file: what the loader's mutation target starts from.
fn small_result_file() -> String {
    let mut v = serde_json::to_value(ResultDocument::default()).expect("serializes");
    v["results"] = json!([{
        "concurrency": 2,
        "context_tokens": 1024,
        "aggregate_tps": 123.4,
        "status": "ok",
        "request_samples": [{"ttft": 0.1, "latency": 2.0, "output_tokens": 40, "completed": true}]
    }]);
    v.to_string()
}

proptest! {
    #[test]
    fn sse_any_bytes_cut_anywhere_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        bounded("SSE decoder", || decode_in_pieces(&bytes, &cuts));
    }

    #[test]
    fn sse_payloads_do_not_depend_on_where_reads_end(
        events in prop::collection::vec(sse_event(), 0..20),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let wire: String = events.iter().map(|(w, _)| w.as_str()).collect();
        let want: Vec<Vec<u8>> = events.iter().map(|(_, p)| p.as_bytes().to_vec()).collect();
        let whole = bounded("SSE decoder", || decode_in_pieces(wire.as_bytes(), &[]));
        let pieces = bounded("SSE decoder", || decode_in_pieces(wire.as_bytes(), &cuts));
        prop_assert_eq!(&whole, &want);
        prop_assert_eq!(&pieces, &want);
    }

    #[test]
    fn chunk_parser_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        bounded("chunk parser", || { let _ = parse_chunk(&bytes); });
    }

    #[test]
    fn chunk_parser_chunk_shaped_json_never_panics(v in chunk_json()) {
        let bytes = serde_json::to_vec(&v).expect("serializes");
        bounded("chunk parser", || { let _ = parse_chunk(&bytes); });
    }

    #[test]
    fn prometheus_any_text_never_panics(text in "\\PC{0,2048}") {
        bounded("Prometheus parser", || MetricSet::parse(&text));
    }

    #[test]
    fn prometheus_any_bytes_as_text_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let text = String::from_utf8_lossy(&bytes);
        bounded("Prometheus parser", || MetricSet::parse(&text));
    }

    #[test]
    fn prometheus_well_formed_samples_are_read_back(
        lines in prop::collection::vec(metric_line(), 1..12),
        comments in any::<bool>(),
    ) {
        let mut text = String::new();
        for (name, labels, value) in &lines {
            if comments {
                text.push_str(&format!("# HELP {name} something\n# TYPE {name} gauge\n"));
            }
            text.push_str(&exposition_line(name, labels, *value));
        }
        let m = bounded("Prometheus parser", || MetricSet::parse(&text));
        for (name, labels, value) in &lines {
            let found = m.samples.iter().any(|s| {
                s.name == *name
                    && (s.value - value).abs() <= 1e-9 * value.abs().max(1.0)
                    && labels.iter().all(|(k, v)| s.label(k) == Some(v.as_str()))
            });
            prop_assert!(found, "{} not read back from:\n{}", name, text);
        }
    }

    #[test]
    fn loader_any_text_never_panics(text in "\\PC{0,2048}") {
        bounded("result loader", || { let _ = ResultDocument::from_json_str(&text); });
    }

    #[test]
    fn loader_cut_or_damaged_files_never_panic(
        cut in any::<usize>(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
    ) {
        let good = small_result_file();
        let mut bytes = good.into_bytes();
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        let cut = cut % (bytes.len() + 1);
        let text = String::from_utf8_lossy(&bytes[..cut]).into_owned();
        bounded("result loader", || { let _ = ResultDocument::from_json_str(&text); });
    }

    #[test]
    fn loader_json_of_any_shape_never_panics(v in chunk_json(), as_results in any::<bool>()) {
        let doc = if as_results {
            json!({"metadata": v.clone(), "results": [v]})
        } else {
            v
        };
        let text = doc.to_string();
        bounded("result loader", || { let _ = ResultDocument::from_json_str(&text); });
    }
}

#[test]
fn the_mutation_target_is_a_loadable_result() {
    // Otherwise the damaged-file target would only ever test rejections.
    ResultDocument::from_json_str(&small_result_file()).expect("loads");
}
