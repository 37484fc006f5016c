//! Open-loop cells (`--request-rate`): requests leave at their due times from
//! a seeded schedule (`ldb_core::arrivals`) whether or not earlier ones have
//! finished, optionally capped by `--max-in-flight`; every latency counts
//! from the due time (`ldb_core::open_loop`). One cell per rate × context,
//! contexts in order, rates rising; `--stop-at-saturation` ends a context's
//! rise after two saturated cells in a row.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome};
use ldb_core::arrivals::schedule;
use ldb_core::cellstats::{SchedSample, scheduler_fields};
use ldb_core::live::{LiveEvent, Phase};
use ldb_core::open_loop::{RateInputs, RateRequest, RateResult, assemble, stop_raising};
use ldb_core::result::{CellStatus, PrefillEntry};
use ldb_core::tokens::format_context;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::cell::CellSpec;
use crate::cell_io::{drain, scout};
use crate::ctx::RunCtx;
use crate::open_loop_send::{Sender, send_all};
use crate::plan::RunPlan;
use crate::prompts::PromptPlan;
use crate::recorder::Recorder;
use crate::shard::rate::{ORDER_LEAD_S, RateShards, most_in_flight};

/// Requests per cell: `--request-count`, else rate × `--duration` (at least 1).
pub fn requests_per_cell(rate: f64, count: u64, duration: f64) -> u64 {
    if count > 0 {
        count
    } else {
        ((rate * duration).round() as u64).max(1)
    }
}

/// All rate cells, context by context.
pub(crate) async fn rate_matrix(
    rc: &RunCtx,
    plan: &RunPlan,
    prompts: &PromptPlan,
    rec: &mut Recorder,
) {
    rc.live.send(LiveEvent::PhaseChanged(Phase::Burst));
    let mut rates = rc.cfg.open_loop.request_rates.clone();
    rates.sort_by(f64::total_cmp);
    let mut index = 0u64;
    for &x in &rc.cfg.matrix.contexts {
        if let Some(reason) = plan
            .rate_skips
            .iter()
            .find(|(c, _)| *c == x)
            .map(|(_, r)| r)
        {
            for &r in &rates {
                rec.rate_cell(skipped_row(r, x, CellStatus::SkippedContext, reason));
            }
            continue;
        }
        let mut record_prefill = plan.integrated_prefill.contains(&x);
        let mut in_a_row = 0u32;
        for &rate in &rates {
            if rc.controls.stop.is_cancelled() {
                return;
            }
            if rc.cfg.matrix.stop_at_saturation && stop_raising(in_a_row) {
                rec.rate_cell(skipped_row(
                    rate,
                    x,
                    CellStatus::SkippedUser,
                    "not run: the two rates below it saturated the server (--stop-at-saturation)",
                ));
                continue;
            }
            let key = crate::recorder::rate_key(&rc.live, rate);
            rec.cell_started(key, x, rc.clock.now(), None);
            let reset = crate::prefix_run::before_cell(rc, prompts).await;
            let messages = prompts.messages(x, &format!("rate{x}"));
            let (mut row, prefill) =
                rate_cell(rc, rate, x, messages, record_prefill, index, prompts).await;
            row.prefix_cache.prefix_cache_reset = reset;
            index += 1;
            if let Some(p) = prefill {
                record_prefill = false;
                rec.prefill_row(x, p);
            }
            in_a_row = if row.saturated { in_a_row + 1 } else { 0 };
            if rc.controls.stop.is_cancelled() {
                return;
            }
            rec.rate_cell(row);
            drain(rc).await;
        }
    }
}

fn skipped_row(rate: f64, context: u64, status: CellStatus, reason: &str) -> RateResult {
    RateResult {
        request_rate: rate,
        context_tokens: context,
        status,
        status_reason: reason.to_string(),
        ..RateResult::default()
    }
}

