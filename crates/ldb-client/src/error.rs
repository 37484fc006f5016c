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
            .unwrap_or_else(|_| {
                body.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect()
            });
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

/// Result alias.
pub type Result<T> = std::result::Result<T, ClientError>;

impl From<ClientError> for RequestError {
    fn from(e: ClientError) -> RequestError {
        RequestError::new(e.kind(), e.to_string())
    }
}
