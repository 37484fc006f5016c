//! `--trace` over shards (docs/shards.md, "Trace replays"). The leader
//! builds every prompt of the trace in trace order exactly as one process
//! would (the same salt, so the same prompts and prefix groups, fed to the
//! intended prefix cache in that order), deals the requests by
//! conversation (`ldb_core::shard_rate::deal_by_session`: a session's turns
//! stay on one shard), and sends each follower its part as an open-loop
//! order with its due times on the follower's clock (the rate cells'
//! order: a follower runs it with the single-process sending loop). Its
//! own part goes out through the replay's dispatcher. At the end the
//! followers' requests are moved onto the leader's clock beside its own,
//! and `trace.rs` assembles the result from the union with the
//! single-process code.

use std::collections::HashMap;

use bytes::Bytes;
use ldb_client::discovery::Discovery;
use ldb_core::prefix_cache::{IntendedPrefixCache, Segment};
use ldb_core::replay::TraceResult;
use ldb_core::result::CellStatus;
use ldb_core::shard_rate::deal_by_session;
use ldb_core::trace::prompt::PromptBuilder;

use super::config::{TraceConfig, requests};
use super::dispatch::{Dispatcher, Finished};
use super::progress::{Counters, trace_progress};
use super::trace::{Ran, Sent, ready, request_body};
use crate::ctx::RunCtx;
use crate::shard::rate::{Closed, ORDER_LEAD_S, RateShards, most_in_flight};

/// Each shard's part of a sharded replay and the shards lost.
pub(super) type ShardsPart = Closed;

/// Every request of the trace made ready before the replay starts.
struct Planned {
    /// Due seconds after the replay's start, per request sent.
    due: Vec<f64>,
    /// Each request's session id, where the trace has one.
    session: Vec<Option<String>>,
    /// Each request's body.
    bodies: Vec<Bytes>,
    /// Each request's prompt segments, when the tool built the prompt: the
    /// intended cache admits those of the requests that were sent.
    segments: Vec<Option<Vec<Segment>>>,
    /// The prompts' bookkeeping, as the single-process loop keeps it.
    sent: Sent,
}

/// When this process leads shards: the clocks measured and checked against
/// the trace's span (at least `--duration`), as for an open-loop cell.
pub(super) async fn open(rc: &RunCtx, span_s: f64) -> Result<Option<RateShards>, String> {
    RateShards::open(rc, span_s.max(rc.cfg.matrix.duration)).await
}

/// Builds every request in trace order, skipping those longer than the
/// server's context. The intended cache is fed later, with the prompts that
/// were sent (`admit_sent`).
fn plan(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &TraceConfig,
    b: &mut PromptBuilder,
) -> Result<Planned, String> {
    let mut p = Planned {
        due: Vec::new(),
        session: Vec::new(),
        bodies: Vec::new(),
        segments: Vec::new(),
        sent: Sent::default(),
    };
    for (seen, r) in requests(cfg)?.enumerate() {
        let rd = ready(b, &r, seen as u64);
        if let Some(t) = rd.tokens
            && disc.model_context > 0
            && t + r.output_tokens > disc.model_context
        {
            p.sent.too_long += 1;
            continue;
        }
        p.bodies.push(request_body(rc, &rd, &r));
        p.sent.literal |= rd.segments.is_none();
        p.segments.push(rd.segments);
        p.sent.intended_tokens.push(rd.tokens);
        p.sent.output_tokens.push(r.output_tokens);
        p.due.push(r.at_s);
        p.session.push(r.session_id);
    }
    Ok(p)
}

/// Feeds the intended cache the prompts of the requests sent (`outs`, any
/// shard's), in trace order, as one process admits each prompt it sends: a
/// request never sent (no slot before the limit, a stop, a lost shard's
/// part) cached nothing on the server either.
fn admit_sent(
    cache: &mut IntendedPrefixCache,
    segments: &[Option<Vec<Segment>>],
    outs: &[Finished],
) {
    let mut sent: Vec<usize> = outs.iter().map(|(i, _, _)| *i).collect();
    sent.sort_unstable();
    sent.dedup();
    for seg in sent.iter().filter_map(|&i| segments.get(i)?.as_ref()) {
        cache.admit(seg);
    }
}

/// The schedule starts this long after the orders leave: the lead every
/// open-loop order has, plus the time to carry the largest follower's part
/// (encoded, sent, decoded) at a rate slow for a busy host, so that every
/// follower holds its part before its first request is due.
fn order_lead(part_bytes: usize) -> f64 {
    /// Bytes of a part carried per second, at worst.
    const PART_BYTES_PER_S: f64 = 20e6;
    ORDER_LEAD_S + part_bytes as f64 / PART_BYTES_PER_S
}