/// One rate × context cell: scout, schedule, send and wait, then the row.
async fn rate_cell(
    rc: &RunCtx,
    rate: f64,
    context: u64,
    messages: Vec<ldb_core::prompt::Message>,
    record_prefill: bool,
    index: u64,
    prompts: &PromptPlan,
) -> (RateResult, Option<PrefillEntry>) {
    let ol = &rc.cfg.open_loop;
    let n = requests_per_cell(rate, ol.rate_request_count, rc.cfg.matrix.duration);
    let at = format!("R={rate} req/s ctx={}", format_context(context));
    rc.live.event(format!(
        "rate cell start {at} requests={n} arrival={}",
        ol.arrival
    ));
    let skip = rc.controls.new_skip();
    let mut spec = CellSpec {
        concurrency: 1,
        context,
        messages,
        duration: 0.0,
        auto_stop: None,
        record_prefill,
        probe: false,
    };
    // The scout warms the context's prefix cache, as before a decode cell.
    let prefill = if context > 0 {
        scout(rc, &mut spec, &skip).await.prefill
    } else {
        None
    };
    // Every request sends the cell's prompt; with shared prefixes its own
    // nonce behind the prefixes in turn (`prefix_run.rs`).
    let bodies = crate::prefix_run::RateBodies::new(rc, prompts, (context, index), &spec.messages);
    // A different schedule per cell, the same on every run with this seed.
    let due = schedule(rate, n, ol.arrival, ol.seed.wrapping_add(index));
    let span = due.last().copied().unwrap_or(0.0);
    // With --shards: the clocks measured and checked before anything is sent.
    let shards = match RateShards::open(rc, span.max(rc.cfg.matrix.duration)).await {
        Ok(s) => s,
        Err(why) => {
            rc.live.event(format!("rate cell error {at}: {why}"));
            return (skipped_row(rate, context, CellStatus::Error, &why), prefill);
        }
    };
    let sent = send_schedule(rc, &due, &bodies, shards.as_ref(), &skip).await;
    let row = rate_row(rc, (rate, context), sent, shards.as_ref(), (&skip, &at)).await;
    announce_row(rc, &at, &row);
    (row, prefill)
}

/// A cell's requests once every one has ended or been given up.
struct RateSent {
    /// This process's requests: (index in the schedule, due time, outcome).
    outs: Vec<(usize, f64, StreamOutcome)>,
    /// The server's scheduler over the cell.
    sched: Vec<SchedSample>,
    /// Over shards: the followers' parts as collected.
    others: Option<Collected>,
    /// The span every request of the cell counts in.
    window: Arc<SharedWindow>,
    /// Token counts and gaps of the cell's streams.
    counters: Arc<CellCounters>,
    /// The most requests in flight at once (this process).
    most: Arc<AtomicU64>,
    /// A request waited for a free `--max-in-flight` slot.
    capped: bool,
    /// Requests never sent: every slot still taken at the cell's limit.
    not_sent: u64,
    /// The first due time and the cell's time limit (run clock).
    t0: f64,
    limit: f64,
    /// The last request's due time after `t0`.
    span: f64,
    /// The prefix caches' state when the span opened.
    prefix_start: crate::prefix_run::SpanStart,
}

/// Open the cell's window, send every request of this process's part of
/// `due` at its time, and wait for them all (and, over shards, the
/// followers' parts), cancelling what is open at the cell's limit.
async fn send_schedule(
    rc: &RunCtx,
    due: &[f64],
    bodies: &crate::prefix_run::RateBodies<'_>,
    shards: Option<&RateShards>,
    skip: &CancellationToken,
) -> RateSent {
    let ol = &rc.cfg.open_loop;
    let span = due.last().copied().unwrap_or(0.0);
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let most = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::unbounded_channel::<(usize, f64, StreamOutcome)>();
    // Every request of the cell is measured: background /metrics reads at
    // --metrics-interval until the last one ends.
    let measuring = rc.scraper.measuring();
    let prefix_start = crate::prefix_run::span_start(rc).await;
    let t0 = rc.clock.now() + if shards.is_some() { ORDER_LEAD_S } else { 0.05 };
    window.open(t0);
    // The cell's time limit covers the dispatch too: a server that accepts
    // requests and never answers keeps every --max-in-flight slot taken,
    // and the wait for a free one must end with the cell. Bounded: an
    // overloaded server may hold requests for long.
    let limit = t0 + span + (3.0 * span).max(ol.open_loop_grace);
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs_f64((limit - rc.clock.now()).max(0.0));
    // Each shard sends its part of the one schedule (one process: all of it).
    let (mine, own) = match shards {
        Some(s) => s.send_orders(rc, due, (t0, limit), &|i| bodies.body(i)),
        None => (due.iter().copied().enumerate().collect(), HashMap::new()),
    };
    let cap = ol.max_in_flight;
    let cap = shards.map_or(cap, |s| s.own_cap(cap));
    let body = |i| match shards {
        Some(_) => own.get(&i).cloned().unwrap_or_default(),
        None => bodies.body(i),
    };
    let (capped, not_sent) = send_all(Sender {
        due: &mine,
        t0,
        deadline,
        skip,
        cap: (cap > 0).then(|| Arc::new(Semaphore::new(cap as usize))),
        env: StreamEnv {
            window: window.clone(),
            counters: counters.clone(),
            idle_timeout: rc.cfg.timing.idle_timeout(),
            first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        },
        body: &body,
        tx,
        in_flight: Arc::new(AtomicU64::new(0)),
        most: most.clone(),
    })
    .await;
    let (outs, sched, others) = gather(rc, rx, (t0, limit), skip, shards).await;
    window.close(rc.clock.now());
    drop(measuring);
    RateSent {
        outs,
        sched,
        others,
        window,
        counters,
        most,
        capped,
        not_sent,
        t0,
        limit,
        span,
        prefix_start,
    }
}

