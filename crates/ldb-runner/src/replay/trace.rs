//! `--trace`: one replay of a trace file. Requests go out at their scheduled
//! times (open loop) with `max_tokens` = the trace's output length; prompts
//! are built block by block (`ldb_core::trace::prompt`) and fed in send order
//! to the intended prefix cache; the server's own hit rate is read over the
//! same span.

use ldb_client::discovery::Discovery;
use ldb_client::scrape::Scrape;
use ldb_core::prefix_cache::{IntendedPrefixCache, Segment, chain};
use ldb_core::prompt::Message;
use ldb_core::replay::{
    LengthCheck, PrefixCacheCheck, ReplayInputs, ReplayRequest, TraceResult, TraceSource, assemble,
};
use ldb_core::result::{CellStatus, ResetStatus};
use ldb_core::trace::prompt::PromptBuilder;
use ldb_core::trace::{TracePrompt, TraceRequest};
use std::sync::atomic::Ordering;

use super::check::{count_chat, errors, template_tokens, user};
use super::config::{TraceConfig, requests};
use super::dispatch::{Dispatcher, Finished, NotSent};
use super::first_request::{FirstRequestWatch, first_cached};
use super::progress::{Counters, trace_progress};
use crate::ctx::RunCtx;
use crate::open_loop::rate_request;
use crate::prefix_achieved::{RequestCache, achieved};
use crate::prompts::{BodyOptions, stream_body};

/// A request made ready to send: its messages, its prompt tokens and
/// segments when the tool built the prompt.
pub(super) struct Ready {
    pub(super) messages: Vec<Message>,
    pub(super) tokens: Option<u64>,
    pub(super) segments: Option<Vec<Segment>>,
}

pub(super) fn ready(b: &mut PromptBuilder, r: &TraceRequest, index: u64) -> Ready {
    match &r.prompt {
        TracePrompt::Tokens(n) => {
            let built = if r.hash_ids.is_empty() {
                b.unique(*n, index)
            } else {
                b.blocks(*n, &r.hash_ids)
            };
            Ready {
                messages: user(built.text),
                tokens: Some(*n),
                segments: Some(built.segments),
            }
        }
        TracePrompt::Text(t) => Ready {
            messages: user(t.clone()),
            tokens: None,
            segments: None,
        },
        // Built messages are text of their own, but the template's tokens
        // between them are not known here: no intended share either.
        TracePrompt::Messages(m) => Ready {
            messages: super::agent::messages(m, |i, n| {
                b.message_text(n, chain(index, i as u64) >> 1)
            }),
            tokens: None,
            segments: None,
        },
    }
}

/// Counts the first `cfg.tokenize_checks` built prompts with the server's
/// tokenizer: (counted, intended) pairs.
async fn tokenize_sample(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &TraceConfig,
    b: &mut PromptBuilder,
) -> Vec<(u64, u64)> {
    let mut pairs = Vec::new();
    let Ok(reqs) = requests(cfg) else {
        return pairs;
    };
    for (i, r) in reqs.enumerate().take(cfg.tokenize_checks) {
        let rd = ready(b, &r, i as u64);
        let Some(want) = rd.tokens else { continue };
        match count_chat(&rc.http, disc, &rd.messages).await {
            Some(n) => pairs.push((n, want)),
            None => break,
        }
    }
    pairs
}

/// What the sending loop leaves behind.
#[derive(Default)]
pub(super) struct Sent {
    pub(super) intended_tokens: Vec<Option<u64>>,
    pub(super) output_tokens: Vec<u64>,
    pub(super) too_long: u64,
    pub(super) not_sent: u64,
    pub(super) literal: bool,
}

/// The request body of a trace row: its messages and tools, `max_tokens`
/// = the trace's output length.
pub(super) fn request_body(rc: &RunCtx, rd: &Ready, r: &TraceRequest) -> bytes::Bytes {
    stream_body(
        &rc.model,
        &rd.messages,
        BodyOptions {
            api: rc.cfg.target.api,
            max_tokens: r.output_tokens,
            continuous_usage: false,
            ignore_eos: !rc.cfg.matrix.respect_eos,
            temperature: rc.cfg.matrix.temperature,
            tools: super::agent::tools(r),
        },
    )
}

