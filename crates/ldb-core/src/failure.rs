//! Why a request failed, as a kind and a message. Decisions (stop the run,
//! skip, count as a failure) follow the kind; the message is for people and
//! may be reworded without changing behaviour.

use std::fmt;

/// What went wrong with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FailureKind {
    /// Nothing answered at the address.
    Connect,
    /// 401 or 403: the credentials were refused.
    Auth,
    /// 404: the route or the model does not exist on this server.
    NotFound,
    /// Any other non-success HTTP status.
    Status,
    /// No answer in time.
    Timeout,
    /// The answer was not what the route promises (bad JSON, bad SSE).
    BadResponse,
    /// The connection broke while the stream was being read.
    StreamBroken,
    /// The server reported an error inside the stream.
    MidStream,
    /// The body ended without `[DONE]` or a finish reason.
    Truncated,
    /// Tokens stopped for longer than the idle limit while the connection
    /// stayed open.
    Stalled,
    /// The stream finished without a single token.
    NoFirstToken,
    /// The user skipped the measurement; not a server failure.
    Skipped,
}

impl FailureKind {
    /// Every later request would fail the same way: stop instead of
    /// producing a matrix of failed cells.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            FailureKind::Connect | FailureKind::Auth | FailureKind::NotFound
        )
    }
}

/// A failed request: the kind decides, the message explains.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestError {
    /// What went wrong.
    pub kind: FailureKind,
    /// One line for the log, the report and `error_reasons`.
    pub message: String,
}

impl RequestError {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        RequestError {
            kind,
            message: message.into(),
        }
    }

    /// See [`FailureKind::is_fatal`].
    pub fn is_fatal(&self) -> bool {
        self.kind.is_fatal()
    }

    /// The user skipped it.
    pub fn is_skip(&self) -> bool {
        self.kind == FailureKind::Skipped
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_every_request_would_share_are_fatal() {
        use FailureKind::*;
        for k in [Connect, Auth, NotFound] {
            assert!(k.is_fatal(), "{k:?}");
        }
        for k in [
            Status,
            Timeout,
            BadResponse,
            StreamBroken,
            MidStream,
            Truncated,
            Stalled,
            NoFirstToken,
            Skipped,
        ] {
            assert!(!k.is_fatal(), "{k:?}");
        }
    }

    #[test]
    fn the_message_is_what_people_see_and_rewording_it_changes_nothing() {
        let a = RequestError::new(FailureKind::Auth, "HTTP 401 from http://x: check --api-key");
        let b = RequestError::new(FailureKind::Auth, "refused");
        assert_eq!(a.to_string(), "HTTP 401 from http://x: check --api-key");
        assert_eq!(a.is_fatal(), b.is_fatal());
        assert!(RequestError::new(FailureKind::Skipped, "skipped by the user").is_skip());
    }
}
