//! A session run over shards on the wire (docs/shards.md, "Sessions"): the
//! leader's order to a follower (its whole conversations, planned, and how
//! to send them) and what the follower sends back (every turn's record).
//! Types only: the leader builds the order (`replay/session_shards.rs`),
//! the follower runs it with the single-process session loop
//! (`replay/session_part.rs`), and `shard/check.rs` checks its numbers.

use ldb_core::api::Api;
use ldb_core::replay::affinity::TurnSpan;
use ldb_core::replay::session::{ContextStop, SessionRequest, ThinkTime};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::prefix_achieved::RequestCache;

/// Leader → follower: run these conversations, each turn by turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionOrder {
    /// Cell number (counts up over the run, shared with the other cells).
    pub cell: u64,
    /// The run's start on the follower's clock, Unix seconds.
    pub t0: f64,
    /// The run's limit (`--replay-limit`) on the follower's clock, Unix
    /// seconds: no turn is sent after it, and the ones open are cut.
    pub limit: f64,
    /// Its conversations, whole.
    pub sessions: Vec<WireSession>,
    /// What every request body carries besides its messages.
    pub body: WireBody,
    /// `--seed`: the tool's run times are drawn from it per session, as one
    /// process draws them.
    pub seed: u64,
    /// The run's content salt (`{run}` of the session header).
    pub salt: u64,
    /// The model's context in tokens (0: unknown).
    pub context: u64,
    /// The tool loop: `--tool-latency` and `--tool-result-tokens`.
    pub tool_loop: Option<(ThinkTime, u64)>,
    /// `--session-header NAME` and its value template.
    pub session_header: Option<(String, String)>,
    /// `--replica-header NAME`.
    pub replica_header: Option<String>,
    /// The replicas' base URLs (`--metrics-url`), to name one from the
    /// replica header.
    pub replica_bases: Vec<String>,
    /// `--stream-idle-timeout`, seconds (none: unlimited).
    pub idle_timeout_s: Option<f64>,
}

/// The keys of a turn's body other than its messages and `max_tokens`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireBody {
    /// The served model.
    pub model: String,
    /// `--api`.
    pub api: Api,
    /// Send `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Temperature, if any.
    pub temperature: Option<f64>,
    /// Keys added to the body as they are (`tools`, `tool_choice`).
    pub extra: Map<String, Value>,
}

/// One conversation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireSession {
    /// Its number in the whole run (0-based, the single-process numbering).
    pub id: u64,
    /// Its turns, in order.
    pub turns: Vec<WireTurn>,
}

/// One planned turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireTurn {
    /// Due this many seconds after the previous reply ended (the first
    /// turn: after the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_reply: Option<f64>,
    /// Due this many seconds after the start, never before the previous
    /// reply ended (a trace's turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// The messages it adds to the conversation.
    pub adds: Vec<WireMessage>,
    /// Tokens of those messages as built.
    pub built_tokens: u64,
    /// Its `max_tokens`.
    pub max_tokens: u64,
    /// With the tool loop: the result's text, if this turn's reply calls
    /// a tool (built by the leader, as one process builds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<String>,
}

/// One chat message.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
    /// An assistant's tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// Follower → leader, in its `CellDone`: what its sessions did, times on
/// the follower's run clock (the leader moves them onto its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionShare {
    /// Every turn sent.
    pub turns: Vec<SessionRequest>,
    /// What each answer said of the cache (one per turn, same order as
    /// the loop pushed them).
    pub caches: Vec<RequestCache>,
    /// Through a router: each turn's span and named replica.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<TurnSpan>,
    /// Sessions stopped at the model's context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<ContextStop>,
    /// The most of its turns in flight at once.
    pub most_in_flight: u64,
    /// The run's limit came before its sessions ended.
    pub timed_out: bool,
}