async fn send_all(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &TraceConfig,
    d: &mut Dispatcher,
    b: &mut PromptBuilder,
    cache: &mut IntendedPrefixCache,
) -> Result<Sent, String> {
    let mut s = Sent::default();
    let total = cfg.scan.requests;
    let mut next_note = total / 10;
    for (seen, r) in requests(cfg)?.enumerate() {
        // Checked before the prompt is built: a row far beyond the context
        // must cost nothing (issue 34).
        if let Some(t) = r.input_tokens()
            && disc.model_context > 0
            && t.saturating_add(r.output_tokens) > disc.model_context
        {
            s.too_long += 1;
            continue;
        }
        let rd = ready(b, &r, seen as u64);
        let left = total.saturating_sub(seen as u64);
        if !d.wait_until(rc, r.at_s).await {
            s.not_sent += left;
            break;
        }
        Counters::bump(&d.progress.due);
        let body = request_body(rc, &rd, &r);
        match d.send(rc, s.intended_tokens.len(), r.at_s, body).await {
            Ok(()) => {}
            Err(NotSent::NoSlot) | Err(NotSent::Stopped) => {
                s.not_sent += left;
                break;
            }
        }
        match rd.segments {
            Some(seg) => {
                cache.admit(&seg);
            }
            None => s.literal = true,
        }
        s.intended_tokens.push(rd.tokens);
        s.output_tokens.push(r.output_tokens);
        if seen as u64 + 1 >= next_note && next_note > 0 {
            next_note += total / 10;
            rc.live.event(format!(
                "trace replay: {} of {total} requests sent, {} in flight",
                seen + 1,
                d.in_flight.load(std::sync::atomic::Ordering::Relaxed)
            ));
        }
    }
    Ok(s)
}

/// How long after its start a replay of a `span`-second schedule may run:
/// `--replay-limit`, else the span plus 3 × the span or the open-loop grace
/// (120 s), whichever is longer (docs/workloads.md, "Time limits").
pub(super) fn replay_limit(ol: &crate::config::OpenLoopConfig, span: f64) -> f64 {
    ol.replay_limit
        .unwrap_or(span + (3.0 * span).max(ol.open_loop_grace))
}

