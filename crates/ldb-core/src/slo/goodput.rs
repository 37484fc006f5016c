//! Goodput: the cell's tok/s delivered by requests that met every
//! per-request target.
//!
//! Per request, TTFT, TTFO, TPOT and end-to-end latency can be judged: the
//! result keeps no per-request token-gap percentiles, so a `token_gap_*`
//! target is judged on the cell alone and does not enter goodput.

use super::spec::{Metric, SloSpec};
use crate::result::{CellResult, DecodeMode, RequestSample};

/// A request's value against a bound. Without a value, the request meets
/// the bound only while the metric cannot apply to it yet: it was still
/// running when it was cut and had not waited longer than the bound.
fn within(value: Option<f64>, bound: f64, running_for: Option<f64>) -> bool {
    match value {
        Some(v) => v <= bound,
        None => running_for.is_some_and(|e| e <= bound),
    }
}

/// Whether one request met every per-request target of `spec`.
///
/// `cut_at` is the time (relative to the window start) at which requests
/// still running were cut: the window end of a sustained cell, `None` for a
/// finite batch, where every request runs to its end. In a sustained cell,
/// TTFT and TTFO are judged only on requests whose first token arrived in
/// the window, as the cell's own statistics are.
pub fn request_meets(spec: &SloSpec, s: &RequestSample, cut_at: Option<f64>) -> bool {
    if !s.error.is_empty() {
        return false;
    }
    // A request cut by the benchmark has run at least until its last token
    // and until the cut: a lower bound on any latency it never reached.
    let running_for = (!s.completed).then(|| {
        let last = [s.end_s, s.first_token_s, cut_at]
            .into_iter()
            .flatten()
            .fold(s.start_s, f64::max);
        last - s.start_s
    });
    let check = |metric: Metric, value: Option<f64>| {
        spec.request_bound(metric)
            .is_none_or(|bound| within(value, bound, running_for))
    };
    // In a sustained window, a first token from before the window is a
    // ramp-up (launch burst) value that the cell's own TTFT/TTFO leave out
    // too: those targets do not apply to that request.
    let first_judged = cut_at.is_none() || s.first_token_in_window;
    (!first_judged
        || (check(Metric::Ttft, s.first_token_s.map(|_| s.ttft))
            && check(Metric::Ttfo, (s.ttfo > 0.0).then_some(s.ttfo))))
        && check(Metric::E2e, s.completed.then_some(s.latency))
        // A request with fewer than two tokens has no time per output
        // token: the target does not apply to it.
        && spec
            .request_bound(Metric::Tpot)
            .is_none_or(|b| s.inter_token_latency_avg <= 0.0 || s.inter_token_latency_avg <= b)
}

/// The request's share of the window's tokens, estimated: its output
/// tokens times the part of its token span (first → last token) inside
/// `[0, window]`, the tokens taken as evenly spread over the span. Without
/// a window (finite batches) all its tokens count.
fn window_tokens(s: &RequestSample, window: Option<f64>) -> f64 {
    let tokens = s.output_tokens as f64;
    let (Some(w), Some(first)) = (window, s.first_token_s) else {
        return if s.first_token_s.is_some() {
            tokens
        } else {
            0.0
        };
    };
    let last = s.end_s.unwrap_or(first).max(first);
    let span = last - first;
    if span <= 0.0 {
        return if (0.0..=w).contains(&first) {
            tokens
        } else {
            0.0
        };
    }
    let inside = (last.min(w) - first.max(0.0)).max(0.0);
    tokens * inside / span
}

