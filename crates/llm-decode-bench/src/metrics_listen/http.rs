//! The smallest HTTP/1.1 server `/metrics` needs, with the limits a port
//! open to a network needs (issue 34; docs/metrics-listen.md, "Limits"):
//! a request head must arrive whole within [`HEADER_READ_TIMEOUT`] and
//! within [`MAX_HEAD_BYTES`], every answer closes its connection, and at
//! most [`MAX_CONNECTIONS`] are open at once. A new connection past the
//! cap closes the oldest open one instead of waiting: a scrape is answered
//! in a millisecond, so the oldest is an idle one, and a crowd of idle
//! connections cannot keep a real scrape out.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Longest wait for a whole request head (and then for the answer to be
/// written); a connection that sends nothing is closed after it.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections open at once; a new one past it closes the oldest.
pub const MAX_CONNECTIONS: usize = 16;

/// Largest request head read (a scrape's is about 200 bytes).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Pause after a failed `accept` (out of file descriptors), so the loop
/// does not spin a core while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts on `listener` until aborted; `page` draws the body of each
/// `GET /metrics`; `head_timeout` is [`HEADER_READ_TIMEOUT`] outside tests.
pub(super) async fn accept_loop<F>(listener: TcpListener, page: Arc<F>, head_timeout: Duration)
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let mut open: VecDeque<JoinHandle<()>> = VecDeque::new();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        open.retain(|h| !h.is_finished());
        if open.len() >= MAX_CONNECTIONS
            && let Some(oldest) = open.pop_front()
        {
            oldest.abort();
        }
        open.push_back(tokio::spawn(answer(stream, page.clone(), head_timeout)));
    }
}

/// Reads one request head and answers it; the connection then closes.
async fn answer<F>(mut stream: TcpStream, page: Arc<F>, head_timeout: Duration)
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let Ok(Some(head)) = tokio::time::timeout(head_timeout, read_head(&mut stream)).await else {
        return;
    };
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", page()),
        ("GET", _) => (
            "404 Not Found",
            "not found: the page is /metrics\n".to_string(),
        ),
        _ => ("405 Method Not Allowed", "only GET\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(head_timeout, async {
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// The request head up to its blank line, or `None` when the peer closes
/// first or sends more than [`MAX_HEAD_BYTES`].
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_blank_line(&buf) {
            return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
        }
        if buf.len() > MAX_HEAD_BYTES {
            return None;
        }
    }
}

fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connects");
        let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("sent");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn idle_connections_neither_keep_a_scrape_out_nor_stay_open() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let page = Arc::new(|| "ldb_info 1\n".to_string());
        let server = tokio::spawn(accept_loop(listener, page, Duration::from_millis(300)));
        let mut idle = Vec::new();
        for _ in 0..3 * MAX_CONNECTIONS {
            idle.push(TcpStream::connect(addr).await.expect("idle connects"));
        }
        let reply = get(addr, "/metrics").await;
        assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
        assert!(reply.ends_with("ldb_info 1\n"), "{reply}");
        assert!(get(addr, "/").await.starts_with("HTTP/1.1 404"));
        // Every idle one is closed: evicted by the crowd, or at its timeout.
        for mut s in idle {
            let mut b = [0u8; 16];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b))
                .await
                .expect("closed by the server, not left open");
            assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        }
        server.abort();
    }

    #[tokio::test]
    async fn an_oversized_head_is_dropped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(accept_loop(
            listener,
            Arc::new(String::new),
            Duration::from_secs(5),
        ));
        let mut s = TcpStream::connect(addr).await.expect("connects");
        let _ = s.write_all(&vec![b'a'; 2 * MAX_HEAD_BYTES]).await;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        assert!(out.is_empty(), "no answer to a head past the cap");
        server.abort();
    }
}
