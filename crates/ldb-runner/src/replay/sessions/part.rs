//! A follower shard's part of a session run (docs/shards.md, "Sessions"):
//! the conversations the leader dealt it, run from the run's start with the
//! single-process session loop (`sessions.rs`), under the run's limit, and
//! every turn's record sent back for the leader to fold into the union.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::stream::StreamEnv;
use ldb_core::prefix_cache::{CacheGranularity, IntendedPrefixCache};
use ldb_core::prompt::{Message, ToolPart};
use ldb_core::replay::session::ThinkTime;
use ldb_core::trace::corpus::TextSource;
use tokio_util::sync::CancellationToken;

use super::super::config::{SessionConfig, ToolLoop};
use super::super::progress::Counters;
use super::super::router::{RouterOptions, Tracker, check_header_name, header_value};
use super::{Due, Net, Shared, Tally, Turn, run_all};
use crate::shard::session_wire::{SessionOrder, SessionShare, WireMessage, WireTurn};
use crate::shard::wire::ShardCellData;

/// Keys a body may carry besides those the API writes (`--tools`).
const BODY_KEYS: &[&str] = &["tools", "tool_choice"];

/// Whether an order can be run as it is: its headers are ones a flag could
/// name (never a credential's), its body adds only the tools' keys. (Its
/// numbers were checked on arrival, `shard/check.rs`.)
pub(crate) fn check(o: &SessionOrder) -> Result<(), String> {
    if let Some((name, template)) = &o.session_header {
        check_header_name(name)?;
        header_value(template, 0, 0)?;
    }
    if let Some(name) = &o.replica_header {
        check_header_name(name)?;
    }
    if o.body
        .extra
        .keys()
        .any(|k| !BODY_KEYS.contains(&k.as_str()))
    {
        return Err(format!("a session body may add only {BODY_KEYS:?}"));
    }
    Ok(())
}

/// Runs the order's sessions on `base`'s client and clock (`origin_unix`
/// is the run clock's Unix origin) until they end, the limit comes, or
/// `cancel` fires; their turns, on this clock.
pub(crate) async fn run(
    order: SessionOrder,
    base: StreamEnv,
    origin_unix: f64,
    cancel: CancellationToken,
) -> ShardCellData {
    let clock = base.clock;
    let (t0, limit) = (order.t0 - origin_unix, order.limit - origin_unix);
    let router = RouterOptions {
        session_header: order.session_header.clone(),
        replica_header: order.replica_header.clone(),
    };
    let tool_loop = order.tool_loop.map(|(latency, result_tokens)| ToolLoop {
        latency,
        result_tokens,
    });
    let http = base.http.clone();
    let sh = Shared {
        cfg: SessionConfig {
            sessions: order.sessions.len() as u64,
            turns: 0,
            user_tokens: 0,
            think_time: ThinkTime::Fixed(0.0),
            corpus: None,
            router: router.clone(),
            tool_loop,
        },
        salt: order.salt,
        // Unused: the leader built every text, tool results included.
        source: TextSource::Words,
        template: 0,
        trailing: 0,
        start: t0,
        skip: cancel.clone(),
        // Unused: the leader feeds the intended cache from the records.
        cache: Arc::new(Mutex::new(IntendedPrefixCache::new(
            CacheGranularity::TOKEN,
        ))),
        progress: Arc::new(Counters::default()),
        tally: Tally::new(t0),
        router: Tracker::with(
            &router,
            order.salt,
            (http.clone(), None),
            order.replica_bases.clone(),
        ),
        context: order.context,
        net: Arc::new(Net {
            http,
            clock,
            seed: order.seed,
            body: order.body.clone(),
            idle_timeout: order
                .idle_timeout_s
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .or(base.idle_timeout),
        }),
    };
    let _timer = sh.tally.limit(clock.now(), cancel, limit);
    let n = order.sessions.len() as u32;
    let plans = order
        .sessions
        .into_iter()
        .map(|s| (s.id, s.turns.into_iter().map(turn_of).collect()))
        .collect();
    let turns = run_all(&sh, plans).await;
    let share = SessionShare {
        caches: taken(&sh.tally.caches),
        stops: taken(&sh.tally.stops),
        spans: sh.router.as_ref().map_or_else(Vec::new, |t| t.take_turns()),
        most_in_flight: sh.tally.most.load(Ordering::Relaxed),
        timed_out: sh.tally.timed_out.load(Ordering::SeqCst),
        turns,
    };
    ShardCellData {
        cell: order.cell,
        concurrency: n,
        window_unix: Some((order.t0, order.limit)),
        origin_unix,
        gaps: sh.tally.counters.gaps.snapshot(),
        sessions: Some(Box::new(share)),
        ..ShardCellData::default()
    }
}

/// What a list holds, taken out.
fn taken<T>(m: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A planned turn as the loop takes it.
fn turn_of(t: WireTurn) -> Turn {
    Turn {
        due: match (t.after_reply, t.at) {
            (_, Some(at)) => Due::At(at),
            (after, None) => Due::AfterReply(after.unwrap_or(0.0)),
        },
        adds: t.adds.into_iter().map(message).collect(),
        built_tokens: t.built_tokens,
        max_tokens: t.max_tokens,
        opening: super::super::agent::Opening::New,
        tools: None,
        tool_result: false,
        tool_wait: 0.0,
        blocks: None,
        tool_result_text: t.tool_result,
    }
}

fn message(m: WireMessage) -> Message {
    let tool = (m.tool_calls.is_some() || m.tool_call_id.is_some()).then(|| ToolPart {
        tool_calls: m.tool_calls,
        tool_call_id: m.tool_call_id,
        // recorded reasoning is an agent row's: those are not dealt out
        reasoning_content: None,
    });
    Message {
        role: match m.role.as_str() {
            "system" => "system",
            "assistant" => "assistant",
            "tool" => "tool",
            // the roles were checked on arrival: this is `user`
            _ => "user",
        },
        content: m.content,
        tool,
    }
}