/// Sends this process's part at its due times; the requests not sent (the
/// user stopped, or no slot before the limit).
async fn send_own(
    rc: &RunCtx,
    d: &mut Dispatcher,
    mine: &[(usize, f64)],
    mut own: HashMap<usize, Bytes>,
) -> u64 {
    for (n, &(k, due)) in mine.iter().enumerate() {
        let left = (mine.len() - n) as u64;
        if !d.wait_until(rc, due).await {
            return left;
        }
        Counters::bump(&d.progress.due);
        let body = own.remove(&k).unwrap_or_default();
        if d.send(rc, k, due, body).await.is_err() {
            return left;
        }
    }
    0
}

/// Replays the trace over every shard. Every prompt and every follower's
/// part are built first; only then is the start fixed, by `times` (given
/// the lead, the schedule's start and its time limit on the leader's run
/// clock), so no request is due while the trace is still being built.
pub(super) async fn run(
    rc: &RunCtx,
    disc: &Discovery,
    cfg: &TraceConfig,
    (builder, cache): (&mut PromptBuilder, &mut IntendedPrefixCache),
    times: &dyn Fn(f64) -> (f64, f64),
    shards: RateShards,
) -> (Ran, (f64, f64)) {
    let mut planned = match plan(rc, disc, cfg, builder) {
        Ok(p) => p,
        Err(e) => {
            shards.stop_parts();
            return (Ran::failed(e), times(0.0));
        }
    };
    let ids: Vec<Option<&str>> = planned.session.iter().map(Option::as_deref).collect();
    let parts = deal_by_session(&planned.due, &ids, shards.shard_count());
    rc.live.event(format!(
        "trace replay over {} shards: parts {} (dealt by conversation)",
        parts.len(),
        parts
            .iter()
            .map(|p| p.len().to_string())
            .collect::<Vec<_>>()
            .join("/")
    ));
    let bodies = std::mem::take(&mut planned.bodies);
    let body = |k: usize| bodies.get(k).cloned().unwrap_or_default();
    let prepared = shards.prepare_parts(rc, parts, &body);
    drop(bodies);
    let (start, limit) = times(order_lead(prepared.largest_part_bytes()));
    let (mine, own) = (prepared.mine, prepared.own);
    shards.send_prepared(rc, prepared.orders, (start, limit));
    let progress = trace_progress(mine.len() as u64, cfg.scan.span_s);
    let (mut d, rx) = Dispatcher::new(rc, start, limit, progress);
    d.set_cap(shards.own_cap(rc.cfg.open_loop.max_in_flight));
    let not_sent = send_own(rc, &mut d, &mine, own).await;
    let (window, counters, capped) = (d.window.clone(), d.counters.clone(), d.capped);
    let skip = d.skip.clone();
    let (mut outs, timed_out) = d.collect(rc, rx, limit, |_| {}).await;
    if skip.is_cancelled() {
        // Stopped by the user (or the limit): the followers stop too, and
        // what they sent still comes back.
        shards.stop_parts();
    }
    let got = shards.collect(rc, limit).await;
    let merged = shards.merge(rc, got, &mut outs, &counters);
    outs.sort_by_key(|(i, _, _)| *i);
    admit_sent(cache, &planned.segments, &outs);
    let mut sent = planned.sent;
    sent.not_sent = not_sent + merged.not_sent;
    let (capped, timed_out) = (capped || merged.capped, timed_out || merged.timed_out);
    let mut closed = shards.close(rc, merged, "trace");
    if let Some(r) = closed.records.first_mut() {
        // The leader's requests of the trace, as a follower's record says.
        r.concurrency = mine.len() as u32;
    }
    let ran = Ran {
        sent: Ok(sent),
        most: most_in_flight(&outs),
        outs,
        timed_out,
        capped,
        gap_p99: counters.gaps.stats().p99,
        window: window.get(),
        counted: None,
        shards: Some(closed),
        // followers' token arrival times are not sent: counted at completion
        arrivals: None,
    };
    (ran, (start, limit))
}

/// Records each shard's part on the result; a replay that lost a shard is
/// an error (part of the trace was not sent or not counted).
pub(super) fn label(result: &mut TraceResult, part: ShardsPart) {
    result.shards = part.records;
    let Some(reason) = part.reason else {
        return;
    };
    result.shards_lost = part.lost;
    result.status = CellStatus::Error;
    result.status_reason = reason;
}
