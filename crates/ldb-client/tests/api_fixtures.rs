//! The Completions, Responses and Messages streams recorded from real vLLM
//! 0.32 and llama.cpp 11434 (`tests/fixtures/*/api-*`, recorded by
//! `scripts/record-api-fixtures.sh`), sent by a local server and measured by
//! the real stream reader (both readers), with each API chosen on the
//! client: tokens, completion, prompt and cached tokens come out as the
//! recordings say.

use std::path::Path;

use bytes::Bytes;
use ldb_client::Http;
use ldb_client::stream::{RunClock, StreamEnv, StreamOutcome, run_stream};
use ldb_core::api::Api;
use ldb_core::sse::SseDecoder;
use ldb_core::window::WindowBounds;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn read(engine: &str, name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(engine)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Answer one request with `body` as an event stream, closing after it.
async fn serve_once(body: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test input");
    let base = format!("http://{}", listener.local_addr().expect("test input"));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                // the head, then the (small) body the client sends with it
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    base
}

async fn measure(engine: &str, name: &str, api: Api, lean: bool) -> (StreamOutcome, Http) {
    let base = serve_once(read(engine, name)).await;
    let http = Http::new(&base, None, 2)
        .expect("test input")
        .with_lean_reader(lean);
    http.set_api(api);
    let env = StreamEnv::new(http.clone(), RunClock::new());
    assert_eq!(env.path, api.path());
    (run_stream(&env, Bytes::from_static(b"{}")).await, http)
}

/// Output tokens, prompt tokens, cached tokens of a stream read by both readers.
async fn check(engine: &str, name: &str, api: Api, want: (u64, u64, Option<u64>)) {
    for lean in [true, false] {
        let (out, http) = measure(engine, name, api, lean).await;
        assert!(
            out.track.error().is_none(),
            "{name}: {:?}",
            out.track.error()
        );
        assert!(out.done_at.is_some(), "{name}: ends complete");
        let s = out.track.to_sample(0.0, WindowBounds::default());
        assert_eq!(
            (out.track.output_tokens(), s.input_tokens, out.cached_tokens),
            want,
            "{engine}/{name} (lean {lean})"
        );
        assert!(out.track.has_first_token(), "{name}");
        assert_eq!(http.unknown_events(), 0, "{name}: every event is known");
    }
}

#[tokio::test]
async fn vllm_each_api_measures_its_recording() {
    // (output, prompt, cached tokens); the cached pair is the same long
    // prompt sent twice: the second finds 512 of 545 tokens cached
    for (name, api, want) in [
        (
            "api-completions-stream.sse",
            Api::Completions,
            (16, 12, Some(0)),
        ),
        (
            "api-responses-stream.sse",
            Api::Responses,
            (16, 42, Some(0)),
        ),
        ("api-messages-stream.sse", Api::Messages, (16, 42, Some(0))),
        (
            "api-responses-cached.sse",
            Api::Responses,
            (8, 545, Some(512)),
        ),
        (
            "api-messages-cached.sse",
            Api::Messages,
            (8, 545, Some(512)),
        ),
    ] {
        check("vllm-0.32.0", name, api, want).await;
    }
}

#[tokio::test]
async fn llamacpp_each_api_measures_its_recording() {
    // llama.cpp reports the cached part of a Messages request in
    // message_start (the responses request before it left the same prompt
    // in the slot)
    for (name, api, want) in [
        (
            "api-responses-stream.sse",
            Api::Responses,
            (16, 42, Some(0)),
        ),
        ("api-messages-stream.sse", Api::Messages, (16, 42, Some(41))),
    ] {
        check("llamacpp-11434.0.0", name, api, want).await;
    }
}

/// Each recorded payload parses, the text deltas are the answer the final
/// event repeats, and the finish reason reads in the chat API's words: every
/// recording stopped at its 16-token limit, which vLLM's Responses route and
/// both Messages routes say (`length`), and llama.cpp's Responses route
/// reports as plain `completed` (no reason).
#[test]
fn recorded_text_deltas_rebuild_the_answer() {
    for (engine, name, api, finish) in [
        (
            "vllm-0.32.0",
            "api-responses-stream.sse",
            Api::Responses,
            Some("length"),
        ),
        (
            "vllm-0.32.0",
            "api-messages-stream.sse",
            Api::Messages,
            Some("length"),
        ),
        (
            "llamacpp-11434.0.0",
            "api-responses-stream.sse",
            Api::Responses,
            None,
        ),
        (
            "llamacpp-11434.0.0",
            "api-messages-stream.sse",
            Api::Messages,
            Some("length"),
        ),
    ] {
        let bytes = read(engine, name);
        let mut text = String::new();
        let (mut deltas, mut ends) = (0, 0);
        let mut finished = None;
        let mut dec = SseDecoder::new();
        dec.feed(&bytes, |p| {
            let e = api.parse_event(p).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!e.unknown && e.chunk.error.is_none(), "{name}");
            if let Some(t) = &e.chunk.text {
                text.push_str(t);
            }
            deltas += u32::from(e.chunk.has_tokens);
            ends += u32::from(e.end);
            if let Some(f) = &e.chunk.finish_reason {
                finished = Some(f.to_string());
            }
        });
        assert_eq!((deltas, ends), (16, 1), "{engine}/{name}");
        assert_eq!(finished.as_deref(), finish, "{engine}/{name}");
        let whole = String::from_utf8_lossy(&bytes);
        assert!(!text.is_empty());
        if api == Api::Responses {
            assert!(whole.contains(&format!(
                "\"text\":{}",
                serde_json::to_string(&text).expect("test input")
            )));
        }
    }
}

/// An event of a type no API defines is counted and skipped; a known
/// event without its fields fails the request with the reason.
#[tokio::test]
async fn unknown_events_are_counted_malformed_ones_fail() {
    let rec =
        String::from_utf8(read("vllm-0.32.0", "api-messages-stream.sse")).expect("test input");
    let odd = "event: brand_new\ndata: {\"type\":\"brand_new\",\"x\":[1]}\n\n";
    let body = rec.replacen(
        "event: content_block_stop",
        &format!("{odd}event: content_block_stop"),
        1,
    );
    let base = serve_once(body.into_bytes()).await;
    let http = Http::new(&base, None, 2).expect("test input");
    http.set_api(Api::Messages);
    let out = run_stream(&StreamEnv::new(http.clone(), RunClock::new()), Bytes::new()).await;
    assert!(out.track.error().is_none());
    assert_eq!((out.track.output_tokens(), http.unknown_events()), (16, 1));

    let bad = rec.replacen("\"text\":\"5\"", "\"text\":5", 1);
    let base = serve_once(bad.into_bytes()).await;
    let http = Http::new(&base, None, 2).expect("test input");
    http.set_api(Api::Messages);
    let out = run_stream(&StreamEnv::new(http, RunClock::new()), Bytes::new()).await;
    let e = out
        .track
        .error()
        .expect("malformed event fails the request");
    assert!(e.to_string().contains("content_block_delta"), "{e}");
}
