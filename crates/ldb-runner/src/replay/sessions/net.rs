//! How a session's turns reach the server: the client, the clock, the
//! body's keys besides its messages, and the seed of the tool's run times.
//! One process takes them from its run; a follower shard from the leader's
//! order (`part.rs`), so both send the same bodies with the same loop.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::http::Http;
use ldb_client::stream::RunClock;
use ldb_core::api::Api;
use ldb_core::prompt::Message;
use ldb_core::tools::ToolSet;
use serde_json::{Map, Value};

use crate::ctx::RunCtx;
use crate::prompts::{BodyOptions, stream_json};
use crate::shard::session_wire::WireBody;

/// What every turn of a session run is sent with.
pub(in crate::replay) struct Net {
    /// The server.
    pub http: Http,
    /// This process's run clock.
    pub clock: RunClock,
    /// `--seed`: each session's think and tool times are drawn from it.
    pub seed: u64,
    /// The body's keys besides its messages and `max_tokens`.
    pub body: WireBody,
    /// `--stream-idle-timeout`.
    pub idle_timeout: Option<Duration>,
}

impl Net {
    /// One process's: its run's client, clock and flags.
    pub(in crate::replay) fn of(rc: &RunCtx) -> Net {
        Net {
            http: rc.http.clone(),
            clock: rc.clock,
            seed: rc.cfg.open_loop.seed,
            body: body_of(rc),
            idle_timeout: rc.cfg.timing.idle_timeout(),
        }
    }

    /// The streamed request of one turn. The reply goes back in the next
    /// turn as the engine generated it (`skip_special_tokens: false`): a
    /// special token the model emits past its end of turn (with
    /// ignore_eos) would otherwise vanish from the text and end the
    /// cache's match there (measured on vLLM 0.32, issue 35;
    /// docs/methodology.md §16.1).
    /// A trace row's own `tools` replace the run's (`--tools`).
    pub(in crate::replay) fn turn_body(
        &self,
        messages: &[Message],
        max_tokens: u64,
        tools: Option<&Arc<ToolSet>>,
    ) -> Bytes {
        let b = &self.body;
        let mut body = stream_json(
            &b.model,
            messages,
            BodyOptions {
                api: b.api,
                max_tokens,
                continuous_usage: false,
                ignore_eos: b.ignore_eos,
                temperature: b.temperature,
                tools: tools.cloned(),
            },
        );
        for (k, v) in &b.extra {
            let run_tools = k == "tools" || k == "tool_choice";
            if !(run_tools && tools.is_some()) {
                body[k.as_str()] = v.clone();
            }
        }
        body["skip_special_tokens"] = serde_json::json!(false);
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

/// The run's body keys: model, API, EOS and temperature, and `--tools`
/// (`tools`, `tool_choice`: the chat API's only, as every body of the run
/// gets them).
pub(in crate::replay) fn body_of(rc: &RunCtx) -> WireBody {
    let mut extra = Value::Object(Map::new());
    if let Some(t) = rc
        .cfg
        .matrix
        .tools
        .as_ref()
        .filter(|_| rc.cfg.target.api == Api::Chat)
    {
        t.add_to(&mut extra);
    }
    WireBody {
        model: rc.model.clone(),
        api: rc.cfg.target.api,
        ignore_eos: !rc.cfg.matrix.respect_eos,
        temperature: rc.cfg.matrix.temperature,
        extra: match extra {
            Value::Object(m) => m,
            _ => Map::new(),
        },
    }
}
