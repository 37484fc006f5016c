//! Errors of the HTTP side, each one line naming the URL.

use ldb_core::failure::{FailureKind, RequestError};

/// A request to the server failed before producing data.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered at the address.
    #[error("cannot connect to {url}: {detail}")]
    Connect {
        /// The URL.
        url: String,
        /// The transport's words.
        detail: String,
    },
    /// The server rejected our credentials.
    #[error("HTTP {status} from {url}: check --api-key")]
    Auth {
        /// The URL.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// The route does not exist on this server.
    #[error("HTTP 404 from {url}: {detail}")]
    NotFound {
        /// The URL.
        url: String,
        /// Server's message.
        detail: String,
    },
    /// Any other non-success status.
    #[error("HTTP {status} from {url}: {detail}")]
    Status {
        /// The URL.
        url: String,
        /// Status code.
        status: u16,
        /// Server's message (first line, bounded).
        detail: String,
    },
    /// No answer in time.
    #[error("timed out waiting for {url}")]
    Timeout {
        /// The URL.
        url: String,
    },
    /// The answer was not what the route promises.
    #[error("unexpected response from {url}: {detail}")]
    Decode {
        /// The URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

impl ClientError {
    /// The kind of request failure this is.
    pub fn kind(&self) -> FailureKind {
        match self {
            ClientError::Connect { .. } => FailureKind::Connect,
            ClientError::Auth { .. } => FailureKind::Auth,
            ClientError::NotFound { .. } => FailureKind::NotFound,
            ClientError::Status { .. } => FailureKind::Status,
            ClientError::Timeout { .. } => FailureKind::Timeout,
            ClientError::Decode { .. } => FailureKind::BadResponse,
        }
    }

    /// Map a transport error.
    pub fn from_reqwest(url: &str, e: &reqwest::Error) -> ClientError {
        let url = url.to_string();
        if e.is_timeout() {
            return ClientError::Timeout { url };
        }
        let mut detail = transport_detail(e);
        // hyper refuses an answer head over about 400 KiB, or with more
        // than 100 header lines: the server answered, so it is a bad
        // answer, not a connection failure (and not fatal to the cell).
        if detail.contains("message head is too large") {
            return ClientError::Decode {
                url,
                detail: format!("the answer's header is larger than the client accepts ({detail})"),
            };
        }
        if detail.to_ascii_lowercase().contains("certificate") || detail.contains("tls") {
            detail = format!("TLS failure: {detail}");
        }
        ClientError::Connect { url, detail }
    }
}

/// The innermost cause of a transport error, in the transport's words
/// ("unexpected EOF during chunk size line"): for a body that broke after the
/// answer began, where "cannot connect" would be wrong.
pub fn transport_detail(e: &reqwest::Error) -> String {
    let mut detail = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    detail
}

impl ClientError {
    /// Map a non-success status with its body.
    pub fn from_status(url: &str, status: u16, body: &str) -> ClientError {
        let url = url.to_string();
        let detail = serde_json::from_str::<serde_json::Value>(body)
            .map(|v| ldb_core::chunk::error_message(&v))
            .unwrap_or_else(|_| text_excerpt(body));
        match status {
            401 | 403 => ClientError::Auth { url, status },
            404 => ClientError::NotFound { url, detail },
            _ => ClientError::Status {
                url,
                status,
                detail,
            },
        }
    }
}

/// Longest excerpt of a non-JSON error body kept in a failure reason.
const EXCERPT_CHARS: usize = 160;

/// A short clean line from a non-JSON error body: an HTML page (a proxy's
/// or a web server's error page) gives its `<title>`, else its text without
/// tags; any text has its whitespace folded to single spaces and is cut at
/// [`EXCERPT_CHARS`] characters with `…`.
pub fn text_excerpt(body: &str) -> String {
    let looks_html = body.trim_start().starts_with('<');
    let text = if looks_html {
        html_title(body).unwrap_or_else(|| strip_tags(body))
    } else {
        body.to_string()
    };
    let folded: Vec<&str> = text.split_whitespace().collect();
    let line = folded.join(" ");
    if line.chars().count() > EXCERPT_CHARS {
        let cut: String = line.chars().take(EXCERPT_CHARS).collect();
        format!("{}…", cut.trim_end())
    } else {
        line
    }
}

/// The text of the first `<title>` element, when it has any.
fn html_title(body: &str) -> Option<String> {
    // Only the head of a page is searched: a title sits near the top, and a
    // huge body must not cost a lowercase copy of itself.
    let head: String = body.chars().take(64 * 1024).collect();
    let lower = head.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let t = head[start..end].trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The text of an HTML page: tags, and the bodies of scripts and styles,
/// left out (only the first 64 KiB are read).
fn strip_tags(body: &str) -> String {
    let mut end = body.len().min(64 * 1024);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let head = &body[..end];
    // ASCII lowercasing keeps every byte where it was, so indices match.
    let lower = head.to_ascii_lowercase();
    let mut out = String::new();
    let mut at = 0;
    while let Some(lt) = lower[at..].find('<').map(|i| at + i) {
        out.push_str(&head[at..lt]);
        out.push(' ');
        let closing = if lower[lt..].starts_with("<script") {
            "</script>"
        } else if lower[lt..].starts_with("<style") {
            "</style>"
        } else {
            ">"
        };
        match lower[lt..].find(closing) {
            Some(i) => at = lt + i + closing.len(),
            None => return out,
        }
    }
    out.push_str(&head[at..]);
    out
}

/// Result alias.
pub type Result<T> = std::result::Result<T, ClientError>;

impl From<ClientError> for RequestError {
    fn from(e: ClientError) -> RequestError {
        RequestError::new(e.kind(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_error_page_gives_its_title() {
        let page = "<!DOCTYPE html>\n<html><head><title>503 Service Temporarily Unavailable</title>\
                    <style>body{color:red}</style></head><body><center><h1>503 Service \
                    Temporarily Unavailable</h1></center><hr><center>nginx</center></body></html>";
        let e = ClientError::from_status("http://h/v1/chat/completions", 503, page);
        assert_eq!(
            e.to_string(),
            "HTTP 503 from http://h/v1/chat/completions: 503 Service Temporarily Unavailable"
        );
    }

    #[test]
    fn an_html_page_without_a_title_gives_its_text_without_tags_scripts_or_styles() {
        let page = "<html><script>var x = '<b>';</script><style>p{}</style>\
                    <body><h1>Internal   Server\n\nError</h1><p>try later</p></body></html>";
        assert_eq!(text_excerpt(page), "Internal Server Error try later");
    }

    #[test]
    fn plain_text_is_folded_and_cut_short() {
        assert_eq!(
            text_excerpt("upstream\r\n  timed out\n"),
            "upstream timed out"
        );
        let long = "é".repeat(1000);
        let ex = text_excerpt(&long);
        assert!(ex.ends_with('…'), "{ex}");
        assert_eq!(ex.chars().count(), EXCERPT_CHARS + 1);
        // Unclosed tags and odd bytes never panic.
        assert_eq!(text_excerpt("<html><title>"), "");
        assert_eq!(text_excerpt("<"), "");
        assert_eq!(text_excerpt(""), "");
    }

    #[test]
    fn a_json_error_keeps_its_message() {
        let e = ClientError::from_status("u", 500, r#"{"error":{"message":"boom"}}"#);
        assert!(e.to_string().ends_with(": boom"), "{e}");
    }
}
