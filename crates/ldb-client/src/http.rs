//! A thin JSON/text client bound to one server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use ldb_core::api::Api;
use std::time::Duration;

use serde_json::Value;

use crate::error::{ClientError, Result};

/// Whether `base` is a URL this client can send to: parsed by the same
/// parser the requests use, scheme `http` or `https`, with a host. The
/// command checks every `--host`/`--port` with it before anything is sent,
/// so a malformed address (`http://[::1`, port 99999) is a configuration
/// error, not a connection failure after discovery started.
pub fn check_base_url(base: &str) -> std::result::Result<(), String> {
    let url = reqwest::Url::parse(base).map_err(|e| e.to_string())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {:?} is not http or https", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("no host name".into());
    }
    Ok(())
}

/// HTTP access to one server (base URL + optional bearer key).
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    base: String,
    api_key: Option<String>,
    /// Send `Connection: close` with completion requests (shared by clones).
    close_completions: Arc<AtomicBool>,
    /// The lean HTTP/1.1 stream reader's target and connection pool, for a
    /// plain `http://` base unless `LDB_STREAM_READER=reqwest`.
    lean: Option<Arc<crate::lean::Target>>,
    /// Sent with every request (`--session-header`: a session's own).
    header: Option<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// A response header whose value the stream keeps (`--replica-header`).
    noted: Option<reqwest::header::HeaderName>,
    /// The API streamed requests speak, and its unknown events (shared by clones).
    api: Arc<ApiShared>,
}

/// The run's API (`--api`, set once discovery accepted it) and a count of
/// the stream events of a type this client does not know (ignored).
#[derive(Debug, Default)]
struct ApiShared {
    api: AtomicU8,
    unknown_events: AtomicU64,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never appears in logs or errors.
        f.debug_struct("Http").field("base", &self.base).finish()
    }
}

impl Http {
    /// A client for `base` (no trailing slash). `pool` is the idle pool size per host.
    pub fn new(base: &str, api_key: Option<String>, pool: usize) -> Result<Http> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(600))
            .pool_max_idle_per_host(pool)
            // Servers close idle keep-alive connections after 5 s (llama.cpp's
            // cpp-httplib, uvicorn under vLLM). A pooled connection reused just
            // as the server closes it fails with "connection closed before
            // message completed"; seen between cells whose scout took ~5 s.
            // Never reuse one that has been idle for more than 2 s.
            .pool_idle_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| ClientError::from_reqwest(base, &e))?;
        let base = base.trim_end_matches('/').to_string();
        let api_key = api_key.filter(|k| !k.is_empty());
        let lean = match crate::lean::reader_from_env() {
            crate::lean::Reader::Lean => crate::lean::Target::new(&base, api_key.as_deref(), pool),
            crate::lean::Reader::Reqwest => None,
        };
        Ok(Http {
            client,
            base,
            api_key,
            close_completions: Arc::new(AtomicBool::new(false)),
            lean: lean.map(Arc::new),
            header: None,
            noted: None,
            api: Arc::default(),
        })
    }

    /// This client sending `name: value` with every request, and keeping
    /// the value of the response header `noted` (both for sessions through
    /// a router). Such a client streams through reqwest, not the lean
    /// reader, which sends a fixed request head. The name and value were
    /// checked when the flags were read.
    pub fn with_headers(
        mut self,
        header: Option<(&str, &str)>,
        noted: Option<&str>,
    ) -> std::result::Result<Http, String> {
        use reqwest::header::{HeaderName, HeaderValue};
        if let Some((n, v)) = header {
            let name = HeaderName::from_bytes(n.as_bytes()).map_err(|e| format!("{n:?}: {e}"))?;
            let value = HeaderValue::from_str(v).map_err(|e| format!("{v:?}: {e}"))?;
            self.header = Some((name, value));
        }
        if let Some(n) = noted {
            self.noted =
                Some(HeaderName::from_bytes(n.as_bytes()).map_err(|e| format!("{n:?}: {e}"))?);
        }
        if self.header.is_some() || self.noted.is_some() {
            self.lean = None;
        }
        Ok(self)
    }

    /// The value of the response header this client notes, if present.
    pub(crate) fn noted_value(&self, headers: &reqwest::header::HeaderMap) -> Option<String> {
        let v = headers.get(self.noted.as_ref()?)?;
        v.to_str().ok().map(str::to_string)
    }

    /// Choose the stream reader for this client and its later clones: the
    /// lean HTTP/1.1 reader (`true`, only possible for an `http://` base)
    /// or reqwest. Overrides `LDB_STREAM_READER`; for tests and diagnosis.
    pub fn with_lean_reader(mut self, on: bool) -> Http {
        self.lean = if on {
            crate::lean::Target::new(&self.base, self.api_key.as_deref(), 64).map(Arc::new)
        } else {
            None
        };
        self
    }

    /// The lean reader's target, when streams use it.
    pub(crate) fn lean_target(&self) -> Option<&crate::lean::Target> {
        self.lean.as_deref()
    }

    /// True when streamed requests go through the lean HTTP/1.1 reader.
    pub fn uses_lean_reader(&self) -> bool {
        self.lean.is_some()
    }

    /// Whether completion requests must ask for `Connection: close`.
    pub(crate) fn closes_completions(&self) -> bool {
        self.close_completions.load(Ordering::Relaxed)
    }

    /// Ask for `Connection: close` on every POST to a `…/completions` path,
    /// for this client and all its clones. llama-server closes the connection
    /// after each streamed response while its headers advertise keep-alive;
    /// a pooled connection reused for the next request then fails with
    /// "connection closed before message completed".
    pub fn set_close_completions(&self, on: bool) {
        self.close_completions.store(on, Ordering::Relaxed);
    }

    /// Speak `api` in the streams of this client and its clones (chat until set).
    pub fn set_api(&self, api: Api) {
        let i = Api::ALL.iter().position(|a| *a == api).unwrap_or(0);
        self.api.api.store(i as u8, Ordering::Relaxed);
    }

    /// The API streams speak.
    pub fn api(&self) -> Api {
        Api::ALL[usize::from(self.api.api.load(Ordering::Relaxed)) % Api::ALL.len()]
    }

    /// Count one stream event of an unknown type.
    pub(crate) fn note_unknown_event(&self) {
        self.api.unknown_events.fetch_add(1, Ordering::Relaxed);
    }

    /// Stream events of an unknown type met so far (by this client and its clones).
    pub fn unknown_events(&self) -> u64 {
        self.api.unknown_events.load(Ordering::Relaxed)
    }

    /// Base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request builder with auth applied.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let close = method == reqwest::Method::POST
            && is_generation_path(path)
            && self.close_completions.load(Ordering::Relaxed);
        let mut rb = self.client.request(method, self.url(path));
        if close {
            rb = rb.header(reqwest::header::CONNECTION, "close");
        }
        if let Some((n, v)) = &self.header {
            rb = rb.header(n, v);
        }
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    /// GET returning status and body text (transport errors only are `Err`).
    pub async fn get_text(&self, path: &str, timeout: Duration) -> Result<(u16, String)> {
        let rb = self.request(reqwest::Method::GET, path).timeout(timeout);
        status_and_text(&self.url(path), rb).await
    }

    /// GET a JSON document; non-2xx statuses are errors.
    pub async fn get_json(&self, path: &str, timeout: Duration) -> Result<Value> {
        let (status, text) = self.get_text(path, timeout).await?;
        let url = self.url(path);
        if !(200..300).contains(&status) {
            return Err(ClientError::from_status(&url, status, &text));
        }
        serde_json::from_str(&text).map_err(|e| ClientError::Decode {
            url,
            detail: format!("not JSON ({e})"),
        })
    }

    /// POST a JSON body; returns status and parsed JSON (Null if not JSON).
    pub async fn post_json(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<(u16, Value)> {
        let rb = self
            .request(reqwest::Method::POST, path)
            .timeout(timeout)
            .json(body);
        let (status, text) = status_and_text(&self.url(path), rb).await?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, v))
    }
}

