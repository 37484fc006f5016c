//! `--sessions N --turns T`: N conversations at once, each turn sending the
//! whole conversation so far (the assistant's real replies included) and a
//! new user message of `--user-tokens` tokens, `--think-time` after the
//! previous reply ended. Closed within a session (a turn needs the reply
//! before it), open across sessions; each turn's latencies count from the
//! time it was due.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::discovery::Discovery;
use ldb_client::stream::{CellCounters, SharedWindow};
use ldb_core::failure::is_context_limit;
use ldb_core::prefix_cache::{IntendedPrefixCache, Segment, chain};
use ldb_core::prompt::Message;
use ldb_core::replay::session::{
    ContextStop, ConversationSegments, SessionRequest, SessionResult, ThinkTime, ToolLoopStats,
    by_turn, per_session_of,
};
use ldb_core::replay::{PrefixCacheCheck, ReplayInputs, ReplaySummary, assemble};
use ldb_core::result::CellStatus;
use ldb_core::tools::ToolSet;
use ldb_core::trace::corpus::TextSource;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::agent::Opening;
use super::check::template_tokens;
use super::config::{SessionConfig, TraceConfig};
use super::progress::{Counters, Ticker, session_progress};
use super::router::Tracker;
use super::tool_loop::{self, ToolTurn};
use crate::config::SESSION_LIMIT_S;
use crate::ctx::RunCtx;
use crate::prefix_achieved::RequestCache;
use crate::prompts::{BodyOptions, stream_json};

mod turn;
use turn::{Sent, account, context_stop, reply_message, send_turn, wait_until};

/// Why a turn still open at the run's limit failed.
const OVERDUE: &str = "did not finish within the run's limit (--replay-limit)";

/// What every session task shares.
#[derive(Clone)]
pub(super) struct Shared {
    cfg: SessionConfig,
    pub(super) salt: u64,
    pub(super) source: TextSource,
    pub(super) template: u64,
    /// Of `template`, the tokens after the text (`check::Template`).
    pub(super) trailing: u64,
    start: f64,
    skip: CancellationToken,
    cache: Arc<Mutex<IntendedPrefixCache>>,
    progress: Arc<Counters>,
    tally: Tally,
    /// Through a router: headers and turn attribution (`router.rs`).
    router: Option<Arc<Tracker>>,
    /// The model's context length (0: unknown, only a refusal stops).
    context: u64,
}

/// What the turns add to as they run, for the result: what each answer
/// said of the cache, the token gaps, the most requests in flight at once;
/// and whether the run's limit came.
#[derive(Clone, Default)]
pub(super) struct Tally {
    caches: Arc<Mutex<Vec<RequestCache>>>,
    window: Arc<SharedWindow>,
    counters: Arc<CellCounters>,
    most: Arc<AtomicU64>,
    timed_out: Arc<AtomicBool>,
    stops: Arc<Mutex<Vec<ContextStop>>>,
}

impl Tally {
    /// A tally whose window (for the token gaps) opens at `start`.
    fn new(start: f64) -> Tally {
        let t = Tally::default();
        t.window.open(start);
        t.counters.arrivals.start_at(start);
        t
    }

    /// Cancels `skip` at run-clock time `limit` (the run's limit), marking
    /// the run timed out; the timer ends with the returned guard.
    fn limit(&self, rc: &RunCtx, skip: CancellationToken, limit: f64) -> AbortOnDrop {
        let timed_out = self.timed_out.clone();
        let wait = Duration::from_secs_f64((limit - rc.clock.now()).max(0.0));
        AbortOnDrop(tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            timed_out.store(true, Ordering::SeqCst);
            skip.cancel();
        }))
    }
}

/// Ends a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The text of a new user message: `words` tokens of its own (one-token
/// words of the list, or cut from `--prompt-corpus`).
pub(super) fn user_text(sh: &Shared, session: u64, turn: u32, words: u64) -> String {
    let mut s = String::new();
    sh.source.fill(
        chain(session, u64::from(turn)) >> 1,
        sh.salt,
        words as usize,
        &mut s,
    );
    s
}

