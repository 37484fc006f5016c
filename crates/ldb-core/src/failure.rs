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

/// Whether a refused request says its prompt and `max_tokens` do not fit
/// the model's context: a session that grew to the limit stops there
/// instead of counting an error (docs/methodology.md, "Context limit in
/// sessions"). The wording differs by engine: vLLM "maximum context length
/// is N tokens", SGLang "the model's context length (N tokens)" or "maximum
/// context length of N tokens", llama.cpp "exceeds the available context
/// size".
pub fn is_context_limit(e: &RequestError) -> bool {
    let m = e.message.to_ascii_lowercase();
    e.kind == FailureKind::Status && (m.contains("context length") || m.contains("context size"))
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

    #[test]
    fn each_engines_context_refusal_is_a_context_limit_and_nothing_else_is() {
        let status = |m: &str| RequestError::new(FailureKind::Status, m);
        for m in [
            "HTTP 400 from http://x/v1/chat/completions: This model's maximum context length is \
             1024 tokens. However, you requested 64 output tokens and your prompt contains 990",
            "HTTP 400: The input (2000 tokens) is longer than the model's context length (1024 tokens).",
            "HTTP 400: Requested token count exceeds the model's maximum context length of 1024 tokens.",
            "HTTP 400: request (1100 tokens) exceeds the available context size (1024 tokens), try \
             increasing it",
        ] {
            assert!(is_context_limit(&status(m)), "{m}");
        }
        assert!(!is_context_limit(&status(
            "HTTP 400: max_tokens must be at least 1"
        )));
        assert!(!is_context_limit(&status("HTTP 503: overloaded")));
        let mid = RequestError::new(FailureKind::MidStream, "maximum context length is 10");
        assert!(!is_context_limit(&mid));
    }
}