/// The cell's row from its requests: the followers' parts merged in, the
/// core's assembly, the prefix caches over the span, the server's
/// scheduler, the shards' labels, and a user's cut.
async fn rate_row(
    rc: &RunCtx,
    (rate, context): (f64, u64),
    sent: RateSent,
    shards: Option<&RateShards>,
    (skip, at): (&CancellationToken, &str),
) -> RateResult {
    let RateSent {
        mut outs,
        sched,
        others,
        window,
        counters,
        most,
        capped,
        not_sent,
        t0,
        limit,
        span,
        prefix_start,
    } = sent;
    let merged = shards
        .zip(others)
        .map(|(s, got)| s.merge(rc, got, &mut outs, &counters));
    let not_sent = not_sent + merged.as_ref().map_or(0, |m| m.not_sent);
    if not_sent > 0 {
        rc.live.event(format!(
            "rate cell {at}: {not_sent} requests not sent, every --max-in-flight slot still \
             taken at the cell's limit"
        ));
    }
    let timed_out = rc.clock.now() >= limit || merged.as_ref().is_some_and(|m| m.timed_out);
    outs.sort_by_key(|(i, _, _)| *i);
    let overdue = format!(
        "did not finish within {:.0} s after the last request was due",
        limit - t0 - span
    );
    let requests: Vec<RateRequest> = outs
        .iter()
        .map(|(_, scheduled, o)| {
            rate_request(o, *scheduled, window.get(), timed_out.then_some(&*overdue))
        })
        .collect();
    let mut row = assemble(&RateInputs {
        rate,
        context,
        arrival: rc.cfg.open_loop.arrival,
        requests: &requests,
        // Over shards, from the union of the requests on the leader's clock.
        max_in_flight: match shards {
            Some(_) => most_in_flight(&outs),
            None => most.load(Ordering::Relaxed),
        },
        in_flight_capped: capped || merged.as_ref().is_some_and(|m| m.capped),
        token_gap_p99: counters.gaps.stats().p99,
        max_error_rate: rc.cfg.timing.max_error_rate,
        not_sent,
    });
    (row.server_prefix_cache_hit_rate, row.prefix_cache) =
        crate::prefix_run::rate_span_end(rc, prefix_start, &outs, window.get()).await;
    scheduler_into(&mut row, &sched);
    if let Some((s, m)) = shards.zip(merged) {
        s.label(rc, &mut row, m);
    }
    if skip.is_cancelled() && !timed_out {
        row.status = CellStatus::SkippedUser;
        row.status_reason = "cut short by the user".into();
    }
    row
}

/// The server's running and queued requests over the cell, from its scrapes.
fn scheduler_into(row: &mut RateResult, sched: &[SchedSample]) {
    if sched.is_empty() {
        return;
    }
    let sf = scheduler_fields(1, sched, false, 0.0);
    row.avg_running_reqs = sf.avg_running_reqs;
    row.max_running_reqs = sf.max_running_reqs;
    row.avg_queue_reqs = sf.avg_queue_reqs;
    row.max_queue_reqs = sf.max_queue_reqs;
}

