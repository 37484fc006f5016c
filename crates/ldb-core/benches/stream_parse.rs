//! Client cost per streamed token: SSE framing + chunk parsing + window
//! accounting, on vLLM-shaped (continuous usage) and SGLang-shaped chunks.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ldb_core::chunk::{is_done, parse_chunk};
use ldb_core::sse::SseDecoder;
use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};

const VLLM: &str = r#"data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1756342000,"model":"GLM-5.3-Flash","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":78,"completion_tokens":NNN,"total_tokens":MMM}}"#;
const SGLANG: &str = r#"data: {"id":"5b1d0f3c9a7e4c2b","object":"chat.completion.chunk","created":1756342000,"model":"qwen3","choices":[{"index":0,"delta":{"role":null,"content":" tok","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":{"prompt_tokens":78,"completion_tokens":NNN,"total_tokens":MMM,"reasoning_tokens":0}}"#;

fn body(template: &str, tokens: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 1..=tokens {
        out.push_str(
            &template
                .replace("NNN", &i.to_string())
                .replace("MMM", &(78 + i).to_string()),
        );
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn consume(bytes: &[u8]) -> u64 {
    let mut dec = SseDecoder::new();
    let mut track = RequestTrack::new(0.0);
    let window = WindowBounds {
        start: Some(0.0),
        end: None,
    };
    let mut t = 0.0;
    // Feed in 4 KiB reads, like a socket would deliver them.
    for part in bytes.chunks(4096) {
        t += 0.001;
        dec.feed(part, |payload| {
            if is_done(payload) {
                track.mark_completed();
                return;
            }
            if let Ok(c) = parse_chunk(payload) {
                track.on_chunk(ChunkEvent::from_chunk(t, &c), window);
            }
        });
    }
    track.window_tokens
}

fn bench(c: &mut Criterion) {
    const TOKENS: usize = 1024;
    let mut g = c.benchmark_group("per_token");
    g.throughput(Throughput::Elements(TOKENS as u64));
    for (name, tpl) in [
        ("vllm_continuous_usage", VLLM),
        ("sglang_continuous_usage", SGLANG),
    ] {
        let b = body(tpl, TOKENS);
        assert_eq!(consume(&b), TOKENS as u64);
        g.bench_function(name, |bench| {
            bench.iter(|| consume(std::hint::black_box(&b)))
        });
    }
    g.finish();
}

// A private module keeps the generated `pub fn` out of `missing_docs`' reach.
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
criterion_main!(group::benches);
