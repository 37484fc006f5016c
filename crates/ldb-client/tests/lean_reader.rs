//! The lean HTTP/1.1 stream reader against exact bytes on the wire: each
//! framing, keep-alive reuse and `Connection: close`, error bodies,
//! redirects, the API key header, and usage carried by empty-delta chunks.
//! Every case also runs through the reqwest reader, and both must measure
//! the same thing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::http::Http;
use ldb_client::stream::{RunClock, StreamEnv, StreamOutcome, run_stream};
use ldb_core::failure::FailureKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// How the test server frames its answers.
#[derive(Clone, Copy, PartialEq)]
enum Frame {
    Chunked,
    Length,
    /// No length, body until the server closes.
    UntilClose,
}

#[derive(Clone)]
struct Script {
    status_line: &'static str,
    extra_head: &'static str,
    body: Vec<u8>,
    frame: Frame,
    /// Close the connection after each answer.
    close: bool,
    /// Write the answer one byte at a time.
    trickle: bool,
}

struct Server {
    base: String,
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

async fn read_request(sock: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match sock.read(&mut b).await {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let len: usize = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body).await.ok()?;
    Some(text)
}

fn answer(s: &Script) -> Vec<u8> {
    let mut v = format!("HTTP/1.1 {}\r\n{}", s.status_line, s.extra_head).into_bytes();
    if s.close {
        v.extend_from_slice(b"connection: close\r\n");
    }
    match s.frame {
        Frame::Chunked => {
            v.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            // One chunk per SSE event, as engines send them.
            for piece in s.body.split_inclusive(|b| *b == b'\n') {
                v.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                v.extend_from_slice(piece);
                v.extend_from_slice(b"\r\n");
            }
            v.extend_from_slice(b"0\r\n\r\n");
        }
        Frame::Length => {
            v.extend_from_slice(format!("content-length: {}\r\n\r\n", s.body.len()).as_bytes());
            v.extend_from_slice(&s.body);
        }
        Frame::UntilClose => {
            v.extend_from_slice(b"\r\n");
            v.extend_from_slice(&s.body);
        }
    }
    v
}

async fn serve(script: Script) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let connections = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (c, h) = (connections.clone(), heads.clone());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let (script, heads) = (script.clone(), h.clone());
            tokio::spawn(async move {
                while let Some(head) = read_request(&mut sock).await {
                    heads.lock().await.push(head);
                    let wire = answer(&script);
                    if script.trickle {
                        for b in &wire {
                            if sock.write_all(std::slice::from_ref(b)).await.is_err() {
                                return;
                            }
                        }
                    } else if sock.write_all(&wire).await.is_err() {
                        return;
                    }
                    if script.close || script.frame == Frame::UntilClose {
                        return;
                    }
                }
            });
        }
    });
    Server {
        base,
        connections,
        heads,
    }
}

fn env(http: Http) -> StreamEnv {
    StreamEnv::new(http, RunClock::new())
}

