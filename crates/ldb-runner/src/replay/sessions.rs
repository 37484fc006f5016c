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
use ldb_client::scrape::Scrape;
use ldb_client::stream::{CellCounters, SharedWindow};
use ldb_core::failure::is_context_limit;
use ldb_core::prefix_cache::{IntendedPrefixCache, chain};
use ldb_core::prompt::Message;
use ldb_core::replay::session::{
    ContextStop, ConversationSegments, SessionRequest, SessionResult, ThinkTime, ToolLoopStats,
    by_turn, per_session_of,
};
use ldb_core::replay::{PrefixCacheCheck, ReplayInputs, ReplaySummary, assemble};
use ldb_core::result::CellStatus;
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

mod net;
pub(crate) mod part;
mod shards;
mod turn;
mod turn_plan;
use net::Net;
use turn::{Sent, account, context_stop, reply_message, send_turn, wait_until};
pub(super) use turn_plan::{Due, Turn};

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
    /// The client, the clock and the body's keys (`net.rs`).
    net: Arc<Net>,
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
    fn limit(&self, now: f64, skip: CancellationToken, limit: f64) -> AbortOnDrop {
        let timed_out = self.timed_out.clone();
        let wait = Duration::from_secs_f64((limit - now).max(0.0));
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
                tools: None,
                tool_result: false,
                tool_wait: 0.0,
                blocks: None,
                tool_result_text: None,
            }
        })
        .collect()
}

