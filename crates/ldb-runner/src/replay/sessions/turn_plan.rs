//! A session turn as planned, before it is sent: when it is due and what
//! it carries (data only; the session loop in `sessions.rs` sends it).

use std::sync::Arc;

use ldb_core::prefix_cache::Segment;
use ldb_core::prompt::Message;
use ldb_core::tools::ToolSet;

use super::super::agent::Opening;

/// When a turn is due.
#[derive(Debug, Clone, Copy)]
pub(in crate::replay) enum Due {
    /// This many seconds after the previous reply ended (the first turn:
    /// after the replay's start).
    AfterReply(f64),
    /// At this replay time (seconds after the start), but never before the
    /// previous reply ended.
    At(f64),
}

/// One turn to send: when, the messages it adds to the conversation, their
/// built tokens (the count used when the server reports none), its
/// `max_tokens`; and for a trace's agent turn, what its messages open with
/// (`agent.rs`: what becomes of the reply before it), the tools it offers,
/// whether it carries a tool's result and the tool's run time before it;
/// for a trace's first turn with `hash_ids`, the blocks it shares.
#[derive(Debug, Clone)]
pub(in crate::replay) struct Turn {
    pub due: Due,
    pub adds: Vec<Message>,
    pub built_tokens: u64,
    pub max_tokens: u64,
    pub opening: Opening,
    pub tools: Option<Arc<ToolSet>>,
    pub tool_result: bool,
    pub tool_wait: f64,
    /// A first turn built from a trace's `hash_ids`: its blocks' segments.
    pub blocks: Option<Vec<Segment>>,
    /// With the tool loop on a follower shard: the result's text if this
    /// turn's reply calls a tool (the leader built it; one process builds
    /// it when the call comes).
    pub tool_result_text: Option<String>,
}

impl Turn {
    /// Carries what only a trace's agent row gives: the leader's order to a
    /// follower does not (`shards.rs`), so such a trace is not dealt out.
    pub(super) fn is_agent(&self) -> bool {
        self.opening != Opening::New
            || self.tools.is_some()
            || self.tool_result
            || self.tool_wait > 0.0
            || self.blocks.is_some()
    }
}
