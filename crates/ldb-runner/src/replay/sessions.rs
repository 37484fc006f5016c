//! `--sessions N --turns T`: N conversations at once, each turn sending the
//! whole conversation so far (the assistant's real replies included) and a
//! new user message of `--user-tokens` tokens, `--think-time` after the
//! previous reply ended. Closed within a session (a turn needs the reply
//! before it), open across sessions; each turn's latencies count from the
//! time it was due.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::discovery::Discovery;
use ldb_client::stream::{ChannelTexts, StreamEnv, run_stream};
use ldb_core::prefix_cache::{IntendedPrefixCache, chain};
use ldb_core::prompt::Message;
use ldb_core::replay::session::{
    ConversationSegments, SessionRequest, SessionResult, by_turn, per_session,
};
use ldb_core::replay::{PrefixCacheCheck, ReplayInputs, assemble};
use ldb_core::result::CellStatus;
use ldb_core::trace::prompt::block_words;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::check::template_tokens;
use super::config::SessionConfig;
use super::progress::{Counters, Ticker, session_progress};
use crate::ctx::RunCtx;
use crate::open_loop::rate_request;
use crate::prompts::{BodyOptions, chat_body};

/// What every session task shares.
#[derive(Clone)]
struct Shared {
    cfg: SessionConfig,
    salt: u64,
    template: u64,
    start: f64,
    skip: CancellationToken,
    cache: Arc<Mutex<IntendedPrefixCache>>,
    usage: Arc<Mutex<(u64, u64)>>,
    progress: Arc<Counters>,
}

/// The text of a new user message: `words` one-token words of its own.
fn user_text(salt: u64, session: u64, turn: u32, words: u64) -> String {
    let mut s = String::new();
    block_words(
        chain(session, u64::from(turn)) >> 1,
        salt,
        words as usize,
        &mut s,
    );
    s
}

/// One conversation, turn by turn.
async fn session(rc: &RunCtx, sh: Shared, id: u64) -> Vec<SessionRequest> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(rc.cfg.seed.wrapping_add(id));
    let mut conv = ConversationSegments::new(chain(sh.salt, id));
    let mut messages: Vec<Message> = Vec::new();
    let mut out = Vec::new();
    // First turns spread over one think time, so sessions do not start in step.
    let mut due = sh.start + sh.cfg.think_time.sample(rng.random::<f64>());
    for turn in 1..=sh.cfg.turns {
        let wait = due - rc.clock.now();
        if wait > 0.0 {
            tokio::select! {
                _ = sh.skip.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
        }
        Counters::bump(&sh.progress.due);
        let words = if turn == 1 {
            sh.cfg.user_tokens.saturating_sub(sh.template).max(1)
        } else {
            sh.cfg.user_tokens
        };
        messages.push(Message {
            role: "user",
            content: user_text(sh.salt, id, turn, words),
        });
        let body = chat_body(
            &rc.model,
            &messages,
            BodyOptions {
                max_tokens: rc.cfg.max_tokens,
                continuous_usage: false,
                ignore_eos: !rc.cfg.respect_eos,
                temperature: rc.cfg.temperature,
            },
        );
        let texts = Arc::new(Mutex::new(ChannelTexts::default()));
        let env = StreamEnv {
            cancel: sh.skip.child_token(),
            idle_timeout: rc.cfg.idle_timeout(),
            first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
            texts: Some(texts.clone()),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        };
        let p = &sh.progress;
        Counters::bump(&p.sent);
        Counters::bump(&p.in_flight);
        let o = run_stream(&env, body).await;
        p.in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        p.ended(o.cancelled || o.track.error().is_some());
        let w = env.window.get();
        let request = rate_request(&o, due, w, None);
        let sample = o.track.to_sample(0.0, w);
        // The server's count when it reports one, else the built size.
        let prompt_tokens = if sample.input_tokens > 0 {
            sample.input_tokens
        } else {
            conv.tokens() + words + sh.template
        };
        if let Some(c) = o.cached_tokens {
            let mut u = sh.usage.lock().unwrap_or_else(|p| p.into_inner());
            u.0 += c;
            u.1 += prompt_tokens;
        }
        let segments = conv.next_turn(prompt_tokens);
        sh.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(&segments);
        let done = request.completed_at;
        out.push(SessionRequest {
            session: id,
            turn,
            prompt_tokens,
            request,
        });
        let Some(done) = done else { break };
        let reply = texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .content
            .clone();
        messages.push(Message {
            role: "assistant",
            content: reply,
        });
        due = done + sh.cfg.think_time.sample(rng.random::<f64>());
    }
    if out.len() == sh.cfg.turns as usize && out.iter().all(|r| r.request.completed_at.is_some()) {
        Counters::bump(&sh.progress.sessions_done);
    }
    out
}

