//! Open-loop cells (`--request-rate`): requests sent at their due times
//! whether or not earlier ones finished, and their latencies counted from the
//! due time, not from the moment the client got round to sending (a client
//! that waits for the server before sending hides the server's queue: the
//! "coordinated omission" of closed-loop benchmarks). One row per
//! rate × context in `rate_results` (methodology §8.4). Arithmetic only.

use serde::{Deserialize, Serialize};

use crate::arrivals::Arrival;
use crate::result::CellStatus;
use crate::stats::percentile_sorted;

/// One request of an open-loop cell, times on the run clock (seconds).
/// (Serialized only between shards: a follower's session turns.)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateRequest {
    /// When it was due.
    pub scheduled: f64,
    /// When it was sent.
    pub sent: f64,
    /// First output token (reasoning or answer).
    pub first_token: Option<f64>,
    /// First answer (content) token.
    pub first_answer: Option<f64>,
    /// When it completed (`[DONE]` after the final usage); `None` if it did not.
    pub completed_at: Option<f64>,
    /// Output tokens received.
    pub output_tokens: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// What a cell knows besides its requests.
#[derive(Debug, Clone, Default)]
pub struct RateInputs<'a> {
    /// Offered rate, requests per second.
    pub rate: f64,
    /// Nominal context.
    pub context: u64,
    /// Arrival process.
    pub arrival: Arrival,
    /// The requests, in due order.
    pub requests: &'a [RateRequest],
    /// Most requests in flight at once.
    pub max_in_flight: u64,
    /// `--max-in-flight` held some request back.
    pub in_flight_capped: bool,
    /// Token gap p99 over the cell, seconds.
    pub token_gap_p99: Option<f64>,
    /// Failed share above which the cell is an error.
    pub max_error_rate: f64,
    /// Requests never sent: every `--max-in-flight` slot was still taken
    /// when the cell's time limit came.
    pub not_sent: u64,
}

/// One open-loop cell as the result file keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RateResult {
    /// Offered rate, requests per second.
    pub request_rate: f64,
    /// Nominal context.
    pub context_tokens: u64,
    /// `poisson` or `constant`.
    pub arrival: Arrival,
    /// `ok`, `no_tokens`, `error` or `skipped_*`.
    pub status: CellStatus,
    /// Why, when not `ok`.
    pub status_reason: String,
    /// Requests sent.
    pub request_count: u64,
    /// Requests of the schedule never sent: with `--max-in-flight`, every
    /// slot was still taken when the cell's time limit came.
    pub not_sent: u64,
    /// Requests that completed.
    pub completed: u64,
    /// Requests that failed.
    pub errors: u64,
    /// The first distinct failure reasons (at most 3).
    pub error_reasons: Vec<String>,
    /// Completed requests per second: completed / (last completion − first
    /// send), what other tools call request throughput; 0 when requests
    /// were sent and none completed. `None` when not measured: no request
    /// sent, or a file before schema 2, whose `achieved_rate` was the send
    /// rate and reads back as [`RateResult::offered_rate_measured`].
    pub achieved_rate: Option<f64>,
    /// Requests actually sent per second: (n − 1) / (last send − first
    /// send); `None` below two sends. The offered rate as the client
    /// realised it (`achieved_rate` before schema 2).
    pub offered_rate_measured: Option<f64>,
    /// Output tokens of completed requests / (last completion − first send), tok/s.
    pub output_tps: f64,
    /// Time to first token from the due time, mean, seconds.
    pub ttft_avg: Option<f64>,
    /// Time to first token from the due time, p50, seconds.
    pub ttft_p50: Option<f64>,
    /// The same, p99.
    pub ttft_p99: Option<f64>,
    /// Time to first answer token from the due time, p50, seconds.
    pub ttfo_p50: Option<f64>,
    /// Due time to completion, mean, seconds (completed requests).
    pub e2e_avg: Option<f64>,
    /// Due time to completion, p50, seconds (completed requests).
    pub e2e_p50: Option<f64>,
    /// The same, p99.
    pub e2e_p99: Option<f64>,
    /// Token gap p99 over the cell, seconds.
    pub token_gap_p99: Option<f64>,
    /// Send time − due time, p99, seconds: how late the client sent.
    pub dispatch_lag_p99: Option<f64>,
    /// Most requests in flight at once.
    pub max_in_flight: u64,
    /// `--max-in-flight` held some request back (its latency counts the wait).
    pub max_in_flight_capped: bool,
    /// Waits grew through the cell: the server did not keep up with the rate.
    pub saturated: bool,
    /// Mean running requests from the server's scrapes (0 without metrics).
    pub avg_running_reqs: f64,
    /// Highest running count scraped.
    pub max_running_reqs: u64,
    /// Mean queued requests from the scrapes.
    pub avg_queue_reqs: f64,
    /// Highest queued count scraped.
    pub max_queue_reqs: u64,
    /// Seconds from the first send to the last request's end.
    pub wall_time: f64,
    /// Prefix-cache hit share of the cell's prompt tokens as the server
    /// reported it (source in `server_prefix_cache_source`; absent when the
    /// server reports nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_prefix_cache_hit_rate: Option<f64>,
    /// Intended prefix-cache hit rate, its source and the reset.
    #[serde(flatten)]
    pub prefix_cache: crate::result::PrefixCacheCell,
    /// `--shards N` only: what each shard sent (`concurrency` holds its
    /// requests of the schedule), index order; empty for one process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<crate::shard::ShardCellRecord>,
    /// `--shards N` only: shards lost during the cell (it is then `error`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards_lost: Vec<u32>,
}

