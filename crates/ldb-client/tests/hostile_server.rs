//! The stream reader and the plain GETs against servers that misbehave on
//! purpose: a line that never ends, tokens that stop while keep-alive
//! comments flow, and a `/metrics` page far too large. Each must end in a
//! labelled failure within its limit, holding bounded memory — never a hang
//! or a panic. The server is a few lines of raw HTTP/1.1 on 127.0.0.1, so
//! the bytes on the wire are exactly what the test says.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ldb_client::http::{Http, MAX_BODY_BYTES};
use ldb_client::stream::{RunClock, StreamEnv, run_stream};
use ldb_core::failure::FailureKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does after reading a request's head.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// One token, then a `data:` line that never ends (MiB after MiB).
    EndlessLine,
    /// Two tokens, then only `: keep-alive` comments, forever.
    CommentsOnly,
    /// A body of `MAX_BODY_BYTES` + 1 MiB for a GET.
    HugeBody,
    /// A status line, then header lines without end (64 MiB at most).
    EndlessHeader,
    /// An SSE answer of `: keep-alive` comments only, as fast as they go,
    /// before any token (256 MiB at most).
    CommentsBeforeFirstToken,
    /// The same with empty events (`data:` and a blank line).
    EmptyEventsBeforeFirstToken,
    /// A `/metrics` page of 150,000 series, each with its own label value.
    ManyLabels,
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
        Misbehaviour::EndlessHeader => {
            let _ = sock.write_all(b"HTTP/1.1 200 OK\r\n").await;
            let line = format!("x-junk: {}\r\n", "y".repeat(1000)).repeat(64);
            for _ in 0..1024 {
                if sock.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
        Misbehaviour::CommentsBeforeFirstToken | Misbehaviour::EmptyEventsBeforeFirstToken => {
            let _ = sock.write_all(sse_head).await;
            let one: &[u8] = if matches!(how, Misbehaviour::CommentsBeforeFirstToken) {
                b": keep-alive\n\n"
            } else {
                b"data:\n\n"
            };
            let piece = chunked(&one.repeat(64 * 1024 / one.len()));
            for _ in 0..4096 {
                if sock.write_all(&piece).await.is_err() {
                    return;
                }
            }
        }
        Misbehaviour::ManyLabels => {
            let mut page = String::from("# TYPE vllm:num_requests_running gauge\n");
            for i in 0..150_000 {
                page.push_str(&format!(
                    "vllm:num_requests_running{{model_name=\"m\",engine=\"{i}\"}} 1.0\n"
                ));
            }
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                        page.len()
                    )
                    .as_bytes(),
                )
                .await;
            let _ = sock.write_all(page.as_bytes()).await;
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
        idle_timeout: idle,
        ..StreamEnv::new(Http::new(base, None, 4).expect("client"), RunClock::new())
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

#[tokio::test]
async fn a_header_that_never_ends_fails_the_request_with_a_clear_message() {
    let base = hostile(Misbehaviour::EndlessHeader).await;
    let e = env(&base, None);
    let out = tokio::time::timeout(Duration::from_secs(60), run_stream(&e, body()))
        .await
        .expect("the client gives up by itself");
    let err = out.track.error().expect("a failure");
    // A bad answer (each request fails), not a connection failure (which
    // would end the cell at once as if nothing listened).
    assert_eq!(err.kind, FailureKind::BadResponse, "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("header is larger than the client accepts"),
        "{msg}"
    );
    assert!(!msg.contains("cannot connect"), "{msg}");
    let http = Http::new(&base, None, 4).expect("client");
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        http.get_text("/metrics", Duration::from_secs(50)),
    )
    .await
    .expect("the GET gives up by itself");
    let msg = r.expect_err("refused").to_string();
    assert!(msg.contains("header"), "{msg}");
}

/// Comments or empty events before the first token: the idle limit is not
/// armed yet (it counts from a token), the reader drops them as they come
/// (no memory grows), and the cell's own end (here the cancellation at 3 s)
/// ends the request.
async fn nothing_but_keepalives_before_the_first_token(how: Misbehaviour) {
    let base = hostile(how).await;
    let e = env(&base, Some(Duration::from_secs(1)));
    let cancel = e.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        cancel.cancel();
    });
    let out = tokio::time::timeout(Duration::from_secs(30), run_stream(&e, body()))
        .await
        .expect("the cancellation ends the request");
    assert!(out.cancelled, "{:?}", out.track.error());
    assert!(out.track.error().is_none(), "{:?}", out.track.error());
    assert_eq!(
        e.counters.tokens.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[tokio::test]
async fn endless_comments_before_the_first_token_last_until_the_cell_ends() {
    nothing_but_keepalives_before_the_first_token(Misbehaviour::CommentsBeforeFirstToken).await;
}

#[tokio::test]
async fn endless_empty_events_before_the_first_token_last_until_the_cell_ends() {
    nothing_but_keepalives_before_the_first_token(Misbehaviour::EmptyEventsBeforeFirstToken).await;
}

#[tokio::test]
async fn thousands_of_label_values_in_metrics_are_read_whole() {
    use ldb_core::prometheus::MetricSet;
    let base = hostile(Misbehaviour::ManyLabels).await;
    let http = Http::new(&base, None, 4).expect("client");
    let (status, text) = tokio::time::timeout(
        Duration::from_secs(60),
        http.get_text("/metrics", Duration::from_secs(50)),
    )
    .await
    .expect("answered")
    .expect("under the body cap");
    assert_eq!(status, 200);
    let set = MetricSet::parse(&text);
    assert_eq!(set.samples.len(), 150_000);
    assert_eq!(set.sum("vllm:num_requests_running", &[]), Some(150_000.0));
}

#[tokio::test]
async fn the_first_token_limit_ends_a_request_that_gets_only_comments() {
    let base = hostile(Misbehaviour::CommentsBeforeFirstToken).await;
    let mut e = env(&base, Some(Duration::from_secs(60)));
    e.first_token_timeout = Some(Duration::from_secs(1));
    let out = tokio::time::timeout(Duration::from_secs(30), run_stream(&e, body()))
        .await
        .expect("the first-token limit ends the request");
    let err = out.track.error().expect("a failure");
    assert_eq!(err.kind, FailureKind::Stalled, "{err:?}");
    assert!(err.to_string().contains("no token within 1 s"), "{err}");
    assert_eq!(
        e.counters.failed.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