/// The text of message `msg` of a trace row that has the tool build it
/// (`messages[].tokens`): `words` tokens of its own, apart from every user
/// message's and tool result's.
pub(super) fn message_text(
    sh: &Shared,
    (session, turn, msg): (u64, u32, u64),
    words: u64,
) -> String {
    let mut s = String::new();
    let key = chain(chain(session, u64::from(turn)), msg + 1) >> 1;
    sh.source.fill(key, sh.salt, words as usize, &mut s);
    s
}

/// When a turn is due.
#[derive(Debug, Clone, Copy)]
pub(super) enum Due {
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
pub(super) struct Turn {
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
}

/// The turns of `--sessions`' session `id`.
fn planned_turns(rc: &RunCtx, sh: &Shared, id: u64) -> Vec<Turn> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(rc.cfg.open_loop.seed.wrapping_add(id));
    (1..=sh.cfg.turns)
        .map(|turn| {
            let words = if turn == 1 {
                sh.cfg.user_tokens.saturating_sub(sh.template).max(1)
            } else {
                sh.cfg.user_tokens
            };
            Turn {
                // First turns spread over one think time, so sessions do
                // not start in step.
                due: Due::AfterReply(sh.cfg.think_time.sample(rng.random::<f64>())),
                adds: super::check::user(user_text(sh, id, turn, words)),
                built_tokens: words + if turn == 1 { sh.template } else { 0 },
                max_tokens: rc.cfg.matrix.max_tokens,
                opening: Opening::New,
                tools: rc.cfg.matrix.tools.clone(),
                tool_result: false,
                tool_wait: 0.0,
                blocks: None,
            }
        })
        .collect()
}

