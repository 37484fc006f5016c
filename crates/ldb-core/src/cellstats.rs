//! Cell-level statistics: latency distributions and scheduler flags.

use crate::result::{Dist, LatencyStats, RequestSample, SchedulerFields};
use crate::stats::{summarize, summarize_measured};

/// Which requests and gaps a latency statistic covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyScope {
    /// The measurement window: first-token times of requests whose first
    /// token arrived inside it (`None` when there is none), and inter-token
    /// latency from token gaps inside it. Ramp-up values stay out.
    Window,
    /// Every request as a whole (burst cells, and the all-samples view).
    All,
}

/// Latency statistics over `samples` (only those with output tokens count).
pub fn latency_stats<'a>(
    samples: impl IntoIterator<Item = &'a RequestSample>,
    scope: LatencyScope,
) -> LatencyStats {
    let generated: Vec<&RequestSample> = samples
        .into_iter()
        .filter(|s| s.output_tokens > 0)
        .collect();
    let completed: Vec<&RequestSample> =
        generated.iter().copied().filter(|s| s.completed).collect();
    let seq = if completed.is_empty() {
        &generated
    } else {
        &completed
    };
    let started: Vec<&RequestSample> = match scope {
        LatencyScope::Window => generated
            .iter()
            .copied()
            .filter(|s| s.first_token_in_window)
            .collect(),
        LatencyScope::All => generated.clone(),
    };
    let g = |f: fn(&RequestSample) -> f64| summarize(generated.iter().map(|s| f(s))).into();
    let c = |f: fn(&RequestSample) -> f64| summarize(completed.iter().map(|s| f(s))).into();
    let first = |f: fn(&RequestSample) -> f64| -> Option<Dist> {
        (scope == LatencyScope::All || !started.is_empty())
            .then(|| summarize(started.iter().map(|s| f(s))).into())
    };
    // Time to second token: over the started requests that had a second
    // token chunk, true zeros (one read) included; `None` when none had.
    let ttst: Vec<f64> = started
        .iter()
        .filter_map(|s| s.time_to_second_token)
        .collect();
    let time_to_second_token = (!ttst.is_empty()).then(|| summarize_measured(ttst).into());
    let itl: fn(&RequestSample) -> f64 = match scope {
        LatencyScope::Window => |s| s.window_inter_token_latency_avg,
        LatencyScope::All => |s| s.inter_token_latency_avg,
    };
    let inputs: Vec<f64> = seq.iter().map(|s| s.input_tokens as f64).collect();
    // Over the started requests that streamed a call; `None` when none did.
    let ttftc: Vec<f64> = started.iter().filter_map(|s| s.ttftc).collect();
    LatencyStats {
        ttft: first(|s| s.ttft),
        time_to_second_token,
        ttfo: first(|s| s.ttfo),
        ttftc: (!ttftc.is_empty()).then(|| summarize_measured(ttftc).into()),
        request_latency: c(|s| s.latency),
        inter_token_latency: summarize(generated.iter().map(|s| itl(s))).into(),
        output_tps_per_user: summarize(generated.iter().map(|s| {
            let v = itl(s);
            if v > 0.0 { 1.0 / v } else { 0.0 }
        }))
        .into(),
        e2e_output_tps_per_user: c(|s| s.e2e_output_tps_per_user),
        chunk_inter_token_latency: g(|s| s.chunk_inter_token_latency_avg),
        input_seq_len_avg: summarize(inputs).avg,
        output_seq_len: summarize(seq.iter().map(|s| s.output_tokens as f64)).into(),
        request_count: generated.len() as u64,
        completed_request_count: completed.len() as u64,
    }
}

/// One scheduler scrape inside the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchedSample {
    /// Running requests.
    pub running: f64,
    /// Waiting requests.
    pub waiting: f64,
}

/// Share of scrapes with a queue above which a mean below 0.95·C counts as a
/// capacity limit.
const REPEATED_QUEUE_SHARE: f64 = 0.2;

