//! From the requests of a replay to its summary: counts, latencies from the
//! scheduled time, throughput over time, goodput, status.

pub use crate::open_loop::RateRequest as ReplayRequest;
use crate::result::CellStatus;
use crate::slo::Metric;
use crate::slo::SloSpec;

use super::{Bucket, Distribution, ReplaySummary};

/// What a replay knows besides its requests.
#[derive(Debug, Clone, Default)]
pub struct ReplayInputs<'a> {
    /// Run-clock time of the replay's start (schedule time 0).
    pub start: f64,
    /// The requests sent, any order.
    pub requests: &'a [ReplayRequest],
    /// Requests in the window, sent or not.
    pub scheduled: u64,
    /// Requests skipped as longer than the server's context.
    pub skipped_too_long: u64,
    /// Requests not sent for lack of time or a free slot.
    pub not_sent: u64,
    /// Most in flight at once.
    pub max_in_flight: u64,
    /// `--max-in-flight` held some request back.
    pub capped: bool,
    /// Token gap p99, seconds.
    pub token_gap_p99: Option<f64>,
    /// Output tokens by the second (from `start`) they arrived in; `None`:
    /// counted at each request's completion instead (sharded replays).
    pub token_arrivals: Option<&'a [u64]>,
    /// `--slo`, for goodput.
    pub slo: Option<&'a SloSpec>,
    /// Failed share above which the replay is an error.
    pub max_error_rate: f64,
}

/// Whether one completed request meets every per-request bound of `slo`
/// (`ttft`, `ttfo`, `e2e` from the scheduled time; `tpot` over its tokens
/// after the first). The token gap is judged per replay, not here.
pub fn meets(slo: &SloSpec, r: &ReplayRequest) -> bool {
    let Some(done) = r.completed_at else {
        return false;
    };
    let within = |m: Metric, v: Option<f64>| match (slo.request_bound(m), v) {
        (None, _) => true,
        (Some(b), Some(v)) => v <= b,
        (Some(_), None) => false,
    };
    let tpot = r
        .first_token
        .filter(|_| r.output_tokens > 1)
        .map(|f| (done - f) / (r.output_tokens - 1) as f64);
    within(Metric::Ttft, r.first_token.map(|t| t - r.scheduled))
        && within(Metric::Ttfo, r.first_answer.map(|t| t - r.scheduled))
        && within(Metric::E2e, Some(done - r.scheduled))
        && (slo.request_bound(Metric::Tpot).is_none() || r.output_tokens <= 1 || {
            within(Metric::Tpot, tpot)
        })
}

/// 1 s buckets from `start`: requests due and completed in each, and the
/// output tokens that arrived in each (`arrivals`, by second from `start`),
/// else those of the requests that completed in it.
pub fn buckets(start: f64, requests: &[ReplayRequest], arrivals: Option<&[u64]>) -> Vec<Bucket> {
    let index = |t: f64| ((t - start).max(0.0)).floor() as usize;
    let mut out: Vec<Bucket> = Vec::new();
    let grow = |out: &mut Vec<Bucket>, i: usize| {
        while out.len() <= i {
            let t = out.len() as f64;
            out.push(Bucket {
                t,
                ..Bucket::default()
            });
        }
    };
    for r in requests {
        let i = index(r.scheduled);
        grow(&mut out, i);
        out[i].scheduled += 1;
        if let Some(done) = r.completed_at {
            let i = index(done);
            grow(&mut out, i);
            out[i].completed += 1;
            if arrivals.is_none() {
                out[i].output_tokens += r.output_tokens;
            }
        }
    }
    for (i, &n) in arrivals.unwrap_or_default().iter().enumerate() {
        grow(&mut out, i);
        out[i].output_tokens = n;
    }
    out
}