/// Goodput of a cell, tok/s: `aggregate_tps` × the share of the window's
/// tokens that came from requests meeting every per-request target. `None`
/// when the cell has no `aggregate_tps` or no request with tokens.
///
/// Computed only from values as the result file holds them, so that
/// `report --slo` on the saved file gives the run's own goodput to the last
/// bit: the window is read at the 6 decimals it is written with (in memory
/// it has more), and the share is taken before it scales the rate, so a cell
/// whose every request met the targets has exactly its `aggregate_tps`.
pub fn goodput(spec: &SloSpec, c: &CellResult) -> Option<f64> {
    let tps = c.aggregate_tps?;
    let window =
        (c.benchmark_mode == DecodeMode::Duration).then(|| c.measurement_seconds_as_written());
    let (mut good, mut all) = (0.0, 0.0);
    for s in c.request_samples.iter().filter(|s| s.in_window) {
        let w = window_tokens(s, window);
        all += w;
        if request_meets(spec, s, window) {
            good += w;
        }
    }
    (all > 0.0).then(|| tps * (good / all))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ttft: f64, tokens: u64) -> RequestSample {
        RequestSample {
            ttft,
            ttfo: ttft,
            output_tokens: tokens,
            completed: true,
            latency: ttft + 10.0,
            start_s: 0.0,
            first_token_s: Some(ttft),
            end_s: Some(ttft + 10.0),
            in_window: true,
            first_token_in_window: true,
            ..RequestSample::default()
        }
    }

    fn batch(samples: Vec<RequestSample>) -> CellResult {
        CellResult {
            benchmark_mode: DecodeMode::BurstE2e,
            aggregate_tps: Some(200.0),
            request_samples: samples,
            ..CellResult::default()
        }
    }

    fn spec(s: &str) -> SloSpec {
        SloSpec::parse(s).unwrap()
    }

    #[test]
    fn goodput_is_the_token_share_of_requests_meeting_ttft() {
        // 4 requests, 100 tokens each; 2 meet TTFT ≤ 1 s (one exactly at it).
        let c = batch(vec![
            sample(0.5, 100),
            sample(1.0, 100),
            sample(1.5, 100),
            sample(3.0, 100),
        ]);
        assert_eq!(goodput(&spec("ttft_p99=1"), &c), Some(100.0));
        // Unequal lengths weigh by tokens: 300 of 400 tokens are good.
        let c = batch(vec![sample(0.5, 300), sample(2.0, 100)]);
        assert_eq!(goodput(&spec("ttft_p90=1"), &c), Some(150.0));
    }

    #[test]
    fn every_per_request_target_must_be_met() {
        let mut slow_end = sample(0.5, 100);
        slow_end.latency = 40.0;
        let c = batch(vec![sample(0.5, 100), slow_end]);
        assert_eq!(goodput(&spec("ttft_p99=1,e2e_p99=30"), &c), Some(100.0));
        // A token-gap target is judged per cell only: it leaves goodput alone.
        assert_eq!(goodput(&spec("token_gap_p99=0.001"), &c), Some(200.0));
    }

    #[test]
    fn failed_requests_and_missing_answers_do_not_count() {
        let mut failed = sample(0.5, 100);
        failed.error = "HTTP 500".into();
        let mut no_answer = sample(0.5, 100);
        no_answer.ttfo = 0.0; // completed, reasoning only
        let c = batch(vec![sample(0.5, 100), failed, no_answer]);
        let g = goodput(&spec("ttfo_p99=1"), &c).unwrap();
        assert!((g - 200.0 / 3.0).abs() < 1e-9, "{g}");
    }

    /// Issue 35: `report --slo` on the saved file gave 461.7872601387836
    /// where the run wrote 461.78726013878367 — the file holds the window
    /// at 6 decimals, and `tps · good / all` is not `tps` even when every
    /// request met the targets. Judged in memory and from the file, the
    /// goodput must be the same bits, whether all requests met or not.
    #[test]
    fn goodput_from_the_saved_cell_is_the_runs_own_to_the_last_bit() {
        let req = |first: f64, last: f64, e2e_ok: bool| RequestSample {
            ttft: 0.1,
            ttfo: 0.1,
            output_tokens: 37,
            completed: e2e_ok,
            latency: if e2e_ok { 1.0 } else { 0.0 },
            start_s: first - 0.1,
            first_token_s: Some(first),
            end_s: Some(last),
            in_window: true,
            first_token_in_window: true,
            ..RequestSample::default()
        };
        for i in 0..200u32 {
            let window = 10.0 + f64::from(i) * 1.234_567_891e-7;
            let mut c = CellResult {
                benchmark_mode: DecodeMode::Duration,
                measurement_seconds: window,
                aggregate_tps: Some(461.787_260_138_783_6 + f64::from(i) * 0.013),
                request_samples: vec![
                    req(0.3, 10.7, false),
                    req(1.1, 9.2, true),
                    req(2.0, 10.000_000_3, false),
                ],
                ..CellResult::default()
            };
            let back = |c: &CellResult| -> CellResult {
                serde_json::from_value(c.to_json()).expect("reads back")
            };
            for s in ["e2e_p99=600", "e2e_p99=0.5"] {
                let live = goodput(&spec(s), &c);
                assert_eq!(live, goodput(&spec(s), &back(&c)), "{s} at {window}");
            }
            // Every request meets a loose spec: goodput is exactly the rate.
            c.request_samples
                .iter_mut()
                .for_each(|r| r.completed = true);
            assert_eq!(goodput(&spec("e2e_p99=600"), &c), c.aggregate_tps);
        }
    }

    /// A sustained window of 10 s: requests cut at its end have no e2e
    /// latency, and only the part of a request inside the window counts.
    #[test]
    fn sustained_cells_weigh_window_tokens_and_judge_cut_requests_by_their_age() {
        let cut = |start: f64, first: f64, last: f64, tokens: u64| RequestSample {
            ttft: first - start,
            ttfo: first - start,
            output_tokens: tokens,
            completed: false,
            start_s: start,
            first_token_s: Some(first),
            end_s: Some(last),
            in_window: true,
            ..RequestSample::default()
        };
        let c = CellResult {
            benchmark_mode: DecodeMode::Duration,
            measurement_seconds: 10.0,
            aggregate_tps: Some(30.0),
            request_samples: vec![
                // Started 5 s before the window; half its span is inside: 50 tokens.
                cut(-5.5, -5.0, 5.0, 100),
                // Whole span inside, cut at 10 s after running 9 s: e2e not reached yet.
                RequestSample {
                    first_token_in_window: true,
                    ..cut(1.0, 2.0, 9.9, 100)
                },
                // Cut after running 40 s: longer than the e2e bound, fails it.
                cut(-30.0, -29.0, 9.9, 100),
                // Produced tokens only before the window: not counted.
                RequestSample {
                    in_window: false,
                    ..sample(0.1, 1000)
                },
            ],
            ..CellResult::default()
        };
        // Window tokens 50 + 100 + ~25.6; good 150.
        let all = 50.0 + 100.0 + 100.0 * 9.9 / 38.9;
        let g = goodput(&spec("e2e_p99=20"), &c).unwrap();
        assert!((g - 30.0 * 150.0 / all).abs() < 1e-9, "{g}");
        // TTFT: only the request whose first token came inside the window
        // (1 s, over the 0.5 s bound) is judged; the two from ramp-up are not.
        let g = goodput(&spec("ttft_p99=0.5"), &c).unwrap();
        assert!(
            (g - 30.0 * (50.0 + 100.0 * 9.9 / 38.9) / all).abs() < 1e-9,
            "{g}"
        );
        assert!(request_meets(
            &spec("e2e_p99=20"),
            &c.request_samples[1],
            Some(10.0)
        ));
        assert!(!request_meets(
            &spec("e2e_p99=8"),
            &c.request_samples[1],
            Some(10.0)
        ));
    }

    #[test]
    fn no_tokens_per_second_or_no_samples_give_no_goodput() {
        let mut c = batch(vec![sample(0.5, 100)]);
        c.aggregate_tps = None;
        assert_eq!(goodput(&spec("ttft_p99=1"), &c), None);
        assert_eq!(goodput(&spec("ttft_p99=1"), &batch(vec![])), None);
    }
}