/// Scheduler fields from the window's scrapes.
///
/// `capacity_limited` when readiness timed out or plateaued, or (C > 1 with
/// samples) max running < C, or mean running < 0.95·C while requests queued
/// in at least a fifth of the scrapes, or a queue persisted
/// (mean ≥ 0.5 requests or non-empty in more than half of the scrapes). A
/// request that restarts sits in the queue for a moment; that alone is not a
/// capacity limit (the reference flagged any queue sample).
/// `underfilled` when C > 1 and mean running < 0.98·C. Without samples the
/// effective concurrency is the number of streams that produced in the window.
pub fn scheduler_fields(
    concurrency: u32,
    samples: &[SchedSample],
    readiness_failed: bool,
    streams_in_window: f64,
) -> SchedulerFields {
    let equal = vec![1.0; samples.len()];
    fields(
        concurrency,
        samples,
        &equal,
        readiness_failed,
        streams_in_window,
        1,
    )
}

/// [`scheduler_fields`] for a sustained window read by a few scrapes: each
/// sample weighted by the share of the window it stands for
/// ([`crate::gauge_mean::reading_weights`]; means and the queue share are
/// shares of time), and a queue counts towards the verdict only when at
/// least two readings saw one: with two to four reads a window, one read
/// that caught a restarting request's moment in the queue is no evidence
/// of a limit (`max_running < C` still is). `confirming_queue_reads`:
/// reads taken after the window to confirm a lone reading's queue that saw
/// one too; they count towards the two readings but enter no mean.
pub fn scheduler_fields_timed(
    concurrency: u32,
    samples: &[SchedSample],
    weights: &[f64],
    readiness_failed: bool,
    streams_in_window: f64,
    confirming_queue_reads: usize,
) -> SchedulerFields {
    fields(
        concurrency,
        samples,
        weights,
        readiness_failed,
        streams_in_window,
        2_usize.saturating_sub(confirming_queue_reads),
    )
}

