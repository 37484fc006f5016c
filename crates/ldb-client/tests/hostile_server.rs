//! The stream reader and the plain GETs against servers that misbehave on
//! purpose: a line that never ends, tokens that stop while keep-alive
//! comments flow, and a `/metrics` page far too large. Each must end in a
//! labelled failure within its limit, holding bounded memory — never a hang
//! or a panic. The server is a few lines of raw HTTP/1.1 on 127.0.0.1, so
//! the bytes on the wire are exactly what the test says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ldb_client::http::{Http, MAX_BODY_BYTES};
use ldb_client::stream::{CellCounters, RunClock, SharedWindow, StreamEnv, run_stream};
use ldb_core::failure::FailureKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// What the server does after reading a request's head.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// One token, then a `data:` line that never ends (MiB after MiB).
    EndlessLine,
    /// Two tokens, then only `: keep-alive` comments, forever.
    CommentsOnly,
    /// A body of `MAX_BODY_BYTES` + 1 MiB for a GET.
    HugeBody,
}

const TOKEN: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";

async fn serve_one(mut sock: TcpStream, how: Misbehaviour) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the end of the head (the body of a POST is small and
    // ignored), so the client sees an answer to a whole request.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let chunked = |payload: &[u8]| {
        let mut v = format!("{:x}\r\n", payload.len()).into_bytes();
        v.extend_from_slice(payload);
        v.extend_from_slice(b"\r\n");
        v
    };
    let sse_head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    match how {
        Misbehaviour::EndlessLine => {
            let _ = sock.write_all(sse_head).await;
            let _ = sock.write_all(&chunked(TOKEN)).await;
            let _ = sock.write_all(&chunked(b"data: ")).await;
            let piece = chunked(&vec![b'x'; 64 * 1024]);
            // 64 MiB at most: the client must have given up long before.
            for _ in 0..1024 {
                if sock.write_all(&piece).await.is_err() {
                    return;
                }
            }
        }
        Misbehaviour::CommentsOnly => {
            let _ = sock.write_all(sse_head).await;
            let _ = sock.write_all(&chunked(TOKEN)).await;
            let _ = sock.write_all(&chunked(TOKEN)).await;
            // Keep-alives every 100 ms for at most 30 s.
            for _ in 0..300 {
                if sock.write_all(&chunked(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Misbehaviour::HugeBody => {
            let len = MAX_BODY_BYTES + 1024 * 1024;
            let _ = sock
                .write_all(
                    format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {len}\r\n\r\n")
                        .as_bytes(),
                )
                .await;
            let piece = vec![b'#'; 64 * 1024];
            let mut sent = 0;
            while sent < len {
                let n = piece.len().min(len - sent);
                if sock.write_all(&piece[..n]).await.is_err() {
                    return;
                }
                sent += n;
            }
        }
    }
}

/// A server on 127.0.0.1 that misbehaves `how` on every connection.
async fn hostile(how: Misbehaviour) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_one(sock, how));
        }
    });
    format!("http://{addr}")
}

fn env(base: &str, idle: Option<Duration>) -> StreamEnv {
    StreamEnv {
        http: Http::new(base, None, 4).expect("client"),
        clock: RunClock::new(),
        window: Arc::new(SharedWindow::default()),
        counters: Arc::new(CellCounters::default()),
        cancel: CancellationToken::new(),
        text_sink: None,
        path: "/v1/chat/completions",
        idle_timeout: idle,
    }
}

fn body() -> Bytes {
    Bytes::from_static(br#"{"model":"m","messages":[],"stream":true}"#)
}

#[tokio::test]
async fn an_endless_sse_line_fails_the_request_at_the_line_cap() {
    let base = hostile(Misbehaviour::EndlessLine).await;
    let e = env(&base, None);
    let out = tokio::time::timeout(Duration::from_secs(60), run_stream(&e, body()))
        .await
        .expect("the reader gives up by itself");
    let err = out.track.error().expect("a failure");
    assert_eq!(err.kind, FailureKind::BadResponse, "{err:?}");
    assert!(
        err.to_string().contains("SSE line longer than 1 MiB"),
        "{err}"
    );
    assert_eq!(
        e.counters.tokens.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test]
async fn tokens_that_stop_while_comments_flow_hit_the_idle_limit() {
    let base = hostile(Misbehaviour::CommentsOnly).await;
    let e = env(&base, Some(Duration::from_secs(1)));
    let t0 = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(20), run_stream(&e, body()))
        .await
        .expect("the idle limit ends the request");
    let err = out.track.error().expect("a failure");
    assert_eq!(err.kind, FailureKind::Stalled, "{err:?}");
    assert!(err.to_string().contains("no token for 1 s"), "{err}");
    // The limit counts from the last token, not from the last comment.
    assert!(t0.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_get_answer_beyond_the_body_cap_is_refused_not_held() {
    let base = hostile(Misbehaviour::HugeBody).await;
    let http = Http::new(&base, None, 4).expect("client");
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        http.get_text("/metrics", Duration::from_secs(50)),
    )
    .await
    .expect("the read gives up by itself");
    let err = r.expect_err("refused");
    assert!(err.to_string().contains("larger than 16 MiB"), "{err}");
}