/// The streamed request of one turn. The reply goes back in the next turn
/// as the engine generated it (`skip_special_tokens: false`): a special
/// token the model emits past its end of turn (with ignore_eos) would
/// otherwise vanish from the text and end the cache's match there (measured
/// on vLLM 0.32, issue 35; docs/methodology.md §16.1).
fn turn_body(rc: &RunCtx, messages: &[Message], plan: &Turn) -> bytes::Bytes {
    let mut body = stream_json(
        &rc.model,
        messages,
        BodyOptions {
            api: rc.cfg.target.api,
            max_tokens: plan.max_tokens,
            continuous_usage: false,
            ignore_eos: !rc.cfg.matrix.respect_eos,
            temperature: rc.cfg.matrix.temperature,
            tools: plan.tools.clone(),
        },
    );
    body["skip_special_tokens"] = serde_json::json!(false);
    bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// One conversation, turn by turn; a failed turn ends it, and so does a
/// turn that would not fit the model's context (checked before it is sent,
/// or refused by the server for that: a stop, not an error). With the tool
/// loop, a reply that called a tool makes the next turn carry the call's
/// result instead of its user message (`tool_loop.rs`); a trace's next turn
/// says whether the reply is resent (`agent.rs`).
pub(super) async fn session(
    rc: &RunCtx,
    sh: Shared,
    id: u64,
    turns: Vec<Turn>,
) -> Vec<SessionRequest> {
    let mut conv = ConversationSegments::new(chain(sh.salt, id));
    let http = sh
        .router
        .as_ref()
        .map_or_else(|| rc.http.clone(), |t| t.http_for(rc, id));
    let mut messages: Vec<Message> = Vec::new();
    let mut out = Vec::new();
    let mut last_end = sh.start;
    let planned = turns.len();
    // What each next turn opens with decides what becomes of the reply.
    let openings: Vec<Opening> = turns.iter().skip(1).map(|t| t.opening.clone()).collect();
    // the tool's run times: a stream of their own, seeded like think times
    let mut tool_rng =
        rand::rngs::StdRng::seed_from_u64(rc.cfg.open_loop.seed.wrapping_add(id).rotate_left(32));
    let mut pending: Option<ToolTurn> = None;
    for (turn, mut plan) in (1u32..).zip(turns) {
        let next = openings.get(turn as usize - 1).cloned().unwrap_or_default();
        if let Some(t) = pending.take() {
            plan.due = Due::AfterReply(t.wait);
            plan.adds = vec![t.result];
            plan.built_tokens = t.result_tokens;
            plan.tool_result = true;
            plan.tool_wait = t.wait;
        }
        let due = match plan.due {
            Due::AfterReply(s) => last_end + s,
            Due::At(t) => (sh.start + t).max(last_end),
        };
        if !wait_until(rc, &sh, due).await {
            break;
        }
        // The client's count: the conversation so far and the new message.
        let expected = conv.tokens() + plan.built_tokens;
        if sh.context > 0 && expected + plan.max_tokens > sh.context {
            context_stop(&sh, (id, turn), expected, false);
            break;
        }
        if let Some(b) = plan.blocks.take() {
            conv.open_with(b);
        }
        Counters::bump(&sh.progress.due);
        messages.append(&mut plan.adds);
        let body = turn_body(rc, &messages, &plan);
        let sent = send_turn(rc, &sh, &http, body, due).await;
        if sent.o.track.error().is_some_and(is_context_limit) {
            context_stop(&sh, (id, turn), expected, true);
            break;
        }
        let sample = sent.o.track.to_sample(0.0, sh.tally.window.get());
        // The server's count when it reports one, else the built size.
        let prompt_tokens = if sample.input_tokens > 0 {
            sample.input_tokens
        } else {
            expected
        };
        let resent = next != Opening::Recorded;
        account(rc, &sh, id, &sent, &mut conv, (prompt_tokens, resent));
        let Sent { o, request, texts } = sent;
        let done = request.completed_at;
        let called = tool_loop::called(&texts, o.track.finish_reason());
        out.push(SessionRequest {
            session: id,
            turn,
            prompt_tokens,
            request,
            called_tool: called,
            tool_call_tokens: sample.tool_call_tokens,
            tool_result: plan.tool_result,
            tool_wait: plan.tool_wait,
        });
        let Some(done) = done else { break };
        let offered = plan.tools.as_deref();
        messages.extend(reply_message(&texts, called, &next, (id, turn), offered));
        let looping = sh.cfg.tool_loop.filter(|_| called);
        pending = looping.map(|tl| tool_loop::tool_turn(&sh, &tl, (id, turn), tool_rng.random()));
        last_end = done;
    }
    if out.len() == planned && out.iter().all(|r| r.request.completed_at.is_some()) {
        Counters::bump(&sh.progress.sessions_done);
    }
    out
}

/// Runs the sessions and returns their result.
pub(super) async fn run(rc: &RunCtx, disc: &Discovery, cfg: &SessionConfig) -> SessionResult {
    run_with(rc, disc, cfg, None).await
}

/// `--trace FILE --trace-sessions`: the trace's conversations
/// (`trace_sessions.rs`) run as sessions.
pub(super) async fn run_trace(rc: &RunCtx, disc: &Discovery, t: &TraceConfig) -> SessionResult {
    let cfg = SessionConfig {
        sessions: 0,
        turns: 0,
        user_tokens: 0,
        think_time: ThinkTime::Fixed(0.0),
        corpus: t.corpus.clone(),
        router: t.router.clone(),
        tool_loop: None,
    };
    let mut r = run_with(rc, disc, &cfg, Some(t)).await;
    r.output_tokens = 0;
    r.trace = Some(super::trace::trace_source(t));
    r
}

/// Says what runs and starts showing its progress (`sessions` of up to
/// `turns` turns, `total` turns in all).
fn announce(
    rc: &RunCtx,
    cfg: &SessionConfig,
    (sessions, turns, total): (u64, u32, u64),
    counters: Arc<Counters>,
    start: f64,
) -> Ticker {
    rc.live.event(format!(
        "sessions: {sessions}, up to {turns} turns, {} user tokens per turn, think time {:?}",
        cfg.user_tokens, cfg.think_time
    ));
    let mut progress = session_progress(sessions, turns);
    progress.scheduled = total;
    Ticker::start(rc, progress, counters, start)
}

/// Each conversation's turns (`--sessions`' or the trace's), and whether
/// any was a literal prompt.
fn plans_of(
    rc: &RunCtx,
    sh: &Shared,
    cfg: &SessionConfig,
    trace: Option<(&TraceConfig, u64)>,
) -> (Vec<Vec<Turn>>, bool) {
    match trace {
        None => (
            (0..cfg.sessions)
                .map(|id| planned_turns(rc, sh, id))
                .collect(),
            false,
        ),
        Some((t, context)) => super::trace_sessions::plans(rc, sh, t, context),
    }
}

/// Every conversation side by side; their requests.
async fn run_all(rc: &RunCtx, sh: &Shared, plans: Vec<Vec<Turn>>) -> Vec<SessionRequest> {
    let tasks: Vec<_> = (0u64..)
        .zip(plans)
        .map(|(id, p)| session(rc, sh.clone(), id, p))
        .collect();
    futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The sessions of `--sessions` (`trace` `None`) or of a trace.
async fn run_with(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &SessionConfig,
    trace: Option<&TraceConfig>,
) -> SessionResult {
    let salt: u64 = rand::random();
    let t = template_tokens(&rc.http, disc, salt).await.0;
    let (source, corpus) = super::corpus::source(rc, disc, cfg.corpus.as_ref(), t.tokens).await;
    let granularity = rc.cache_granularity();
    // Every prompt opens with the template's head (issue 35, defect 3).
    let cache = IntendedPrefixCache::new(granularity).with_head(t.head);
    let before = super::trace::scrape_if(rc).await;
    let measuring = rc.scraper.measuring();
    let mut sh = Shared {
        cfg: cfg.clone(),
        salt,
        source,
        template: t.tokens,
        trailing: t.trailing,
        start: 0.0,
        skip: rc.controls.new_skip(),
        cache: Arc::new(Mutex::new(cache)),
        progress: Arc::new(Counters::default()),
        tally: Tally::default(),
        router: Tracker::new(rc, &cfg.router, salt),
        context: disc.model_context,
    };
    let (plans, literal) = plans_of(rc, &sh, cfg, trace.map(|t| (t, disc.model_context)));
    // Fixed once every conversation is planned: a first turn due while a long
    // trace is read would leave late, the delay in its latencies (issue 35).
    let start = rc.clock.now() + 0.2;
    sh.start = start;
    sh.tally = Tally::new(start);
    let limit_s = rc.cfg.open_loop.replay_limit.unwrap_or(SESSION_LIMIT_S);
    let _timer = sh.tally.limit(rc, sh.skip.clone(), start + limit_s);
    let expected: Vec<u32> = plans.iter().map(|p| p.len() as u32).collect();
    let (sessions, turns) = (
        expected.len() as u64,
        expected.iter().copied().max().unwrap_or(0),
    );
    let total: u64 = expected.iter().map(|&n| u64::from(n)).sum();
    let ticker = announce(
        rc,
        cfg,
        (sessions, turns, total),
        sh.progress.clone(),
        start,
    );
    let all = run_all(rc, &sh, plans).await;
    drop((measuring, ticker));
    let after = super::trace::scrape_if(rc).await;
    let router = match &sh.router {
        Some(t) => Some(t.finish((before.as_ref(), after.as_ref())).await),
        None => None,
    };
    let (summary, status, why) = summarise(rc, &sh, &all, total, limit_s);
    let slo = rc.cfg.slo.spec.as_ref();
    let (tps, done, good) = per_session_of(
        &all,
        |id| expected.get(id as usize).copied().unwrap_or(0),
        |r| slo.is_none_or(|s| ldb_core::replay::assemble::meets(s, r)),
    );
    let caches = std::mem::take(&mut *sh.tally.caches.lock().unwrap_or_else(|p| p.into_inner()));
    let intended = intended_rate(&sh, literal);
    let wall = summary.wall_time;
    let result = SessionResult {
        sessions,
        turns,
        user_tokens: cfg.user_tokens,
        output_tokens: rc.cfg.matrix.max_tokens,
        think_time: cfg.think_time,
        status,
        status_reason: why,
        by_turn: by_turn(&all),
        session_output_tps: tps,
        session_goodput: slo.and_then(|_| (wall > 0.0).then(|| good as f64 / wall)),
        sessions_completed: done,
        prefix_cache: PrefixCacheCheck {
            prefix_cache_intended: intended,
            granularity: Some(granularity),
            ..super::trace::achieved_check(rc, (before.as_ref(), after.as_ref()), &caches)
        }
        .judge(),
        summary,
        prompt_corpus: corpus,
        tool_loop: cfg
            .tool_loop
            .map(|tl| ToolLoopStats::of(&all, tl.latency, tl.result_tokens)),
        trace: None,
        router,
        ..stops_of(&sh)
    };
    note_done(rc, &result);
    result
}

/// The intended hit rate of the prompts sent, unless some text was literal
/// (the tool did not build it, so it cannot say what it shares).
fn intended_rate(sh: &Shared, literal: bool) -> Option<f64> {
    let cache = sh.cache.lock().unwrap_or_else(|p| p.into_inner());
    cache.hit_rate().filter(|_| !literal)
}

/// The run's summary from its turns (`total` planned), its status and why:
/// a run whose limit (`limit_s` after its start) came first is an error.
fn summarise(
    rc: &RunCtx,
    sh: &Shared,
    all: &[SessionRequest],
    total: u64,
    limit_s: f64,
) -> (ReplaySummary, CellStatus, String) {
    let requests: Vec<_> = all.iter().map(|r| r.request.clone()).collect();
    let arrivals = sh.tally.counters.arrivals.counts();
    let (summary, mut status, mut why) = assemble(&ReplayInputs {
        start: sh.start,
        requests: &requests,
        scheduled: total,
        max_in_flight: sh.tally.most.load(Ordering::Relaxed),
        token_gap_p99: sh.tally.counters.gaps.stats().p99,
        token_arrivals: arrivals.as_deref(),
        slo: rc.cfg.slo.spec.as_ref(),
        max_error_rate: rc.cfg.timing.max_error_rate,
        ..ReplayInputs::default()
    });
    if sh.tally.timed_out.load(Ordering::SeqCst) {
        status = CellStatus::Error;
        why = format!(
            "the run's limit of {limit_s:.0} s came first (--replay-limit): {} of {total} turns \
             sent{}",
            requests.len(),
            if why.is_empty() {
                String::new()
            } else {
                format!("; {why}")
            }
        );
    } else if rc.controls.stop.is_cancelled() && status != CellStatus::Error {
        status = CellStatus::SkippedUser;
        why = "cut short by the user".into();
    }
    (summary, status, why)
}

/// The context-limit stops, sorted by session, in a result of their own.
fn stops_of(sh: &Shared) -> SessionResult {
    let mut stops = std::mem::take(&mut *sh.tally.stops.lock().unwrap_or_else(|p| p.into_inner()));
    stops.sort_by_key(|s| s.session);
    SessionResult {
        sessions_stopped_at_context_limit: stops.len() as u64,
        context_limit_stops: stops,
        ..SessionResult::default()
    }
}

/// The event line that closes a session run.
fn note_done(rc: &RunCtx, r: &SessionResult) {
    let ttft = |t: usize| {
        r.by_turn
            .get(t)
            .and_then(|s| s.ttft.p50)
            .map_or("-".into(), |v| format!("{v:.3} s"))
    };
    rc.live.event(format!(
        "sessions done: {} of {} complete, TTFT p50 turn 1 {} last turn {}",
        r.sessions_completed,
        r.sessions,
        ttft(0),
        ttft(r.by_turn.len().saturating_sub(1))
    ));
}
