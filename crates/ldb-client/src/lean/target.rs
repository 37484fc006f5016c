//! One plain-HTTP server for the lean reader: where to connect, the head
//! every request carries, and the pool of idle keep-alive connections.
//! Nothing here runs per chunk: a request's head is built once and a
//! connection is checked out and in once per request.

use std::sync::Mutex;
use std::time::Duration;

use tokio::net::TcpStream;

/// As reqwest's settings in `http.rs`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A pooled connection idle longer than this is not reused (servers close
/// idle keep-alive connections after 5 s; see `Http::new`).
const POOL_IDLE: Duration = Duration::from_secs(2);

/// One plain-HTTP server: where to connect, what to put in each request's
/// head, and the idle keep-alive connections.
#[derive(Debug)]
pub struct Target {
    /// `host:port` to resolve and connect to.
    authority: String,
    /// The base URL's path (`""` or `/prefix`).
    prefix: String,
    /// Request head fields common to every request (host, key, type).
    common: String,
    idle: Mutex<Vec<(TcpStream, std::time::Instant)>>,
    max_idle: usize,
}

impl Target {
    /// A target for `base`, or `None` when it is not a plain `http://` URL
    /// this reader handles (then reqwest does).
    pub fn new(base: &str, api_key: Option<&str>, pool: usize) -> Option<Target> {
        let url = reqwest::Url::parse(base).ok()?;
        if url.scheme() != "http" || url.query().is_some() || !url.username().is_empty() {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let authority = format!("{host}:{port}");
        let host_field = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let mut common = format!(
            "host: {host_field}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\n"
        );
        if let Some(k) = api_key {
            // A key with a line break would split the head; such a key
            // cannot be sent (reqwest refuses it too), so leave it to reqwest.
            if k.contains(['\r', '\n']) {
                return None;
            }
            common.push_str(&format!("authorization: Bearer {k}\r\n"));
        }
        Some(Target {
            authority,
            prefix: url.path().trim_end_matches('/').to_string(),
            common,
            idle: Mutex::new(Vec::new()),
            max_idle: pool.max(1),
        })
    }

    pub(super) fn request(&self, path: &str, body: &[u8], close: bool) -> Vec<u8> {
        let mut req = Vec::with_capacity(256 + body.len());
        req.extend_from_slice(b"POST ");
        req.extend_from_slice(self.prefix.as_bytes());
        req.extend_from_slice(path.as_bytes());
        req.extend_from_slice(b" HTTP/1.1\r\n");
        req.extend_from_slice(self.common.as_bytes());
        if close {
            req.extend_from_slice(b"connection: close\r\n");
        }
        req.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        req.extend_from_slice(body);
        req
    }

    /// An idle pooled connection that still looks open, if any.
    pub(super) fn checkout(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().ok()?;
        while let Some((sock, since)) = idle.pop() {
            if since.elapsed() > POOL_IDLE {
                continue;
            }
            // Open and quiet reads as "would block"; a closed one reads 0,
            // and unread bytes mean it is out of step: both are dropped.
            let mut probe = [0u8; 1];
            if matches!(sock.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            {
                return Some(sock);
            }
        }
        None
    }

    pub(super) fn checkin(&self, sock: TcpStream) {
        if let Ok(mut idle) = self.idle.lock() {
            let now = std::time::Instant::now();
            idle.retain(|(_, since)| now.duration_since(*since) <= POOL_IDLE);
            if idle.len() < self.max_idle {
                idle.push((sock, now));
            }
        }
    }

    pub(super) async fn connect(&self) -> std::io::Result<TcpStream> {
        let sock = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.authority))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        sock.set_nodelay(true)?;
        Ok(sock)
    }
}
