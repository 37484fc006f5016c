//! One turn of a session: waiting until it is due, sending it (counted in
//! flight, the replicas' counters read when it was the last one out),
//! recording a stop at the model's context, what a served turn adds to the
//! result, and the reply as the next turn resends it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ldb_client::stream::{ChannelTexts, StreamEnv, StreamOutcome, run_stream};
use ldb_core::prefix_cache::IntendedPrefixCache;
use ldb_core::prompt::Message;
use ldb_core::replay::affinity::TurnSpan;
use ldb_core::replay::session::{ContextStop, ConversationSegments};
use ldb_core::tools::ToolSet;

use super::super::agent::{self, Opening};
use super::super::tool_loop;
use super::{Counters, OVERDUE, Shared};
use crate::open_loop::rate_request;
use crate::prefix_achieved::RequestCache;

/// What one turn's request gave back.
pub(super) struct Sent {
    pub(super) o: StreamOutcome,
    pub(super) request: ldb_core::replay::ReplayRequest,
    pub(super) texts: ChannelTexts,
}

/// Send one turn's `body` (due at `due`) over `http`, counting it in flight.
pub(super) async fn send_turn(
    sh: &Shared,
    http: &ldb_client::http::Http,
    body: bytes::Bytes,
    due: f64,
) -> Sent {
    let texts = Arc::new(Mutex::new(ChannelTexts::default()));
    let env = StreamEnv {
        window: sh.tally.window.clone(),
        counters: sh.tally.counters.clone(),
        cancel: sh.skip.child_token(),
        idle_timeout: sh.net.idle_timeout,
        first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
        texts: Some(texts.clone()),
        ..StreamEnv::new(http.clone(), sh.net.clock)
    };
    let p = &sh.progress;
    Counters::bump(&p.sent);
    let now = p.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    sh.tally.most.fetch_max(now, Ordering::Relaxed);
    let o = run_stream(&env, body).await;
    let left = p.in_flight.fetch_sub(1, Ordering::Relaxed) - 1;
    // The last request in flight ended: read the replicas' counters, so
    // a turn sent alone can be attributed (one read per turn at most).
    if let Some(t) = sh.router.as_ref().filter(|_| left == 0) {
        t.read_soon();
    }
    p.ended(o.cancelled || o.track.error().is_some());
    let w = env.window.get();
    let overdue = sh.tally.timed_out.load(Ordering::SeqCst).then_some(OVERDUE);
    let request = rate_request(&o, due, w, overdue);
    let texts = std::mem::take(&mut *texts.lock().unwrap_or_else(|p| p.into_inner()));
    Sent { o, request, texts }
}

/// Record that session `id` stopped at the context limit before `turn`.
pub(super) fn context_stop(sh: &Shared, (id, turn): (u64, u32), prompt_tokens: u64, refused: bool) {
    let stop = ContextStop {
        session: id,
        turn,
        prompt_tokens,
        limit: sh.context,
        refused_by_server: refused,
    };
    sh.tally
        .stops
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(stop);
}

/// What a served turn tells the result: its answer's cache figures, the
/// intended cache (the prompt's segments, then the reply the engine keeps:
/// a tool call too; issue 35, defect 2) and, through a router, its replica.
/// `resent` says whether the next turn resends the reply (a trace's
/// recorded reply stands in for it otherwise: the engine still keeps it,
/// but the next prompt shares only the prompt before it).
pub(super) fn account(
    sh: &Shared,
    id: u64,
    sent: &Sent,
    conv: &mut ConversationSegments,
    (prompt_tokens, resent): (u64, bool),
) {
    let Sent { o, request, texts } = sent;
    if let Some(t) = &sh.router {
        let span = TurnSpan {
            session: id,
            sent: request.sent,
            end: request.completed_at.unwrap_or_else(|| sh.net.clock.now()),
            header: None,
            prompt_tokens,
            cached_tokens: o.cached_tokens,
        };
        t.turn(span, texts.noted.as_deref());
    }
    sh.tally
        .caches
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(RequestCache::of(o, prompt_tokens));
    let mut cache = sh.cache.lock().unwrap_or_else(|p| p.into_inner());
    let reply = request.completed_at.map(|_| o.track.output_tokens());
    intend(&mut cache, conv, prompt_tokens, (reply, resent));
}

/// What one turn does to the intended cache: its prompt is admitted (the
/// conversation so far and its new message), and, when it completed, the
/// engine keeps its `reply` tokens; `resent` says whether the next turn
/// resends the reply (a trace's recorded reply stands in for it otherwise:
/// the engine still keeps it, but the next prompt shares only the prompt
/// before it). One process feeds its turns as they end; the leader of
/// shards feeds the followers' from their records (`shards.rs`). The
/// figures do not depend on how the sessions' turns interleave: each
/// session's segments are its own, and the template's head is shared by
/// every prompt after the first, whichever that is.
pub(super) fn intend(
    cache: &mut IntendedPrefixCache,
    conv: &mut ConversationSegments,
    prompt_tokens: u64,
    (reply, resent): (Option<u64>, bool),
) {
    cache.admit(&conv.next_turn(prompt_tokens));
    if let Some(n) = reply {
        let kept = if resent {
            conv.reply(n)
        } else {
            conv.reply_not_resent(n)
        };
        cache.insert(&kept);
    }
}

/// Sleeps until run-clock time `due`; false when the run was cut first.
pub(super) async fn wait_until(sh: &Shared, due: f64) -> bool {
    let wait = due - sh.net.clock.now();
    if wait > 0.0 {
        tokio::select! {
            _ = sh.skip.cancelled() => return false,
            _ = tokio::time::sleep(std::time::Duration::from_secs_f64(wait)) => {}
        }
    }
    true
}

/// The reply as the conversation holds it for the next turn (`next` is
/// what that turn opens with; `agent.rs`): not at all when a recorded
/// reply stands in for it, making the calls the next turn's results
/// answer, else as generated (with its own call, if it made one).
pub(super) fn reply_message(
    texts: &ChannelTexts,
    called: bool,
    next: &Opening,
    (id, turn): (u64, u32),
    offered: Option<&ToolSet>,
) -> Option<Message> {
    match next {
        Opening::Recorded => None,
        Opening::Answers(ids) => Some(agent::answered(texts, ids, offered)),
        Opening::New => {
            let call = called.then(|| tool_loop::call_id(id, turn));
            Some(tool_loop::assistant(texts, call.as_deref()))
        }
    }
}