/// The cell's end in the event log.
fn announce_row(rc: &RunCtx, at: &str, row: &RateResult) {
    rc.live.event(format!(
        "rate cell done {at}: {:.2} req/s sent, {:.2} req/s done, {:.1} tok/s out, TTFT p50 {} s, {} of {} completed{}",
        row.offered_rate_measured.unwrap_or(0.0),
        row.achieved_rate.unwrap_or(0.0),
        row.output_tps,
        row.ttft_p50.map_or("-".into(), |v| format!("{v:.3}")),
        row.completed,
        row.request_count,
        if row.saturated { ", SATURATED" } else { "" }
    ));
    if row.status == CellStatus::Error {
        rc.live
            .event(format!("rate cell error {at}: {}", row.status_reason));
    }
}

/// What the leader's wait for the followers' parts gives.
type Collected = (
    std::collections::BTreeMap<u32, crate::shard::ShardCellData>,
    Vec<u32>,
);

/// Wait for every request of the cell to end — this process's and, over
/// shards, the followers' parts — cancelling what is open at `limit`, and
/// sample the server's scheduler meanwhile.
async fn gather(
    rc: &RunCtx,
    mut rx: mpsc::UnboundedReceiver<(usize, f64, StreamOutcome)>,
    (t0, limit): (f64, f64),
    skip: &CancellationToken,
    shards: Option<&RateShards>,
) -> (
    Vec<(usize, f64, StreamOutcome)>,
    Vec<SchedSample>,
    Option<Collected>,
) {
    let mut outs = Vec::new();
    let mut sched: Vec<SchedSample> = Vec::new();
    let mut last_seq = 0;
    let others = async {
        match shards {
            Some(s) => Some(s.collect(rc, limit).await),
            None => None,
        }
    };
    tokio::pin!(others);
    let (mut own_done, mut others_done, mut collected) = (false, shards.is_none(), None);
    let mut told = false;
    while !(own_done && others_done) {
        if limit - rc.clock.now() <= 0.0 {
            skip.cancel();
        }
        if let Some(s) = shards.filter(|_| skip.is_cancelled() && !told) {
            s.stop_parts();
            told = true;
        }
        tokio::select! {
            msg = rx.recv(), if !own_done => match msg {
                Some(o) => outs.push(o),
                None => own_done = true,
            },
            got = &mut others, if !others_done => {
                collected = got;
                others_done = true;
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        if let Some(s) = rc.scraper.latest()
            && s.seq != last_seq
            && s.sent >= t0
        {
            last_seq = s.seq;
            if let Some(running) = s.snap.running {
                sched.push(SchedSample {
                    running,
                    waiting: s.snap.waiting.unwrap_or(0.0),
                });
            }
        }
    }
    (outs, sched, collected)
}

/// One finished request of an open-loop schedule as the assembly reads it:
/// times on the run clock, and why it failed (`overdue`: the reason for a
/// request cancelled because the schedule's time limit came).
pub(crate) fn rate_request(
    o: &StreamOutcome,
    scheduled: f64,
    window: ldb_core::window::WindowBounds,
    overdue: Option<&str>,
) -> RateRequest {
    let s = o.track.to_sample(0.0, window);
    let completed = s.completed && o.track.error().is_none();
    RateRequest {
        scheduled,
        sent: o.track.start(),
        first_token: s.first_token_s,
        first_answer: (s.ttfo > 0.0).then(|| o.track.start() + s.ttfo),
        completed_at: if completed {
            o.done_at.or(s.end_s)
        } else {
            None
        },
        output_tokens: s.output_tokens,
        error: match o.track.error() {
            Some(e) => Some(e.message.clone()),
            None if o.cancelled && overdue.is_some() => overdue.map(str::to_string),
            None if !completed => Some("ended without completing".to_string()),
            None => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_per_cell_follow_the_count_or_the_duration() {
        assert_eq!(requests_per_cell(5.0, 0, 10.0), 50);
        assert_eq!(requests_per_cell(5.0, 12, 10.0), 12);
        assert_eq!(requests_per_cell(0.01, 0, 10.0), 1);
    }
}