fn fields(
    concurrency: u32,
    samples: &[SchedSample],
    weights: &[f64],
    readiness_failed: bool,
    streams_in_window: f64,
    min_queue_reads: usize,
) -> SchedulerFields {
    use crate::gauge_mean::weighted_mean;
    let c = f64::from(concurrency);
    let has = !samples.is_empty() && samples.iter().any(|s| s.running > 0.0 || s.waiting > 0.0);
    let of = |f: fn(&SchedSample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
    let (avg_run, max_run, avg_q, max_q, qfrac) = if samples.is_empty() {
        (0.0, 0.0, 0.0, 0.0, 0.0)
    } else {
        (
            weighted_mean(&of(|s| s.running), weights),
            samples.iter().map(|s| s.running).fold(0.0, f64::max),
            weighted_mean(&of(|s| s.waiting), weights),
            samples.iter().map(|s| s.waiting).fold(0.0, f64::max),
            weighted_mean(&of(|s| f64::from(u8::from(s.waiting > 0.0))), weights),
        )
    };
    let queue_reads = samples.iter().filter(|s| s.waiting > 0.0).count();
    let (avg_q_v, qfrac_v) = if queue_reads > 0 && queue_reads >= min_queue_reads {
        (avg_q, qfrac)
    } else {
        (0.0, 0.0)
    };
    let effective = if has {
        avg_run
    } else {
        streams_in_window.min(c)
    };
    let underfilled = concurrency > 1 && (has || streams_in_window > 0.0) && effective < 0.98 * c;
    // A mean below C is the client's own gap between a finished request and
    // its replacement unless requests also queued repeatedly: a replacement
    // waits for the next engine step, so short requests put one in the queue
    // of an occasional scrape on a server with room to spare (`underfilled`
    // still reports the gap).
    let queued_repeatedly = qfrac_v >= REPEATED_QUEUE_SHARE;
    let capacity_limited = readiness_failed
        || (concurrency > 1 && has && (max_run < c || (avg_run < 0.95 * c && queued_repeatedly)))
        || avg_q_v >= 0.5
        || qfrac_v > 0.5;
    SchedulerFields {
        avg_running_reqs: avg_run,
        max_running_reqs: max_run.round() as u64,
        effective_concurrency: effective,
        avg_queue_reqs: avg_q,
        max_queue_reqs: max_q.round() as u64,
        queue_fraction: qfrac,
        underfilled,
        capacity_limited,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(r: f64, w: f64) -> SchedSample {
        SchedSample {
            running: r,
            waiting: w,
        }
    }

    /// Issue 24 item 8: four reads of a window at `--metrics-interval 10`,
    /// one of which caught two restarting requests in the queue. Unweighted,
    /// the mean queue is 0.5 and the cell was capacity-limited; one read is
    /// not evidence enough. Two reads with a queue are.
    #[test]
    fn one_read_with_a_queue_in_a_sparse_window_is_not_a_limit() {
        let samples = [s(8.0, 0.0), s(8.0, 2.0), s(8.0, 0.0), s(8.0, 0.0)];
        assert!(scheduler_fields(8, &samples, false, 8.0).capacity_limited);
        let w = crate::gauge_mean::reading_weights(&[0.0, 10.0, 20.0, 30.0], 0.0, 30.0);
        let f = scheduler_fields_timed(8, &samples, &w, false, 8.0, 0);
        assert!(!f.capacity_limited, "{f:?}");
        assert!(
            (f.avg_queue_reqs - 2.0 * 10.0 / 30.0).abs() < 1e-9,
            "time-weighted"
        );
        let twice = [s(8.0, 0.0), s(8.0, 2.0), s(8.0, 2.0), s(8.0, 0.0)];
        assert!(scheduler_fields_timed(8, &twice, &w, false, 8.0, 0).capacity_limited);
        // Fewer running than C is a limit on any number of reads.
        let short = [s(6.0, 0.0), s(6.0, 0.0)];
        let w2 = crate::gauge_mean::reading_weights(&[0.0, 30.0], 0.0, 30.0);
        assert!(scheduler_fields_timed(8, &short, &w2, false, 8.0, 0).capacity_limited);
    }

    /// Issue 24 item 8: while the verdict rests on one reading, a read taken
    /// after the window decides it: it counts as the second reading when it
    /// saw a queue too, and changes no mean (the queue share stays the lone
    /// reading's share of the window).
    #[test]
    fn a_confirming_read_makes_a_lone_queue_reading_count() {
        let samples = [s(8.0, 0.0), s(8.0, 3.0), s(8.0, 0.0)];
        let w = crate::gauge_mean::reading_weights(&[0.0, 15.0, 30.0], 0.0, 30.0);
        let alone = scheduler_fields_timed(8, &samples, &w, false, 8.0, 0);
        assert!(!alone.capacity_limited, "{alone:?}");
        let confirmed = scheduler_fields_timed(8, &samples, &w, false, 8.0, 1);
        assert!(confirmed.capacity_limited, "{confirmed:?}");
        assert_eq!(confirmed.avg_queue_reqs, alone.avg_queue_reqs);
        assert!((confirmed.queue_fraction - 0.5).abs() < 1e-9);
        // A confirmation without any queue reading in the window adds nothing.
        let none = [s(8.0, 0.0), s(8.0, 0.0)];
        let w2 = crate::gauge_mean::reading_weights(&[0.0, 30.0], 0.0, 30.0);
        assert!(!scheduler_fields_timed(8, &none, &w2, false, 8.0, 1).capacity_limited);
    }

    #[test]
    fn restart_gaps_with_an_occasional_queued_replacement_are_not_a_limit() {
        // Short requests: the mean dips to 3.7 of 4 and one scrape in ten
        // catches a replacement waiting for the next engine step.
        let mut v = vec![s(4.0, 0.0); 7];
        v.extend([s(3.0, 1.0), s(3.0, 0.0), s(3.0, 0.0)]);
        let f = scheduler_fields(4, &v, false, 4.0);
        assert!((f.avg_running_reqs - 3.7).abs() < 1e-9, "{f:?}");
        assert!(!f.capacity_limited, "{f:?}");
        assert!(f.underfilled);
        // The same dip with requests waiting in a third of the scrapes is a limit.
        let w = vec![s(4.0, 0.0), s(3.0, 1.0), s(3.5, 1.0)];
        assert!(scheduler_fields(4, &w, false, 4.0).capacity_limited);
    }

    #[test]
    fn seed_like_capped_server_is_capacity_limited() {
        let f = scheduler_fields(4, &[s(1.0, 3.0), s(1.0, 3.0)], false, 1.0);
        assert!(f.capacity_limited && f.underfilled);
        assert_eq!(f.effective_concurrency, 1.0);
        assert_eq!(f.queue_fraction, 1.0);
        let ok = scheduler_fields(4, &[s(4.0, 0.0), s(4.0, 0.0)], false, 4.0);
        assert!(!ok.capacity_limited && !ok.underfilled);
        let c1 = scheduler_fields(1, &[], false, 1.0);
        assert!(!c1.capacity_limited);
        let churn = scheduler_fields(
            16,
            &[s(16.0, 0.0), s(15.0, 1.0), s(16.0, 0.0), s(16.0, 0.0)],
            false,
            16.0,
        );
        assert!(!churn.capacity_limited, "{churn:?}");
        let queued = scheduler_fields(2, &[s(2.0, 1.0), s(2.0, 1.0)], false, 2.0);
        assert!(queued.capacity_limited);
        // Short requests: one of two streams often between requests, nothing queued.
        let gaps = scheduler_fields(
            2,
            &[s(2.0, 0.0), s(1.0, 0.0), s(2.0, 0.0), s(2.0, 0.0)],
            false,
            2.0,
        );
        assert!(!gaps.capacity_limited && gaps.underfilled, "{gaps:?}");
        let dip_with_queue = scheduler_fields(
            4,
            &[s(4.0, 0.0), s(3.0, 1.0), s(3.0, 0.0), s(3.0, 0.0)],
            false,
            4.0,
        );
        assert!(dip_with_queue.capacity_limited);
        assert_eq!(c1.effective_concurrency, 1.0);
    }

    #[test]
    fn latency_stats_split_generated_and_completed() {
        let a = RequestSample {
            ttft: 1.0,
            output_tokens: 10,
            completed: true,
            latency: 5.0,
            input_tokens: 100,
            ..Default::default()
        };
        let b = RequestSample {
            ttft: 3.0,
            output_tokens: 4,
            completed: false,
            ..Default::default()
        };
        let z = RequestSample::default();
        let st = latency_stats([&a, &b, &z], LatencyScope::All);
        assert_eq!(st.request_count, 2);
        assert_eq!(st.completed_request_count, 1);
        assert_eq!(st.ttft.map(|d| d.avg), Some(2.0));
        assert_eq!(st.request_latency.avg, 5.0);
        assert_eq!(st.output_seq_len.avg, 10.0);
        assert_eq!(st.input_seq_len_avg, 100.0);
    }

    #[test]
    fn time_to_second_token_keeps_true_zeros_and_skips_the_unmeasured() {
        let req = |tts: Option<f64>| RequestSample {
            ttft: 1.0,
            time_to_second_token: tts,
            output_tokens: 5,
            first_token_in_window: true,
            ..Default::default()
        };
        // Two chunks in one read (0), one real gap, one one-chunk request.
        let (a, b, c) = (req(Some(0.0)), req(Some(0.2)), req(None));
        for scope in [LatencyScope::Window, LatencyScope::All] {
            let st = latency_stats([&a, &b, &c], scope);
            let d = st.time_to_second_token.expect("measured");
            assert!((d.avg - 0.1).abs() < 1e-12, "{scope:?}: {d:?}");
            assert_eq!(d.p50, 0.1);
        }
        // Nobody had a second chunk: not measured, not 0.
        let st = latency_stats([&c], LatencyScope::All);
        assert_eq!(st.time_to_second_token, None);
    }
}