/// Says what runs and starts showing its progress.
fn announce(rc: &RunCtx, cfg: &SessionConfig, counters: Arc<Counters>, start: f64) -> Ticker {
    rc.live.event(format!(
        "sessions: {} × {} turns, {} user tokens per turn, think time {:?}",
        cfg.sessions, cfg.turns, cfg.user_tokens, cfg.think_time
    ));
    let progress = session_progress(cfg.sessions, cfg.turns);
    Ticker::start(rc, progress, counters, start)
}

/// Runs the sessions and returns their result.
pub(super) async fn run(rc: &RunCtx, disc: &Discovery, cfg: &SessionConfig) -> SessionResult {
    let salt: u64 = rand::random();
    let template = template_tokens(&rc.http, disc, salt).await.0.tokens;
    let granularity = rc.cache_granularity();
    let before = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let measuring = rc.scraper.measuring();
    let start = rc.clock.now() + 0.2;
    let sh = Shared {
        cfg: cfg.clone(),
        salt,
        template,
        start,
        skip: rc.controls.new_skip(),
        cache: Arc::new(Mutex::new(IntendedPrefixCache::new(granularity))),
        usage: Arc::new(Mutex::new((0, 0))),
        progress: Arc::new(Counters::default()),
    };
    let ticker = announce(rc, cfg, sh.progress.clone(), start);
    let tasks: Vec<_> = (0..cfg.sessions)
        .map(|id| session(rc, sh.clone(), id))
        .collect();
    let all: Vec<SessionRequest> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    drop((measuring, ticker));
    let after = if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let requests: Vec<_> = all.iter().map(|r| r.request.clone()).collect();
    let (summary, mut status, mut why) = assemble(&ReplayInputs {
        start,
        requests: &requests,
        scheduled: cfg.sessions * u64::from(cfg.turns),
        max_in_flight: cfg.sessions,
        slo: rc.cfg.slo.as_ref(),
        max_error_rate: rc.cfg.max_error_rate,
        ..ReplayInputs::default()
    });
    if rc.controls.stop.is_cancelled() && status != CellStatus::Error {
        status = CellStatus::SkippedUser;
        why = "cut short by the user".into();
    }
    let slo = rc.cfg.slo.as_ref();
    let (tps, done, good) = per_session(&all, cfg.turns, |r| {
        slo.is_none_or(|s| ldb_core::replay::assemble::meets(s, r))
    });
    let usage = *sh.usage.lock().unwrap_or_else(|p| p.into_inner());
    let intended = sh
        .cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .hit_rate();
    let (achieved, source) = super::trace::achieved(before.as_ref(), after.as_ref(), usage);
    let wall = summary.wall_time;
    let result = SessionResult {
        sessions: cfg.sessions,
        turns: cfg.turns,
        user_tokens: cfg.user_tokens,
        output_tokens: rc.cfg.max_tokens,
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
            server_prefix_cache_hit_rate: achieved,
            achieved_source: source,
            ..PrefixCacheCheck::default()
        }
        .judge(),
        summary,
    };
    let ttft = |t: usize| {
        result
            .by_turn
            .get(t)
            .and_then(|s| s.ttft.p50)
            .map_or("-".into(), |v| format!("{v:.3} s"))
    };
    rc.live.event(format!(
        "sessions done: {done} of {} complete, TTFT p50 turn 1 {} last turn {}",
        cfg.sessions,
        ttft(0),
        ttft(result.by_turn.len().saturating_sub(1))
    ));
    result
}
