//! Open-loop cells (`--request-rate`): requests leave at their due times from
//! a seeded schedule (`ldb_core::arrivals`) whether or not earlier ones have
//! finished, optionally capped by `--max-in-flight`; every latency counts
//! from the due time (`ldb_core::open_loop`). One cell per rate × context,
//! contexts in order, rates rising; `--stop-at-saturation` ends a context's
//! rise after two saturated cells in a row.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, StreamOutcome, run_stream};
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
use crate::plan::RunPlan;
use crate::prompts::PromptPlan;
use crate::recorder::Recorder;

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
    let mut rates = rc.cfg.request_rates.clone();
    rates.sort_by(f64::total_cmp);
    let mut index = 0u64;
    for &x in &rc.cfg.contexts {
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
            if rc.cfg.stop_at_saturation && stop_raising(in_a_row) {
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

/// One rate × context cell.
async fn rate_cell(
    rc: &RunCtx,
    rate: f64,
    context: u64,
    messages: Vec<ldb_core::prompt::Message>,
    record_prefill: bool,
    index: u64,
    prompts: &PromptPlan,
) -> (RateResult, Option<PrefillEntry>) {
    let n = requests_per_cell(rate, rc.cfg.rate_request_count, rc.cfg.duration);
    let at = format!("R={rate} req/s ctx={}", format_context(context));
    rc.live.event(format!(
        "rate cell start {at} requests={n} arrival={}",
        rc.cfg.arrival
    ));
    let skip = rc.controls.new_skip();
    let mut spec = CellSpec {
        concurrency: 1,
        context,
        messages,
        duration: 0.0,
        auto_stop: None,
        record_prefill,
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
    let due = schedule(rate, n, rc.cfg.arrival, rc.cfg.seed.wrapping_add(index));
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let cap =
        (rc.cfg.max_in_flight > 0).then(|| Arc::new(Semaphore::new(rc.cfg.max_in_flight as usize)));
    let in_flight = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, f64, ldb_client::stream::StreamOutcome)>();
    // Every request of the cell is measured: background /metrics reads at
    // --metrics-interval until the last one ends.
    let measuring = rc.scraper.measuring();
    let prefix_start = crate::prefix_run::span_start(rc).await;
    let t0 = rc.clock.now() + 0.05;
    window.open(t0);
    // The cell's time limit covers the dispatch too: a server that accepts
    // requests and never answers keeps every --max-in-flight slot taken,
    // and the wait for a free one must end with the cell. Bounded: an
    // overloaded server may hold requests for long.
    let span = due.last().copied().unwrap_or(0.0);
    let limit = t0 + span + (3.0 * span).max(rc.cfg.open_loop_grace);
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs_f64((limit - rc.clock.now()).max(0.0));
    let (capped, not_sent) = send_all(
        rc,
        Sender {
            due: &due,
            t0,
            deadline,
            skip: &skip,
            cap,
            window: window.clone(),
            counters: counters.clone(),
            body: &|i| bodies.body(i),
            tx,
            in_flight: in_flight.clone(),
            most: most.clone(),
        },
    )
    .await;
    if not_sent > 0 {
        rc.live.event(format!(
            "rate cell {at}: {not_sent} requests not sent, every --max-in-flight slot still \
             taken at the cell's limit"
        ));
    }
    let sent = due.len();
    let mut outs = Vec::with_capacity(sent);
    let mut sched: Vec<SchedSample> = Vec::new();
    let mut last_seq = 0;
    loop {
        let left = limit - rc.clock.now();
        if left <= 0.0 {
            skip.cancel();
        }
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(o) => outs.push(o),
                None => break,
            },
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
    window.close(rc.clock.now());
    drop(measuring);
    let timed_out = rc.clock.now() >= limit;
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
        arrival: rc.cfg.arrival,
        requests: &requests,
        max_in_flight: most.load(Ordering::Relaxed),
        in_flight_capped: capped,
        token_gap_p99: counters.gaps.stats().p99,
        max_error_rate: rc.cfg.max_error_rate,
        not_sent,
    });
    (row.server_prefix_cache_hit_rate, row.prefix_cache) =
        crate::prefix_run::rate_span_end(rc, prefix_start, &outs, window.get()).await;
    let sf = scheduler_fields(1, &sched, false, 0.0);
    if !sched.is_empty() {
        row.avg_running_reqs = sf.avg_running_reqs;
        row.max_running_reqs = sf.max_running_reqs;
        row.avg_queue_reqs = sf.avg_queue_reqs;
        row.max_queue_reqs = sf.max_queue_reqs;
    }
    if skip.is_cancelled() && !timed_out {
        row.status = CellStatus::SkippedUser;
        row.status_reason = "cut short by the user".into();
    }
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
    (row, prefill)
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

/// What the sending loop of an open-loop cell works with.
struct Sender<'a> {
    /// Due times, seconds after `t0`.
    due: &'a [f64],
    /// Run-clock time of the first due time.
    t0: f64,
    /// The cell's time limit: no request is sent after it.
    deadline: tokio::time::Instant,
    skip: &'a CancellationToken,
    /// `--max-in-flight` slots.
    cap: Option<Arc<Semaphore>>,
    window: Arc<SharedWindow>,
    counters: Arc<CellCounters>,
    /// The body of request i (built, and fed to the intended cache, as it
    /// is sent).
    body: &'a (dyn Fn(usize) -> Bytes + Sync),
    /// Each finished request: (index, due time, outcome).
    tx: mpsc::UnboundedSender<(usize, f64, StreamOutcome)>,
    in_flight: Arc<AtomicU64>,
    most: Arc<AtomicU64>,
}

/// Sends every request at its due time, each on its own task; returns
/// whether a request waited for a `--max-in-flight` slot, and how many
/// were never sent because the cell's limit came while every slot was
/// taken.
async fn send_all(rc: &RunCtx, s: Sender<'_>) -> (bool, u64) {
    let mut not_sent = 0u64;
    let mut capped = false;
    for (i, &d) in s.due.iter().enumerate() {
        let wait = s.t0 + d - rc.clock.now();
        if wait > 0.0 {
            tokio::select! {
                _ = s.skip.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
        }
        if s.skip.is_cancelled() {
            break;
        }
        let permit = match &s.cap {
            Some(sem) => {
                let p = match sem.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        capped = true;
                        tokio::select! {
                            _ = s.skip.cancelled() => break,
                            _ = tokio::time::sleep_until(s.deadline) => {
                                not_sent = (s.due.len() - i) as u64;
                                break;
                            }
                            p = sem.clone().acquire_owned() => match p {
                                Ok(p) => p,
                                Err(_) => break,
                            },
                        }
                    }
                };
                Some(p)
            }
            None => None,
        };
        let env = StreamEnv {
            window: s.window.clone(),
            counters: s.counters.clone(),
            cancel: s.skip.child_token(),
            idle_timeout: rc.cfg.idle_timeout(),
            first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
            ..StreamEnv::new(rc.http.clone(), rc.clock)
        };
        let (body, tx) = ((s.body)(i), s.tx.clone());
        let (in_flight, most) = (s.in_flight.clone(), s.most.clone());
        let scheduled = s.t0 + d;
        tokio::spawn(async move {
            let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            most.fetch_max(now, Ordering::Relaxed);
            let out = run_stream(&env, body).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
            let _ = tx.send((i, scheduled, out));
        });
    }
    (capped, not_sent)
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
