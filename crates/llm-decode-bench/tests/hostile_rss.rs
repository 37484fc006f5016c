//! The whole benchmark against a hostile server stays small: its peak
//! resident memory (`VmHWM`) stays under 300 MB while every decode stream
//! gets nothing but keep-alive comments before its first token (as fast as
//! the socket takes them) and `/metrics` is a page of 50,000 label values
//! read every half second. The run ends by itself in labelled cells and a
//! valid file. Linux only (`/proc`).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{assert_valid, bin, text, tmp};

/// Peak resident memory limit of the benchmark, bytes.
const RSS_LIMIT: u64 = 300 * 1024 * 1024;

/// Read one request: its head and its body (by `content-length`).
fn read_request(sock: &mut TcpStream) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut buf).ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + len {
        let n = sock.read(&mut buf).ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..]).to_string();
    Some((head, body))
}

fn answer(sock: &mut TcpStream, status: &str, ctype: &str, body: &str) {
    let _ = sock.write_all(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

fn serve(mut sock: TcpStream, metrics: &str) {
    let Some((head, body)) = read_request(&mut sock) else {
        return;
    };
    let line = head.lines().next().unwrap_or("");
    let one_token = body.contains("\"max_tokens\":1,") || body.contains("\"max_tokens\":1}");
    if line.starts_with("GET /v1/models") {
        answer(
            &mut sock,
            "200 OK",
            "application/json",
            r#"{"object":"list","data":[{"id":"hostile","object":"model","max_model_len":32768}]}"#,
        );
    } else if line.starts_with("GET /metrics") {
        answer(&mut sock, "200 OK", "text/plain", metrics);
    } else if line.starts_with("POST /v1/chat/completions") && one_token {
        // Prompt sizing and the first request: a short honest answer.
        let usage = format!(
            r#""usage":{{"prompt_tokens":{},"completion_tokens":1,"total_tokens":{}}}"#,
            body.len() / 4,
            body.len() / 4 + 1
        );
        if body.contains("\"stream\":true") {
            let sse = format!(
                "data: {{\"id\":\"x\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"hi\"}},\"finish_reason\":\"length\"}}]}}\n\n\
                 data: {{\"id\":\"x\",\"choices\":[],{usage}}}\n\ndata: [DONE]\n\n"
            );
            answer(&mut sock, "200 OK", "text/event-stream", &sse);
        } else {
            let json = format!(
                r#"{{"id":"x","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"hi"}},"finish_reason":"length"}}],{usage}}}"#
            );
            answer(&mut sock, "200 OK", "application/json", &json);
        }
    } else if line.starts_with("POST /v1/chat/completions") {
        // A decode stream: keep-alive comments only, never a token.
        let _ = sock.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        let payload = b": keep-alive\n\n".repeat(64 * 1024 / 14);
        let mut piece = format!("{:x}\r\n", payload.len()).into_bytes();
        piece.extend_from_slice(&payload);
        piece.extend_from_slice(b"\r\n");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(120) {
            if sock.write_all(&piece).is_err() {
                return;
            }
        }
    } else {
        answer(&mut sock, "404 Not Found", "text/plain", "not found");
    }
}

/// Peak resident memory of process `pid` in bytes (`VmHWM`), if readable.
fn peak_rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn memory_stays_bounded_against_endless_comments_and_huge_label_sets() {
    if !std::path::Path::new("/proc/self/status").exists() {
        return;
    }
    let mut metrics = String::from("# TYPE vllm:num_requests_running gauge\n");
    for i in 0..50_000 {
        metrics.push_str(&format!(
            "vllm:num_requests_running{{model_name=\"hostile\",engine=\"{i}\"}} 0.0\n"
        ));
    }
    let metrics: &'static str = Box::leak(metrics.into_boxed_str());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            std::thread::spawn(move || serve(sock, metrics));
        }
    });
    let (_dir, out) = tmp("hostile.json");
    let mut child = bin()
        .args([
            "--host",
            &format!("http://127.0.0.1:{port}"),
            "--concurrency",
            "4",
            "--contexts",
            "0",
            "--duration",
            "2",
            "--cell-warmup-timeout-seconds",
            "5",
            "--decode-warmup-seconds",
            "0",
            "--max-tokens",
            "256",
            "--prefill-contexts",
            "",
            "--display-mode",
            "plain",
            "--no-hw-monitor",
            "--no-calibration-cache",
            "--output",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("benchmark starts");
    let pid = child.id();
    let mut peak = 0;
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if let Some(p) = peak_rss(pid) {
            peak = peak.max(p);
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the run hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().expect("output");
    let err = text(&o.stderr);
    assert!(peak > 0, "VmHWM was never read");
    eprintln!("peak RSS of the benchmark: {} MB", peak / (1024 * 1024));
    assert!(
        peak < RSS_LIMIT,
        "peak RSS {} MB\n{err}",
        peak / (1024 * 1024)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    assert_valid(&doc);
    let cell = &doc["results"][0];
    assert_ne!(cell["status"], "ok", "{cell}");
    eprintln!("cell: {} ({})", cell["status"], cell["status_reason"]);
    assert!(cell["aggregate_tps"].is_null(), "{cell}");
    assert_eq!(o.status.code(), Some(4), "{err}\n{}", text(&o.stdout));
}
