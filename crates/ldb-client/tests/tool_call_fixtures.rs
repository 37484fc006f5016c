//! The chat parser and the per-request accounting on streamed tool calls
//! recorded from the real engines (`scripts/record-tool-calls.sh`): what
//! each engine sends for a forced tool call, and what we count of it.

use std::path::PathBuf;

use ldb_core::chunk::{Channel, is_done, parse_chunk};
use ldb_core::sse::SseDecoder;
use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};

/// What one recorded stream gives.
#[derive(Debug, Default)]
struct Calls {
    /// Function names in the order they came.
    names: Vec<String>,
    /// The argument fragments, joined.
    arguments: String,
    /// Chunks on the tool-call channel.
    tool_chunks: u64,
    /// Chunks on the answer channel.
    content_chunks: u64,
    finish_reason: Option<String>,
    done: bool,
    /// The request's sample, chunks 10 ms apart.
    sample: ldb_core::result::RequestSample,
}

fn read(folder: &str, name: &str) -> Calls {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder)
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut payloads = Vec::new();
    let mut dec = SseDecoder::new();
    let mut done = false;
    let mut take = |p: &[u8]| {
        if is_done(p) {
            done = true;
        } else {
            payloads.push(p.to_vec());
        }
    };
    dec.feed(&bytes, &mut take);
    dec.finish(&mut take);
    let window = WindowBounds {
        start: Some(0.0),
        end: None,
    };
    let mut track = RequestTrack::new(0.0);
    let mut out = Calls {
        done,
        ..Calls::default()
    };
    for (i, p) in payloads.iter().enumerate() {
        let c = parse_chunk(p).unwrap_or_else(|e| panic!("{name} chunk {i}: {e}"));
        track.on_chunk(ChunkEvent::from_chunk(0.01 * (i + 1) as f64, &c), window);
        if let Some(n) = &c.tool_call_name {
            out.names.push(n.to_string());
        }
        match c.channel {
            Channel::ToolCall => {
                out.tool_chunks += 1;
                out.arguments.push_str(c.text.as_deref().unwrap_or(""));
            }
            Channel::Content => out.content_chunks += 1,
            _ => {}
        }
        if let Some(f) = &c.finish_reason {
            out.finish_reason = Some(f.to_string());
        }
    }
    track.mark_completed();
    out.sample = track.to_sample(0.0, window);
    out
}

const VLLM: &str = "vllm-0.32.0";
const LLAMACPP: &str = "llamacpp-11434.0.0";

#[test]
fn vllm_forced_named_call_streams_the_name_then_argument_values() {
    // vLLM 0.32 (hermes parser, named tool_choice: guided decoding): the
    // name in a chunk of its own, usage already at 21 (the call's opening
    // is generated before the name is sent), then only the argument's
    // string pieces; the JSON around them arrives as usage on an empty
    // delta, and the finish reason is "stop", not "tool_calls".
    let c = read(VLLM, "tool-call-stream.sse");
    assert!(c.done);
    assert_eq!(c.names, ["get_weather"]);
    assert_eq!(c.arguments, "\"Paris\"");
    assert_eq!((c.tool_chunks, c.content_chunks), (4, 0));
    assert_eq!(c.finish_reason.as_deref(), Some("stop"));
    // every token after the role chunk is the call's: usage says 45
    assert_eq!(
        (c.sample.output_tokens, c.sample.tool_call_tokens),
        (45, 45)
    );
    // the name's chunk is the first token and the first tool-call token
    assert_eq!(c.sample.ttftc, Some(0.02));
    assert!((c.sample.ttft - 0.02).abs() < 1e-12);
    assert_eq!(c.sample.ttfo, 0.0, "no answer text");
}

#[test]
fn vllm_required_call_ends_with_tool_calls() {
    let c = read(VLLM, "tool-call-required-stream.sse");
    assert_eq!(c.names, ["get_weather"]);
    assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        (c.sample.output_tokens, c.sample.tool_call_tokens),
        (45, 45)
    );
}

#[test]
fn llamacpp_jinja_does_not_force_the_call_for_smollm2() {
    // llama-server 11434 with --jinja: the object form of a named
    // tool_choice is refused with a warning ("type must be string") and
    // the default used; "required" is accepted but SmolLM2's template has
    // no tool section, so the model answers in text (docs/engines.md).
    for name in ["tool-call-stream.sse", "tool-call-required-stream.sse"] {
        let c = read(LLAMACPP, name);
        assert!(c.done, "{name}");
        assert!(c.names.is_empty() && c.tool_chunks == 0, "{name}");
        assert_eq!(c.finish_reason.as_deref(), Some("length"), "{name}");
        assert_eq!(c.sample.tool_call_tokens, 0);
        assert_eq!(c.sample.ttftc, None);
        assert_eq!(c.sample.output_tokens, 48);
    }
}