fn body() -> Bytes {
    Bytes::from_static(br#"{"model":"m","messages":[],"stream":true}"#)
}

/// Five tokens with continuous usage, a finish chunk, an empty-delta chunk
/// whose usage says two more tokens, a usage-only chunk, `[DONE]`.
fn sse() -> Vec<u8> {
    let mut v = Vec::new();
    for i in 1..=5 {
        v.extend_from_slice(
            format!(
                "data: {{\"id\":\"r1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\\n\"}}}}],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{i}}}}}\n\n"
            )
            .as_bytes(),
        );
    }
    v.extend_from_slice(b": keep-alive\n\n");
    v.extend_from_slice(b"data: {\"id\":\"r1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\"},\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7}}\n\n");
    v.extend_from_slice(b"data: {\"id\":\"r1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7}}\n\n");
    v.extend_from_slice(b"data: {\"id\":\"r1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n");
    v.extend_from_slice(b"data: [DONE]\n\n");
    v
}

fn ok_script(frame: Frame, close: bool) -> Script {
    Script {
        status_line: "200 OK",
        extra_head: "content-type: text/event-stream\r\n",
        body: sse(),
        frame,
        close,
        trickle: false,
    }
}

/// Run `n` requests one after another through one client.
async fn run_n(http: Http, n: usize) -> Vec<StreamOutcome> {
    let e = env(http);
    let mut out = Vec::new();
    for _ in 0..n {
        let o = tokio::time::timeout(Duration::from_secs(30), run_stream(&e, body()))
            .await
            .expect("the request ends");
        out.push(o);
    }
    out
}

fn readers(base: &str) -> [(&'static str, Http); 2] {
    let http = Http::new(base, Some("sk-test".into()), 4).expect("client");
    [
        ("lean", http.clone().with_lean_reader(true)),
        ("reqwest", http.with_lean_reader(false)),
    ]
}

fn assert_complete(name: &str, o: &StreamOutcome) {
    assert!(o.track.error().is_none(), "{name}: {:?}", o.track.error());
    assert!(!o.cancelled, "{name}");
    assert!(o.done_at.is_some(), "{name}");
    // The empty-delta chunk's usage counts its two tokens.
    assert_eq!(o.track.output_tokens(), 7, "{name}");
    assert_eq!(o.track.finish_reason(), Some("length"), "{name}");
    assert_eq!(o.cached_tokens, Some(2), "{name}");
    assert_eq!(o.request_id.as_deref(), Some("r1"), "{name}");
}

#[tokio::test]
async fn every_framing_reads_the_same_with_both_readers() {
    for (frame, close, trickle) in [
        (Frame::Chunked, false, false),
        (Frame::Chunked, true, false),
        (Frame::Length, false, false),
        (Frame::UntilClose, false, false),
        (Frame::Chunked, false, true),
    ] {
        let mut script = ok_script(frame, close);
        script.trickle = trickle;
        let server = serve(script).await;
        for (name, http) in readers(&server.base) {
            for o in run_n(http, 3).await {
                assert_complete(name, &o);
            }
        }
    }
}

#[tokio::test]
async fn keep_alive_reuses_one_connection_and_close_does_not() {
    let server = serve(ok_script(Frame::Chunked, false)).await;
    let http = Http::new(&server.base, None, 4)
        .expect("client")
        .with_lean_reader(true);
    assert!(http.uses_lean_reader());
    for o in run_n(http, 5).await {
        assert_complete("lean", &o);
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);

    // The server closes after each answer (llama-server): a new connection
    // each time, and no request fails on a stale one.
    let server = serve(ok_script(Frame::Chunked, true)).await;
    let http = Http::new(&server.base, None, 4)
        .expect("client")
        .with_lean_reader(true);
    for o in run_n(http, 4).await {
        assert_complete("lean", &o);
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 4);

    // The client asks for close itself.
    let server = serve(ok_script(Frame::Chunked, false)).await;
    let http = Http::new(&server.base, None, 4)
        .expect("client")
        .with_lean_reader(true);
    http.set_close_completions(true);
    for o in run_n(http, 2).await {
        assert_complete("lean", &o);
    }
    let heads = server.heads.lock().await;
    assert!(
        heads.iter().all(|h| h.contains("connection: close")),
        "{heads:?}"
    );
}

#[tokio::test]
async fn the_api_key_and_the_route_are_sent() {
    let server = serve(ok_script(Frame::Chunked, false)).await;
    let http = Http::new(
        &format!("{}/prefix/", server.base),
        Some("sk-test".into()),
        4,
    )
    .expect("client")
    .with_lean_reader(true);
    run_n(http, 1).await;
    let heads = server.heads.lock().await;
    let h = &heads[0];
    assert!(
        h.starts_with("POST /prefix/v1/chat/completions HTTP/1.1\r\n"),
        "{h}"
    );
    assert!(h.contains("authorization: Bearer sk-test\r\n"), "{h}");
    assert!(
        h.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{h}"
    );
}

async fn failure_of(script: Script) -> Vec<(String, FailureKind)> {
    let server = serve(script).await;
    let mut v = Vec::new();
    for (_, http) in readers(&server.base) {
        let o = run_n(http, 1).await.remove(0);
        let e = o.track.error().expect("a failure").clone();
        v.push((e.to_string(), e.kind));
    }
    v
}

#[tokio::test]
async fn error_answers_give_the_same_one_line_reason() {
    let json = Script {
        status_line: "500 Internal Server Error",
        extra_head: "content-type: application/json\r\n",
        body: br#"{"error":{"message":"out of memory\nstack","type":"InternalError"}}"#.to_vec(),
        frame: Frame::Length,
        close: false,
        trickle: false,
    };
    let html = Script {
        status_line: "503 Service Unavailable",
        extra_head: "content-type: text/html\r\n",
        body: b"<html><head><title>503 Service Unavailable</title></head><body>busy</body></html>"
            .to_vec(),
        frame: Frame::Chunked,
        ..json.clone()
    };
    let auth = Script {
        status_line: "401 Unauthorized",
        body: b"{}".to_vec(),
        ..json.clone()
    };
    for (script, want, kind) in [
        (json, "out of memory (InternalError)", FailureKind::Status),
        (html, ": 503 Service Unavailable", FailureKind::Status),
        (auth, "check --api-key", FailureKind::Auth),
    ] {
        let got = failure_of(script).await;
        for (msg, k) in &got {
            assert!(msg.ends_with(want), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
            assert_eq!(*k, kind, "{msg}");
        }
        assert_eq!(got[0], got[1]);
    }
}

#[tokio::test]
async fn a_redirect_is_reported_not_followed() {
    let server = serve(Script {
        status_line: "307 Temporary Redirect",
        extra_head: "location: http://127.0.0.1:9/elsewhere\r\n",
        body: Vec::new(),
        frame: Frame::Length,
        close: false,
        trickle: false,
    })
    .await;
    let http = Http::new(&server.base, None, 4)
        .expect("client")
        .with_lean_reader(true);
    let o = run_n(http, 1).await.remove(0);
    let msg = o.track.error().expect("a failure").to_string();
    assert!(msg.contains("HTTP 307"), "{msg}");
    assert!(
        msg.contains("redirect to http://127.0.0.1:9/elsewhere not followed"),
        "{msg}"
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_cut_inside_a_chunk_is_a_broken_stream() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_some() {
                    let tok =
                        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n";
                    let mut v = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
                    v.extend_from_slice(format!("{:x}\r\n", tok.len()).as_bytes());
                    v.extend_from_slice(tok);
                    v.extend_from_slice(b"\r\n40\r\ndata: {\"cho");
                    let _ = sock.write_all(&v).await;
                }
            });
        }
    });
    for (name, http) in readers(&base) {
        let o = run_n(http, 1).await.remove(0);
        let e = o.track.error().expect("a failure");
        assert_eq!(e.kind, FailureKind::StreamBroken, "{name}: {e}");
        assert!(
            e.to_string()
                .contains("stream broken after the answer began"),
            "{e}"
        );
        assert_eq!(o.track.output_tokens(), 1, "{name}");
    }
}

#[tokio::test]
async fn nothing_listening_is_a_connect_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let http = Http::new(&base, None, 4)
        .expect("client")
        .with_lean_reader(true);
    let o = run_n(http, 1).await.remove(0);
    let e = o.track.error().expect("a failure");
    assert_eq!(e.kind, FailureKind::Connect, "{e}");
    assert!(e.to_string().starts_with("cannot connect to"), "{e}");
}

#[test]
fn https_and_the_switch_keep_reqwest() {
    let http = Http::new("https://127.0.0.1:1", None, 4).expect("client");
    assert!(!http.uses_lean_reader());
    let http = http.with_lean_reader(true);
    assert!(!http.uses_lean_reader(), "no lean reader for https");
    let http = Http::new("http://127.0.0.1:1", None, 4).expect("client");
    assert_eq!(
        http.uses_lean_reader(),
        ldb_client::lean::reader_from_env() == ldb_client::lean::Reader::Lean
    );
}