fn mean(v: &[f64]) -> Option<f64> {
    let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    (!f.is_empty()).then(|| f.iter().sum::<f64>() / f.len() as f64)
}

fn pct(mut v: Vec<f64>, p: f64) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile_sorted(&v, p))
}

/// Saturation: the median wait for the first token of the last quarter of
/// the requests (by due time) exceeds the first quarter's by more than
/// max(1 s, the first quarter's median). A server that keeps up serves the
/// first and the last requests alike; one that does not builds a queue that
/// grows with every request. Needs 8 requests with a first token.
pub fn saturated(requests: &[RateRequest]) -> bool {
    let waits: Vec<f64> = requests
        .iter()
        .filter_map(|r| Some(r.first_token? - r.scheduled))
        .collect();
    if waits.len() < 8 {
        return false;
    }
    let q = waits.len() / 4;
    let first = pct(waits[..q].to_vec(), 50.0).unwrap_or(0.0);
    let last = pct(waits[waits.len() - q..].to_vec(), 50.0).unwrap_or(0.0);
    last - first > first.max(1.0)
}

/// The cell's status and why: failures (requests never sent count as
/// failed) beyond `--max-error-rate`, then no tokens, else ok; unsent
/// requests are named whatever the status.
fn verdict(
    i: &RateInputs<'_>,
    n: u64,
    failed: &[&String],
    reasons: &[String],
    tokens: u64,
) -> (CellStatus, String) {
    // Requests that could not even be sent count against the cell like
    // failed ones: the offered rate was not applied.
    let planned = n + i.not_sent;
    let error_share = if planned > 0 {
        (failed.len() as u64 + i.not_sent) as f64 / planned as f64
    } else {
        0.0
    };
    let not_sent_why = (i.not_sent > 0).then(|| {
        format!(
            "{} of {planned} requests not sent: every --max-in-flight slot was still taken \
             at the cell's time limit",
            i.not_sent
        )
    });
    let (status, mut why) = if planned > 0 && error_share > i.max_error_rate {
        let failed_why = (!failed.is_empty()).then(|| {
            format!(
                "{} of {n} requests failed: {}",
                failed.len(),
                reasons.first().cloned().unwrap_or_default()
            )
        });
        (
            CellStatus::Error,
            failed_why.into_iter().collect::<Vec<_>>(),
        )
    } else if tokens == 0 {
        (
            CellStatus::NoTokens,
            vec!["no request completed with output tokens".to_string()],
        )
    } else {
        (CellStatus::Ok, Vec::new())
    };
    // The cell says so whatever its status.
    why.extend(not_sent_why);
    (status, why.join("; "))
}