/// One conversation, turn by turn; a failed turn ends it, and so does a
/// turn that would not fit the model's context (checked before it is sent,
/// or refused by the server for that: a stop, not an error). With the tool
/// loop, a reply that called a tool makes the next turn carry the call's
/// result instead of its user message (`tool_loop.rs`); a trace's next turn
/// says whether the reply is resent (`agent.rs`).
pub(super) async fn session(sh: Shared, id: u64, turns: Vec<Turn>) -> Vec<SessionRequest> {
    let mut conv = ConversationSegments::new(chain(sh.salt, id));
    let http = sh
        .router
        .as_ref()
        .map_or_else(|| sh.net.http.clone(), |t| t.http_for(id));
    let mut messages: Vec<Message> = Vec::new();
    let mut out = Vec::new();
    let mut last_end = sh.start;
    let planned = turns.len();
    // What each next turn opens with decides what becomes of the reply.
    let openings: Vec<Opening> = turns.iter().skip(1).map(|t| t.opening.clone()).collect();
    // the tool's run times: a stream of their own, seeded like think times
    let mut tool_rng =
        rand::rngs::StdRng::seed_from_u64(sh.net.seed.wrapping_add(id).rotate_left(32));
    let mut pending: Option<ToolTurn> = None;
    for (turn, mut plan) in (1u32..).zip(turns) {
        let next = openings.get(turn as usize - 1).cloned().unwrap_or_default();
        let result_text = plan.tool_result_text.take();
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
        if !wait_until(&sh, due).await {
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
        let body = sh
            .net
            .turn_body(&messages, plan.max_tokens, plan.tools.as_ref());
        let sent = send_turn(&sh, &http, body, due).await;
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
        account(&sh, id, &sent, &mut conv, (prompt_tokens, resent));
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
        pending = looping.map(|tl| {
            let u = tool_rng.random();
            tool_loop::tool_turn(&sh, &tl, (id, turn), u, result_text)
        });
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

/// Says what runs and starts showing its progress: `sessions` in all, and
/// the turns of each one this process runs (over shards the live view
/// counts the leader's part).
fn announce(
    rc: &RunCtx,
    cfg: &SessionConfig,
    (sessions, own): (u64, &[u32]),
    counters: Arc<Counters>,
    start: f64,
) -> Ticker {
    let turns = own.iter().copied().max().unwrap_or(0);
    rc.live.event(format!(
        "sessions: {sessions}, up to {turns} turns, {} user tokens per turn, think time {:?}",
        cfg.user_tokens, cfg.think_time
    ));
    let mut progress = session_progress(own.len() as u64, turns);
    progress.scheduled = own.iter().map(|&n| u64::from(n)).sum();
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

/// Every conversation side by side, each with its number in the run; their
/// requests.
async fn run_all(sh: &Shared, plans: Vec<(u64, Vec<Turn>)>) -> Vec<SessionRequest> {
    let tasks: Vec<_> = plans
        .into_iter()
        .map(|(id, p)| session(sh.clone(), id, p))
        .collect();
    futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// What a run hands its result besides the turns: the server's scrapes
/// around it, the turns planned per session, and over shards each one's
/// part.
struct Ran {
    scrapes: (Option<Scrape>, Option<Scrape>),
    expected: Vec<u32>,
    literal: bool,
    corpus: Option<ldb_core::replay::PromptCorpusInfo>,
    limit_s: f64,
    shards: Option<shards::Closed>,
}

/// The sessions of `--sessions` (`trace` `None`) or of a trace. Over
/// shards (`shards.rs`) the leader plans every conversation, deals them
/// out, runs its own with the loop every follower runs, and folds the
/// followers' turns into the same tally before the one assembly.
async fn run_with(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &SessionConfig,
    trace: Option<&TraceConfig>,
) -> SessionResult {
    let lead = match shards::open(rc).await {
        Ok(l) => l,
        Err(why) => return refused(cfg, why),
    };
    let salt: u64 = rand::random();
    let t = template_tokens(&rc.http, disc, salt).await.0;
    let (source, corpus) = super::corpus::source(rc, disc, cfg.corpus.as_ref(), t.tokens).await;
    // Every prompt opens with the template's head (issue 35, defect 3).
    let cache = IntendedPrefixCache::new(rc.cache_granularity()).with_head(t.head);
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
        router: Tracker::new(rc, &cfg.router, salt, lead.is_some()),
        context: disc.model_context,
        net: Arc::new(Net::of(rc)),
    };
    let (plans, literal) = plans_of(rc, &sh, cfg, trace.map(|t| (t, disc.model_context)));
    if lead.is_some() && plans.iter().flatten().any(Turn::is_agent) {
        return refused(
            cfg,
            "an agent trace (recorded replies, tool results, per-row tools, think or tool \
             times, shared blocks) runs in one process: its turns are not dealt to shards"
                .into(),
        );
    }
    let expected: Vec<u32> = plans.iter().map(|p| p.len() as u32).collect();
    let (own, mut dealt) = shards::deal(rc, &sh, lead, plans);
    // Fixed once every conversation is planned (and every follower's part
    // built): a first turn due while a long trace is read would leave
    // late, the delay in its latencies (issue 35).
    let start = rc.clock.now() + dealt.as_ref().map_or(0.2, shards::Dealt::lead_s);
    sh.start = start;
    sh.tally = Tally::new(start);
    let limit_s = rc.cfg.open_loop.replay_limit.unwrap_or(SESSION_LIMIT_S);
    let _timer = sh
        .tally
        .limit(rc.clock.now(), sh.skip.clone(), start + limit_s);
    if let Some(d) = dealt.as_mut() {
        d.send(rc, (start, start + limit_s));
    }
    let shown = own.iter().map(|(_, p)| p.len() as u32).collect::<Vec<_>>();
    let ticker = announce(
        rc,
        cfg,
        (expected.len() as u64, &shown),
        sh.progress.clone(),
        start,
    );
    let mut all = run_all(&sh, own).await;
    let shards = match dealt {
        Some(d) => Some(d.finish(rc, &sh, &mut all, start + limit_s).await),
        None => None,
    };
    drop((measuring, ticker));
    let after = super::trace::scrape_if(rc).await;
    let ran = Ran {
        scrapes: (before, after),
        expected,
        literal,
        corpus,
        limit_s,
        shards,
    };
    let result = result_of(rc, &sh, &all, ran).await;
    note_done(rc, &result);
    result
}

/// A run that could not start (over shards: a clock off by more than the
/// bound allows): an error with its reason.
fn refused(cfg: &SessionConfig, why: String) -> SessionResult {
    SessionResult {
        sessions: cfg.sessions,
        turns: cfg.turns,
        user_tokens: cfg.user_tokens,
        think_time: cfg.think_time,
        status: CellStatus::Error,
        status_reason: why,
        ..SessionResult::default()
    }
}

/// The result from every turn of every session (one process's, or the
/// union over shards: the same arithmetic for both).
async fn result_of(rc: &RunCtx, sh: &Shared, all: &[SessionRequest], ran: Ran) -> SessionResult {
    let scrapes = (ran.scrapes.0.as_ref(), ran.scrapes.1.as_ref());
    let router = match &sh.router {
        Some(t) => Some(t.finish(scrapes).await),
        None => None,
    };
    let expected = &ran.expected;
    let total: u64 = expected.iter().map(|&n| u64::from(n)).sum();
    let sharded = ran.shards.is_some();
    let (summary, status, why) = summarise(rc, sh, all, (total, ran.limit_s), sharded);
    let slo = rc.cfg.slo.spec.as_ref();
    let (tps, done, good) = per_session_of(
        all,
        |id| expected.get(id as usize).copied().unwrap_or(0),
        |r| slo.is_none_or(|s| ldb_core::replay::assemble::meets(s, r)),
    );
    let caches = std::mem::take(&mut *sh.tally.caches.lock().unwrap_or_else(|p| p.into_inner()));
    let (intended, granularity) = {
        let c = sh.cache.lock().unwrap_or_else(|p| p.into_inner());
        (c.hit_rate(), c.granularity())
    };
    let wall = summary.wall_time;
    let cfg = &sh.cfg;
    let mut result = SessionResult {
        sessions: expected.len() as u64,
        turns: expected.iter().copied().max().unwrap_or(0),
        user_tokens: cfg.user_tokens,
        output_tokens: rc.cfg.matrix.max_tokens,
        think_time: cfg.think_time,
        status,
        status_reason: why,
        by_turn: by_turn(all),
        session_output_tps: tps,
        session_goodput: slo.and_then(|_| (wall > 0.0).then(|| good as f64 / wall)),
        sessions_completed: done,
        prefix_cache: PrefixCacheCheck {
            prefix_cache_intended: intended.filter(|_| !ran.literal),
            granularity: Some(granularity),
            ..super::trace::achieved_check(rc, scrapes, &caches)
        }
        .judge(),
        summary,
        prompt_corpus: ran.corpus,
        tool_loop: cfg
            .tool_loop
            .map(|tl| ToolLoopStats::of(all, tl.latency, tl.result_tokens)),
        trace: None,
        router,
        ..stops_of(sh)
    };
    if let Some(c) = ran.shards {
        shards::label(&mut result, c);
    }
    result
}

/// The run's summary from its turns (`total` planned), its status and why:
/// a run whose limit (`limit_s` after its start) came first is an error.
/// Over shards (`sharded`) the tokens' arrival times are this process's
/// only (followers send their turns, not every token's time): none are used.
fn summarise(
    rc: &RunCtx,
    sh: &Shared,
    all: &[SessionRequest],
    (total, limit_s): (u64, f64),
    sharded: bool,
) -> (ReplaySummary, CellStatus, String) {
    let requests: Vec<_> = all.iter().map(|r| r.request.clone()).collect();
    let arrivals = sh.tally.counters.arrivals.counts().filter(|_| !sharded);
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
