//! Which request APIs a server serves, found cheaply: each API's route is
//! sent an empty JSON object, which a server that serves it rejects as a bad
//! request (400/422, or llama.cpp's 500 for Messages) and a server that
//! lacks it answers 404 or 405 (recorded from vLLM 0.32 and llama.cpp
//! 11434: `tests/fixtures/*/api-probe-*`). Chat and completions are not
//! probed: every OpenAI-compatible server this tool measures serves both
//! (prompt sizing relies on chat), a probe would show in their error
//! counts as a rejected request, and a test server that streams forever on
//! them must not hold discovery.

use std::time::Duration;

use ldb_core::api::Api;
use serde_json::json;

use crate::error::ClientError;
use crate::http::Http;

/// How long one probe may take.
const PROBE_LIMIT: Duration = Duration::from_secs(5);

/// Whether a probe's status says the route exists.
pub fn served_by_status(status: u16) -> bool {
    !matches!(status, 404 | 405)
}

/// The APIs `http`'s server serves (chat and completions always; Responses
/// and Messages by probe; a probe that gets no answer counts as not served).
pub async fn probe_apis(http: &Http) -> Vec<Api> {
    let probes = Api::ALL
        .into_iter()
        .filter(|a| !matches!(a, Api::Chat | Api::Completions))
        .map(|a| async move {
            let answer = http.post_json(a.path(), &json!({}), PROBE_LIMIT).await;
            (a, matches!(answer, Ok((s, _)) if served_by_status(s)))
        });
    let mut out = vec![Api::Chat, Api::Completions];
    for (a, served) in futures_util::future::join_all(probes).await {
        if served {
            out.push(a);
        }
    }
    out
}

/// The one-line refusal of `--api api` on a server whose probe found it missing.
pub fn not_served(http: &Http, api: Api) -> ClientError {
    ClientError::NotFound {
        url: http.url(api.path()),
        detail: format!(
            "this server does not serve the {} API (--api {api})",
            api_title(api)
        ),
    }
}

fn api_title(api: Api) -> &'static str {
    match api {
        Api::Chat => "Chat Completions",
        Api::Completions => "Completions",
        Api::Responses => "Responses",
        Api::Messages => "Messages",
    }
}