/// The summary, its status and why.
pub fn assemble(i: &ReplayInputs<'_>) -> (ReplaySummary, CellStatus, String) {
    let rs = i.requests;
    let from_due = |f: fn(&ReplayRequest) -> Option<f64>| -> Vec<f64> {
        rs.iter()
            .filter_map(|r| Some(f(r)? - r.scheduled))
            .collect()
    };
    let completed: Vec<&ReplayRequest> = rs.iter().filter(|r| r.completed_at.is_some()).collect();
    let tokens: u64 = completed.iter().map(|r| r.output_tokens).sum();
    let mut reasons: Vec<String> = Vec::new();
    let failed = rs.iter().filter_map(|r| r.error.as_ref()).count() as u64;
    for e in rs.iter().filter_map(|r| r.error.as_ref()) {
        if reasons.len() < 3 && !reasons.contains(e) {
            reasons.push(e.clone());
        }
    }
    let last_end = rs
        .iter()
        .filter_map(|r| r.completed_at.or(r.first_token).or(Some(r.sent)))
        .fold(i.start, f64::max);
    let wall = last_end - i.start;
    let per_s = |n: f64| (wall > 0.0).then(|| n / wall);
    let good = i
        .slo
        .map(|s| completed.iter().filter(|r| meets(s, r)).count() as f64);
    let summary = ReplaySummary {
        scheduled: i.scheduled,
        sent: rs.len() as u64,
        completed: completed.len() as u64,
        errors: failed,
        error_reasons: reasons.clone(),
        skipped_too_long: i.skipped_too_long,
        not_sent: i.not_sent,
        wall_time: wall.max(0.0),
        output_tps: per_s(tokens as f64).unwrap_or(0.0),
        achieved_rate: per_s(completed.len() as f64),
        goodput: good.and_then(per_s),
        ttft: Distribution::of(from_due(|r| r.first_token)),
        ttfo: Distribution::of(from_due(|r| r.first_answer)),
        e2e: Distribution::of(from_due(|r| r.completed_at)),
        token_gap_p99: i.token_gap_p99,
        dispatch_lag: Distribution::of(
            rs.iter().map(|r| (r.sent - r.scheduled).max(0.0)).collect(),
        ),
        max_in_flight: i.max_in_flight,
        max_in_flight_capped: i.capped,
        buckets: buckets(i.start, rs, i.token_arrivals),
    };
    let sent = rs.len() as u64;
    let share = if sent + i.not_sent > 0 {
        (failed + i.not_sent) as f64 / (sent + i.not_sent) as f64
    } else {
        0.0
    };
    let (status, why) = if sent > 0 && share > i.max_error_rate {
        (
            CellStatus::Error,
            format!(
                "{failed} of {sent} requests failed, {} not sent: {}",
                i.not_sent,
                reasons.first().cloned().unwrap_or_default()
            ),
        )
    } else if tokens == 0 {
        (
            CellStatus::NoTokens,
            "no request completed with output tokens".to_string(),
        )
    } else {
        (CellStatus::Ok, String::new())
    };
    (summary, status, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(due: f64, lag: f64, wait: f64, dur: f64, tokens: u64) -> ReplayRequest {
        ReplayRequest {
            scheduled: due,
            sent: due + lag,
            first_token: Some(due + wait),
            first_answer: Some(due + wait),
            completed_at: Some(due + wait + dur),
            output_tokens: tokens,
            error: None,
        }
    }

    #[test]
    fn latencies_from_the_schedule_buckets_and_goodput() {
        // starts at run time 10; 4 requests 0.5 s apart
        let rs: Vec<ReplayRequest> = (0..4)
            .map(|k| {
                req(
                    10.0 + 0.5 * f64::from(k),
                    0.01,
                    0.2 + 0.1 * f64::from(k),
                    1.0,
                    10,
                )
            })
            .collect();
        let slo = SloSpec::parse("ttft_p99=0.35").unwrap();
        let (s, status, _) = assemble(&ReplayInputs {
            start: 10.0,
            requests: &rs,
            scheduled: 5,
            skipped_too_long: 1,
            slo: Some(&slo),
            ..ReplayInputs::default()
        });
        assert_eq!(status, CellStatus::Ok);
        assert_eq!(
            (s.scheduled, s.sent, s.completed, s.skipped_too_long),
            (5, 4, 4, 1)
        );
        // last end: 11.5 + 0.5 + 1.0 = 13.0 → 3 s of wall time
        assert!((s.wall_time - 3.0).abs() < 1e-9);
        assert!((s.output_tps - 40.0 / 3.0).abs() < 1e-9);
        // TTFTs 0.2, 0.3, 0.4, 0.5: two meet 0.35
        assert!((s.goodput.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        assert!((s.ttft.p50.unwrap() - 0.35).abs() < 1e-9);
        assert_eq!(s.ttft.max, Some(0.5));
        assert!((s.dispatch_lag.p99.unwrap() - 0.01).abs() < 1e-9);
        // due at 0, 0.5 | 1, 1.5; done at 1.2, 1.8 | 2.4, 3.0
        let b = &s.buckets;
        assert_eq!(b.len(), 4);
        assert_eq!((b[0].scheduled, b[1].scheduled, b[0].completed), (2, 2, 0));
        assert_eq!((b[1].completed, b[2].completed, b[3].completed), (2, 1, 1));
        assert_eq!(b[1].output_tokens, 20);
    }

    /// One request streaming 10 tokens a second for 4 s: its tokens belong
    /// to the seconds they arrived in, not all to the second it ended in.
    #[test]
    fn throughput_over_time_counts_tokens_by_arrival() {
        let rs = [req(0.0, 0.0, 0.1, 4.0, 40)];
        let by_completion = buckets(0.0, &rs, None);
        assert_eq!(by_completion[4].output_tokens, 40);
        let arrivals = [10, 10, 10, 10];
        let (s, _, _) = assemble(&ReplayInputs {
            requests: &rs,
            scheduled: 1,
            token_arrivals: Some(&arrivals),
            ..ReplayInputs::default()
        });
        let tokens: Vec<u64> = s.buckets.iter().map(|b| b.output_tokens).collect();
        assert_eq!(tokens, [10, 10, 10, 10, 0]);
        assert_eq!(s.buckets[4].completed, 1);
    }

    #[test]
    fn failures_make_an_error_and_nothing_is_no_tokens() {
        let mut rs = vec![req(0.0, 0.0, 0.1, 0.1, 3), req(1.0, 0.0, 0.1, 0.1, 3)];
        rs[1].completed_at = None;
        rs[1].error = Some("HTTP 500".into());
        let (s, status, why) = assemble(&ReplayInputs {
            requests: &rs,
            scheduled: 2,
            ..ReplayInputs::default()
        });
        assert_eq!((status, s.errors), (CellStatus::Error, 1));
        assert!(why.contains("HTTP 500"), "{why}");
        let (_, status, _) = assemble(&ReplayInputs::default());
        assert_eq!(status, CellStatus::NoTokens);
    }

    #[test]
    fn hit_rates_more_than_ten_points_apart_are_flagged() {
        let c = super::super::PrefixCacheCheck {
            prefix_cache_intended: Some(0.6),
            server_prefix_cache_hit_rate: Some(0.45),
            ..Default::default()
        };
        assert!(c.clone().judge().differs);
        let close = super::super::PrefixCacheCheck {
            server_prefix_cache_hit_rate: Some(0.55),
            ..c
        };
        assert!(!close.judge().differs);
    }
}