/// What the result says of the trace file.
pub(super) fn trace_source(cfg: &TraceConfig) -> TraceSource {
    TraceSource {
        path: cfg.path.display().to_string(),
        sha256: cfg.scan.sha256.clone(),
        format: cfg
            .scan
            .format
            .map(|f| f.name().to_string())
            .unwrap_or_default(),
        options: cfg.options.clone(),
        rows: cfg.scan.counts,
        benchmark_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// A `/metrics` scrape now, when the run reads metrics (a replay's span
/// opens and closes with one).
pub(super) async fn scrape_if(rc: &RunCtx) -> Option<ldb_client::scrape::Scrape> {
    if rc.metrics {
        rc.scraper.scrape_once().await
    } else {
        None
    }
}

/// The achieved hit rate of a replay or a session run, by the rule every
/// mode reads (`prefix_achieved::achieved`), into the result's keys.
pub(super) fn achieved_check(
    rc: &RunCtx,
    scrapes: (Option<&Scrape>, Option<&Scrape>),
    requests: &[RequestCache],
) -> PrefixCacheCheck {
    let a = achieved(rc.engine, scrapes, requests);
    PrefixCacheCheck {
        server_prefix_cache_hit_rate: a.as_ref().map(|a| a.rate),
        achieved_source: a.as_ref().map(|a| a.source.to_string()),
        achieved_basis: a.map(|a| a.basis).filter(|b| !b.is_empty()),
        ..PrefixCacheCheck::default()
    }
}

/// What one replay's sending left behind, on the leader's clock: every
/// request that went out, and how the sending went.
pub(super) struct Ran {
    /// The prompts' bookkeeping (Err: the trace could not be read).
    pub sent: Result<Sent, String>,
    /// Every request sent (over shards: the union of every shard's).
    pub outs: Vec<Finished>,
    /// The time limit came before every request ended.
    pub timed_out: bool,
    /// Most requests in flight at once.
    pub most: u64,
    /// A request waited for a `--max-in-flight` slot.
    pub capped: bool,
    /// Token-gap p99 (over shards: from the summed histograms).
    pub gap_p99: Option<f64>,
    /// The span's window, for each request's sample.
    pub window: ldb_core::window::WindowBounds,
    /// The first request's prefix hits, counted alone (after a reset).
    pub counted: Option<f64>,
    /// `--shards`: each shard's part and the shards lost, else `None`.
    pub shards: Option<super::trace_shards::ShardsPart>,
    /// Output tokens by the second they arrived in (`None` over shards).
    pub arrivals: Option<Vec<u64>>,
}

impl Ran {
    /// Nothing sent: the trace could not be read.
    pub(super) fn failed(e: String) -> Ran {
        Ran {
            sent: Err(e),
            outs: Vec::new(),
            timed_out: false,
            most: 0,
            capped: false,
            gap_p99: None,
            window: Default::default(),
            counted: None,
            shards: None,
            arrivals: None,
        }
    }
}

/// Sends the whole trace from this process.
async fn run_alone(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &TraceConfig,
    (builder, cache): (&mut PromptBuilder, &mut IntendedPrefixCache),
    (start, limit): (f64, f64),
    before: Option<&Scrape>,
) -> Ran {
    let progress = trace_progress(cfg.scan.requests, cfg.scan.span_s);
    let (mut d, rx) = Dispatcher::new(rc, start, limit, progress);
    let watch = FirstRequestWatch::new(&d);
    let sending = async {
        let sent = send_all(rc, disc, cfg, &mut d, builder, cache).await;
        watch.sending_done.store(true, Ordering::SeqCst);
        sent
    };
    let (sent, counted) = match rc.prefix.run_reset() {
        Some(ResetStatus::Done) => tokio::join!(sending, watch.counted_hits(rc, before, limit)),
        _ => (sending.await, None),
    };
    let (window, counters, capped) = (d.window.clone(), d.counters.clone(), d.capped);
    let most = d.most();
    let (outs, timed_out) = d.collect(rc, rx, limit, |_| {}).await;
    Ran {
        sent,
        outs,
        timed_out,
        most,
        capped,
        gap_p99: counters.gaps.stats().p99,
        window: window.get(),
        counted,
        shards: None,
        arrivals: counters.arrivals.counts(),
    }
}

/// Replays the trace and returns its result.
pub(super) async fn replay(rc: &RunCtx, disc: &Discovery, cfg: &TraceConfig) -> TraceResult {
    let salt: u64 = rand::random();
    let (template, how) = template_tokens(&rc.http, disc, salt).await;
    rc.live.event(format!(
        "trace replay: {} requests over {:.1} s, chat template {} tokens, {} of them after \
         the text ({how})",
        cfg.scan.requests, cfg.scan.span_s, template.tokens, template.trailing
    ));
    let (source, corpus) =
        super::corpus::source(rc, disc, cfg.corpus.as_ref(), template.tokens).await;
    let mut builder = PromptBuilder::new(salt, template.tokens)
        .with_trailing_template(template.trailing)
        .with_source(source);
    let pairs = tokenize_sample(rc, disc, cfg, &mut builder).await;
    let granularity = rc.cache_granularity();
    // Every built prompt opens with the template's head (issue 35, defect 3).
    let mut cache = IntendedPrefixCache::new(granularity).with_head(template.head);
    let before = super::trace::scrape_if(rc).await;
    let measuring = rc.scraper.measuring();
    let span = cfg.scan.span_s;
    let mut result = TraceResult {
        source: trace_source(cfg),
        prompt_corpus: corpus,
        ..TraceResult::default()
    };
    // Over shards the clocks are measured and checked first, and the
    // schedule starts late enough for every follower to hold its part.
    let shards = match super::trace_shards::open(rc, span).await {
        Ok(s) => s,
        Err(why) => {
            result.status = CellStatus::Error;
            result.status_reason = why;
            return result;
        }
    };
    // The start `lead` seconds from now and the time limit; over shards it
    // is fixed only after every prompt and part is built (issue 35, 1).
    let times = |lead: f64| {
        let start = rc.clock.now() + lead;
        let limit = start + replay_limit(&rc.cfg.open_loop, span);
        (start, limit)
    };
    let parts = (&mut builder, &mut cache);
    let (ran, (start, limit)) = match shards {
        Some(s) => super::trace_shards::run(rc, disc, cfg, parts, &times, s).await,
        None => {
            let t = times(0.2);
            (run_alone(rc, disc, cfg, parts, t, before.as_ref()).await, t)
        }
    };
    drop(measuring);
    let after = super::trace::scrape_if(rc).await;
    let overdue = format!(
        "did not finish within {:.0} s after the last request was due",
        limit - start - span
    );
    let scrapes = (before.as_ref(), after.as_ref());
    if let Err(e) = finish(
        rc,
        &mut result,
        ran,
        (start, &overdue, cfg.scan.requests),
        scrapes,
        &cache,
    ) {
        result.status = CellStatus::Error;
        result.status_reason = e;
        return result;
    }
    let (tokenized, tmax, tmean) = errors(&pairs);
    result.lengths.tokenized = tokenized;
    result.lengths.tokenized_max_error = tmax;
    result.lengths.tokenized_mean_error = tmean;
    result.prefix_cache.granularity = Some(granularity);
    note_done(rc, &result);
    result
}

/// The result from what the sending left: the summary from every request,
/// the intended hit rate beside the achieved one, the prompts' lengths.
fn finish(
    rc: &RunCtx,
    result: &mut TraceResult,
    ran: Ran,
    (start, overdue, scheduled): (f64, &str, u64),
    (before, after): (Option<&Scrape>, Option<&Scrape>),
    cache: &IntendedPrefixCache,
) -> Result<(), String> {
    let sent = ran.sent?;
    let (outs, w) = (&ran.outs, ran.window);
    let requests: Vec<_> = outs
        .iter()
        .map(|(_, due, o)| rate_request(o, *due, w, ran.timed_out.then_some(overdue)))
        .collect();
    let (summary, mut status, mut why) = assemble(&ReplayInputs {
        start,
        requests: &requests,
        scheduled,
        skipped_too_long: sent.too_long,
        not_sent: sent.not_sent,
        max_in_flight: ran.most,
        capped: ran.capped,
        token_gap_p99: ran.gap_p99,
        token_arrivals: ran.arrivals.as_deref(),
        slo: rc.cfg.slo.spec.as_ref(),
        max_error_rate: rc.cfg.timing.max_error_rate,
    });
    if rc.controls.stop.is_cancelled() && status != CellStatus::Error {
        status = CellStatus::SkippedUser;
        why = "cut short by the user".into();
    }
    let mut caches = Vec::new();
    let mut reported = Vec::new();
    for (i, _, o) in outs {
        let prompt = o.track.to_sample(0.0, w).input_tokens;
        caches.push(RequestCache::of(o, prompt));
        if let Some(Some(want)) = sent.intended_tokens.get(*i)
            && prompt > 0
        {
            reported.push((prompt, *want));
        }
    }
    let output_short = output_short(rc, &requests, outs, &sent.output_tokens);
    let (reported_n, rmax, _) = errors(&reported);
    result.status = status;
    result.status_reason = why;
    result.summary = summary;
    let reset = rc.prefix.run_reset();
    result.prefix_cache = PrefixCacheCheck {
        prefix_cache_intended: if sent.literal { None } else { cache.hit_rate() },
        prefix_cache_reset: reset,
        ..achieved_check(rc, (before, after), &caches)
    }
    .judge();
    if reset == Some(ResetStatus::Done) {
        note_first_request(
            rc,
            &mut result.prefix_cache,
            first_cached(outs, ran.counted),
        );
    }
    result.lengths = LengthCheck {
        reported: reported_n,
        reported_max_error: rmax,
        output_short,
        ..LengthCheck::default()
    };
    if let Some(part) = ran.shards {
        super::trace_shards::label(result, part);
    }
    Ok(())
}

/// Completed requests that came back with fewer output tokens than the
/// trace asked for (said once in the event log).
fn output_short(rc: &RunCtx, requests: &[ReplayRequest], outs: &[Finished], wanted: &[u64]) -> u64 {
    let n = requests
        .iter()
        .zip(outs)
        .filter(|(r, (i, _, _))| {
            r.completed_at.is_some() && wanted.get(*i).is_some_and(|&want| r.output_tokens < want)
        })
        .count() as u64;
    if n > 0 {
        rc.live.event(format!(
            "trace replay: {n} requests ended before their output length: the server \
             stopped at end-of-sequence (ignore_eos not honoured?)"
        ));
    }
    n
}

/// Records and says what the first request after the reset found cached.
fn note_first_request(rc: &RunCtx, pc: &mut PrefixCacheCheck, first: (Option<u64>, &str)) {
    let (Some(n), how) = first else {
        return;
    };
    pc.first_request_cached_tokens = Some(n);
    pc.first_request_cached_source = Some(how.into());
    rc.live.event(if n == 0 {
        format!(
            "prefix cache reset checked: the first request after it found 0 cached tokens ({how})"
        )
    } else {
        format!(
            "prefix cache reset did not empty the cache: the first request after it found {n} \
             cached tokens ({how})"
        )
    });
}

fn note_done(rc: &RunCtx, r: &TraceResult) {
    let s = &r.summary;
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0));
    rc.live.event(format!(
        "trace replay done: {} of {} completed, {} errors, {} too long, {:.1} tok/s out, TTFT p50 {}, \
         prefix cache intended {} achieved {}{}",
        s.completed,
        s.scheduled,
        s.errors,
        s.skipped_too_long,
        s.output_tps,
        s.ttft.p50.map_or("-".into(), |v| format!("{v:.3} s")),
        pct(r.prefix_cache.prefix_cache_intended),
        pct(r.prefix_cache.server_prefix_cache_hit_rate),
        if r.prefix_cache.differs {
            " (MORE THAN 10 POINTS APART)"
        } else {
            ""
        }
    ));
}