/// The row of one cell.
pub fn assemble(i: &RateInputs<'_>) -> RateResult {
    let rs = i.requests;
    let n = rs.len() as u64;
    let from_due = |f: fn(&RateRequest) -> Option<f64>| -> Vec<f64> {
        rs.iter()
            .filter_map(|r| Some(f(r)? - r.scheduled))
            .collect()
    };
    let ttft = from_due(|r| r.first_token);
    let ttfo = from_due(|r| r.first_answer);
    let e2e = from_due(|r| r.completed_at);
    let lag: Vec<f64> = rs.iter().map(|r| (r.sent - r.scheduled).max(0.0)).collect();
    let first_send = rs.iter().map(|r| r.sent).fold(f64::INFINITY, f64::min);
    let last_send = rs.iter().map(|r| r.sent).fold(f64::NEG_INFINITY, f64::max);
    let last_done = rs
        .iter()
        .filter_map(|r| r.completed_at)
        .fold(f64::NEG_INFINITY, f64::max);
    let completed: Vec<&RateRequest> = rs.iter().filter(|r| r.completed_at.is_some()).collect();
    let tokens: u64 = completed.iter().map(|r| r.output_tokens).sum();
    let failed: Vec<&String> = rs.iter().filter_map(|r| r.error.as_ref()).collect();
    let mut reasons: Vec<String> = Vec::new();
    for f in &failed {
        if reasons.len() < 3 && !reasons.contains(f) {
            reasons.push((*f).clone());
        }
    }
    let (status, status_reason) = verdict(i, n, &failed, &reasons, tokens);
    let span = |a: f64, b: f64| (b.is_finite() && a.is_finite() && b > a).then_some(b - a);
    let last_end = rs
        .iter()
        .filter_map(|r| r.completed_at.or(r.first_token).or(Some(r.sent)))
        .fold(f64::NEG_INFINITY, f64::max);
    RateResult {
        request_rate: i.rate,
        context_tokens: i.context,
        arrival: i.arrival,
        status,
        status_reason,
        request_count: n,
        not_sent: i.not_sent,
        completed: completed.len() as u64,
        errors: failed.len() as u64,
        error_reasons: reasons,
        achieved_rate: (n > 0)
            .then(|| span(first_send, last_done).map_or(0.0, |s| completed.len() as f64 / s)),
        offered_rate_measured: span(first_send, last_send).map(|s| (n - 1) as f64 / s),
        output_tps: span(first_send, last_done).map_or(0.0, |s| tokens as f64 / s),
        ttft_avg: mean(&ttft),
        ttft_p50: pct(ttft.clone(), 50.0),
        ttft_p99: pct(ttft, 99.0),
        ttfo_p50: pct(ttfo, 50.0),
        e2e_avg: mean(&e2e),
        e2e_p50: pct(e2e.clone(), 50.0),
        e2e_p99: pct(e2e, 99.0),
        token_gap_p99: i.token_gap_p99,
        dispatch_lag_p99: pct(lag, 99.0),
        max_in_flight: i.max_in_flight,
        max_in_flight_capped: i.in_flight_capped,
        saturated: saturated(rs),
        wall_time: span(first_send, last_end).unwrap_or(0.0),
        ..RateResult::default()
    }
}