/// A route that generates (any API's), whose POSTs get `Connection: close`
/// once [`Http::set_close_completions`] asked for it.
pub(crate) fn is_generation_path(path: &str) -> bool {
    Api::ALL.iter().any(|a| a.path() == path) || path.ends_with("/completions")
}

/// Send a request and read its whole body; only transport failures are `Err`.
/// The largest non-streamed answer read (`/metrics`, `/v1/models`, server
/// info, `/tokenize`): far above a real engine's (a busy vLLM `/metrics` is
/// a few hundred KB), and a broken or hostile server cannot make the client
/// hold more.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

async fn status_and_text(url: &str, rb: reqwest::RequestBuilder) -> Result<(u16, String)> {
    let mut resp = rb
        .send()
        .await
        .map_err(|e| ClientError::from_reqwest(url, &e))?;
    let status = resp.status().as_u16();
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| ClientError::from_reqwest(url, &e))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ClientError::Decode {
                url: url.to_string(),
                detail: format!(
                    "the answer is larger than {} MiB; not read",
                    MAX_BODY_BYTES / (1024 * 1024)
                ),
            });
        }
        body.extend_from_slice(&chunk);
    }
    // Every route read here answers UTF-8 JSON or text; a stray byte must
    // not lose the whole answer.
    let text = match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok((status, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_close_only_on_completions_once_asked() {
        let http = Http::new("http://127.0.0.1:1", None, 4).unwrap();
        let header = |h: &Http, m: reqwest::Method, p: &str| {
            let req = h.request(m, p).build().unwrap();
            req.headers()
                .get(reqwest::header::CONNECTION)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            header(&http, reqwest::Method::POST, "/v1/chat/completions"),
            None
        );
        let clone = http.clone();
        http.set_close_completions(true);
        for p in ["/v1/chat/completions", "/v1/completions"] {
            assert_eq!(
                header(&clone, reqwest::Method::POST, p).as_deref(),
                Some("close")
            );
        }
        assert_eq!(header(&clone, reqwest::Method::GET, "/metrics"), None);
        assert_eq!(header(&clone, reqwest::Method::POST, "/tokenize"), None);
    }
}