/// `--stop-at-saturation`: stop raising the rate at a context once the last
/// two cells there (in rising rate order) were saturated.
pub fn stop_raising(saturated_in_a_row: u32) -> bool {
    saturated_in_a_row >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request due at `due`, sent `lag` later, waiting `wait` for its first
    /// token, then `tokens` tokens over `dur` seconds.
    fn req(due: f64, lag: f64, wait: f64, dur: f64, tokens: u64) -> RateRequest {
        RateRequest {
            scheduled: due,
            sent: due + lag,
            first_token: Some(due + wait),
            first_answer: Some(due + wait),
            completed_at: Some(due + wait + dur),
            output_tokens: tokens,
            error: None,
        }
    }

    fn inputs(requests: &[RateRequest]) -> RateInputs<'_> {
        RateInputs {
            rate: 2.0,
            context: 0,
            arrival: Arrival::Constant,
            requests,
            max_in_flight: 3,
            in_flight_capped: false,
            token_gap_p99: Some(0.02),
            max_error_rate: 0.0,
            not_sent: 0,
        }
    }

    #[test]
    fn latencies_count_from_the_due_time_and_rates_from_the_sends() {
        // 2 req/s for 5 s, each sent 10 ms late, 0.3 s to first token, 100
        // tokens in 1 s
        let rs: Vec<RateRequest> = (0..10)
            .map(|k| req(f64::from(k) * 0.5, 0.01, 0.3, 1.0, 100))
            .collect();
        let r = assemble(&inputs(&rs));
        assert_eq!(r.status, CellStatus::Ok);
        assert_eq!((r.request_count, r.completed, r.errors), (10, 10, 0));
        // 10 sends from 0.01 to 4.51: 2 req/s sent
        let sent = r.offered_rate_measured.expect("sent");
        assert!((sent - 2.0).abs() < 1e-9, "{sent}");
        // 10 completions from the first send (0.01) to the last (5.8)
        let done = r.achieved_rate.expect("done");
        assert!((done - 10.0 / 5.79).abs() < 1e-9, "{done}");
        // 1,000 tokens from the first send (0.01) to the last completion (5.8)
        assert!(
            (r.output_tps - 1000.0 / 5.79).abs() < 1e-6,
            "{}",
            r.output_tps
        );
        assert!((r.ttft_p50.expect("ttft") - 0.3).abs() < 1e-9);
        assert!((r.ttft_avg.expect("ttft") - 0.3).abs() < 1e-9);
        assert!((r.e2e_avg.expect("e2e") - 1.3).abs() < 1e-9);
        assert!((r.e2e_p99.expect("e2e") - 1.3).abs() < 1e-9);
        assert!((r.dispatch_lag_p99.expect("lag") - 0.01).abs() < 1e-9);
        assert!(!r.saturated);
        assert_eq!(r.token_gap_p99, Some(0.02));
    }

    #[test]
    fn a_growing_queue_is_saturation_a_steady_one_is_not() {
        // each request waits 0.4 s longer than the one before: a queue
        let growing: Vec<RateRequest> = (0..20)
            .map(|k| req(f64::from(k) * 0.1, 0.0, 0.2 + 0.4 * f64::from(k), 1.0, 10))
            .collect();
        assert!(saturated(&growing));
        assert!(assemble(&inputs(&growing)).saturated);
        // a steady 2 s wait with noise
        let steady: Vec<RateRequest> = (0..20)
            .map(|k| {
                req(
                    f64::from(k) * 0.1,
                    0.0,
                    2.0 + 0.1 * f64::from(k % 3),
                    1.0,
                    10,
                )
            })
            .collect();
        assert!(!saturated(&steady));
        // too few requests to tell
        assert!(!saturated(&growing[..7]));
    }

    #[test]
    fn failures_and_empty_cells_get_a_status() {
        let mut rs: Vec<RateRequest> = (0..4)
            .map(|k| req(f64::from(k), 0.0, 0.1, 0.5, 5))
            .collect();
        rs[1].completed_at = None;
        rs[1].error = Some("HTTP 500: boom".into());
        let r = assemble(&inputs(&rs));
        assert_eq!(r.status, CellStatus::Error);
        assert!(
            r.status_reason
                .starts_with("1 of 4 requests failed: HTTP 500"),
            "{}",
            r.status_reason
        );
        assert_eq!(r.error_reasons, vec!["HTTP 500: boom".to_string()]);
        let mut lenient = inputs(&rs);
        lenient.max_error_rate = 0.5;
        assert_eq!(assemble(&lenient).status, CellStatus::Ok);
        let none = assemble(&inputs(&[]));
        assert_eq!(none.status, CellStatus::NoTokens);
        assert_eq!((none.achieved_rate, none.output_tps), (None, 0.0));
        assert_eq!(none.offered_rate_measured, None);
        assert_eq!(none.ttft_p50, None);
    }

    #[test]
    fn achieved_rate_counts_completions_not_sends() {
        // 10 req/s sent for 2 s to a server that completes one request
        // every 0.5 s: it keeps its own pace, whatever the offered rate.
        let rs: Vec<RateRequest> = (0..20)
            .map(|k| {
                let due = f64::from(k) * 0.1;
                let done = 0.5 * f64::from(k + 1);
                req(due, 0.0, done - due - 0.1, 0.1, 10)
            })
            .collect();
        let r = assemble(&inputs(&rs));
        let sent = r.offered_rate_measured.expect("sent");
        assert!((sent - 10.0).abs() < 1e-9, "{sent}");
        // 20 completions from the first send (0) to the last (10 s)
        let done = r.achieved_rate.expect("done");
        assert!((done - 2.0).abs() < 1e-9, "{done}");
        // Sent but none completed: a measured 0, not "unknown".
        let stuck: Vec<RateRequest> = rs
            .iter()
            .map(|q| RateRequest {
                completed_at: None,
                ..q.clone()
            })
            .collect();
        assert_eq!(assemble(&inputs(&stuck)).achieved_rate, Some(0.0));
    }

    #[test]
    fn requests_never_sent_count_against_the_cell_and_label_it() {
        let rs: Vec<RateRequest> = (0..4)
            .map(|k| req(f64::from(k), 0.0, 0.1, 0.5, 5))
            .collect();
        let mut i = inputs(&rs);
        i.not_sent = 6;
        let r = assemble(&i);
        assert_eq!((r.request_count, r.not_sent), (4, 6));
        assert_eq!(r.status, CellStatus::Error);
        assert!(
            r.status_reason.contains("6 of 10 requests not sent"),
            "{}",
            r.status_reason
        );
        // A share within --max-error-rate leaves the cell valid, labelled.
        i.not_sent = 1;
        i.max_error_rate = 0.5;
        let r = assemble(&i);
        assert_eq!(r.status, CellStatus::Ok);
        assert!(r.status_reason.contains("1 of 5 requests not sent"));
    }

    #[test]
    fn two_saturated_cells_in_a_row_stop_the_rise() {
        assert!(!stop_raising(1));
        assert!(stop_raising(2));
    }
}
