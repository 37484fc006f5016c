//! `assemble` with fixed inputs: streams built chunk by chunk on a made-up
//! clock, scrapes with set counter values, no server and no wall clock.

use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::chunk::Channel;
use ldb_core::engine::{Engine, ServerSnapshot};
use ldb_core::failure::{FailureKind, RequestError};
use ldb_core::gaps::GapStats;
use ldb_core::result::CellStatus;
use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};

use super::{CellInputs, assemble};

const START: f64 = 10.0;
const END: f64 = 20.0;

/// What a stream saw of the window at time `t`: closed before it opened,
/// open inside it, closed with both bounds after it.
fn bounds_at(t: f64) -> WindowBounds {
    if t < START {
        WindowBounds::default()
    } else if t <= END {
        WindowBounds {
            start: Some(START),
            end: None,
        }
    } else {
        final_bounds()
    }
}

fn final_bounds() -> WindowBounds {
    WindowBounds {
        start: Some(START),
        end: Some(END),
    }
}

/// A request sent at `sent`, a token every `step` seconds from `first` with
/// continuous usage, `n` tokens, prompt of 100 tokens. `done` = it finished
/// (last token then `[DONE]`); otherwise it was cut at the window's end.
fn request(sent: f64, first: f64, step: f64, n: u64, done: bool) -> StreamOutcome {
    let mut track = RequestTrack::new(sent);
    let role = ChunkEvent {
        t: first - step / 2.0,
        in_stream: true,
        channel: Channel::None,
        completion_tokens: Some(0),
        prompt_tokens: Some(100),
        ..ChunkEvent::default()
    };
    track.on_chunk(role, bounds_at(role.t));
    let mut last = first;
    for k in 0..n {
        let t = first + step * k as f64;
        if !done && t > END {
            break;
        }
        let ev = ChunkEvent {
            t,
            in_stream: true,
            channel: Channel::Content,
            completion_tokens: Some(k + 1),
            prompt_tokens: Some(100),
            ..ChunkEvent::default()
        };
        track.on_chunk(ev, bounds_at(t));
        last = t;
    }
    track.settle(final_bounds());
    if done {
        track.set_finish_reason("length");
        track.mark_completed();
    }
    StreamOutcome {
        track,
        request_id: None,
        cancelled: !done,
        timings: None,
        done_at: done.then_some(last),
        cached_tokens: None,
    }
}

fn scrape(t: f64, gen_tokens: f64, running: f64) -> Scrape {
    Scrape {
        seq: 0,
        t,
        sent: t - 0.01,
        snap: ServerSnapshot {
            running: Some(running),
            waiting: Some(0.0),
            gen_tokens: Some(gen_tokens),
            gen_tokens_source: Some("vllm:generation_tokens_total"),
            kv_usage: Some(0.25),
            ..ServerSnapshot::default()
        },
        parts: Vec::new(),
    }
}

/// Two streams over the window [10, 20]: A decodes at 10 tok/s throughout
/// (100 tokens inside); B finishes a request at 11.95 (20 tokens inside) and
/// starts another whose first token comes at 12.55 (75 tokens inside).
fn two_streams() -> Vec<StreamOutcome> {
    vec![
        request(5.0, 6.05, 0.1, 10_000, false),
        request(4.0, 5.05, 0.1, 70, true),
        request(12.0, 12.55, 0.1, 10_000, false),
    ]
}

fn inputs<'a>(
    outcomes: &'a [StreamOutcome],
    start: &'a Scrape,
    end: &'a Scrape,
    sched: &'a [Scrape],
) -> CellInputs<'a> {
    CellInputs {
        concurrency: 2,
        context: 0,
        engine: Engine::Vllm,
        outcomes,
        window_start: START,
        window_end: END,
        start_scrape: Some(start),
        end_scrape: Some(end),
        sched,
        confirm_scrape: None,
        producing_samples: &[2.0, 2.0, 2.0],
        readiness_failed: false,
        accept_len_ref: 0.0,
        hw: None,
        gaps: GapStats::default(),
        ignore_eos: true,
        max_error_rate: 0.02,
    }
}

#[test]
fn window_tokens_over_the_whole_window_and_the_server_agrees() {
    let outcomes = two_streams();
    let (a, b) = (scrape(10.05, 1000.0, 2.0), scrape(20.05, 1195.0, 2.0));
    let sched = [scrape(12.0, 1040.0, 2.0), scrape(15.0, 1100.0, 2.0)];
    let cell = assemble(inputs(&outcomes, &a, &b, &sched));
    assert_eq!(cell.client_output_tokens, 195);
    assert_eq!(cell.aggregate_tps, Some(19.5));
    assert_eq!(cell.ext.status, CellStatus::Ok);
    assert_eq!(cell.aggregate_source, "openai_continuous_usage");
    assert_eq!(cell.ext.usage_mode, "continuous");
    assert_eq!(cell.server_output_tokens, 195);
    assert!((cell.server_gen_throughput - 19.5).abs() < 1e-9);
    assert_eq!(cell.ext.server_client_mismatch, None);
    assert_eq!(cell.sched.effective_concurrency, 2.0);
    assert_eq!(cell.per_request_avg_tps, Some(9.75));
    // The last token inside the window came at 19.95.
    assert!((cell.ext.measurement_active_seconds - 9.95).abs() < 1e-9);
    // Only B's second request had its first token inside the window.
    let ttft = cell.latency.ttft.expect("a first token in the window");
    assert!((ttft.p50 - 0.55).abs() < 1e-9, "{ttft:?}");
    assert_eq!(cell.ext.server_utilization_max, 0.25);
    assert_eq!(cell.num_errors, 0);
    assert_eq!(cell.ext.early_stop_requests, 0);
}

#[test]
fn a_server_that_generated_more_than_arrived_is_flagged() {
    let outcomes = two_streams();
    let (a, b) = (scrape(10.05, 1000.0, 2.0), scrape(20.05, 1300.0, 2.0));
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    let m = cell.ext.server_client_mismatch.expect("mismatch");
    assert_eq!(m.client_tps, 19.5);
    assert!((m.server_tps - 30.0).abs() < 1e-9);
    assert!((m.difference_pct - -35.0).abs() < 1e-9, "{m:?}");
}

/// A start scrape answered 2 s late (sent at the window's opening, as by
/// a CPU-bound server): the counter was read somewhere in between, here at
/// 11.0, so it holds the tokens of [11, 20] only. Timed by its arrival, the
/// server would seem 12 % faster than the client; timed by the middle of
/// its span it agrees, and the bounds hold the client's rate.
#[test]
fn a_slow_start_scrape_widens_the_server_rate_instead_of_raising_an_alarm() {
    let outcomes = two_streams();
    let mut a = scrape(12.0, 1000.0, 2.0);
    a.sent = 10.0;
    let b = scrape(20.06, 1176.0, 2.0);
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    assert_eq!(cell.aggregate_tps, Some(19.5));
    let mid = 176.0 / (20.055 - 11.0);
    assert!(
        (cell.server_gen_throughput - mid).abs() < 1e-9,
        "{}",
        cell.server_gen_throughput
    );
    let low = cell.ext.server_gen_throughput_low.expect("low bound");
    let high = cell.ext.server_gen_throughput_high.expect("high bound");
    assert!((low - 176.0 / (20.06 - 10.0)).abs() < 1e-9, "{low}");
    assert!((high - 176.0 / (20.05 - 12.0)).abs() < 1e-9, "{high}");
    assert_eq!(cell.ext.server_client_mismatch, None);
    // The same slow scrape with a server that really generated far more
    // than arrived: even its lowest rate is above the client's.
    let b = scrape(20.06, 1300.0, 2.0);
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    let m = cell.ext.server_client_mismatch.expect("mismatch");
    assert!(
        (m.server_tps - 300.0 / (20.055 - 11.0)).abs() < 1e-9,
        "{m:?}"
    );
    assert!(m.difference_pct < -30.0, "{m:?}");
}

#[test]
fn a_window_without_tokens_has_no_rate() {
    // Both requests end before the window opens.
    let outcomes = vec![
        request(1.0, 2.05, 0.1, 10, true),
        request(1.0, 2.05, 0.1, 10, true),
    ];
    let (a, b) = (scrape(10.05, 20.0, 0.0), scrape(20.05, 20.0, 0.0));
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    assert_eq!(cell.client_output_tokens, 0);
    assert_eq!(cell.aggregate_tps, None);
    assert_eq!(cell.ext.status, CellStatus::NoTokens);
    assert!(cell.latency.ttft.is_none());
}

#[test]
fn failures_beyond_the_limit_void_the_cell_with_the_reasons() {
    let mut outcomes = two_streams();
    for _ in 0..3 {
        let mut failed = request(12.0, 12.5, 0.1, 3, false);
        failed.cancelled = false;
        failed.track.mark_error(RequestError::new(
            FailureKind::Status,
            "HTTP 500 from x: boom",
        ));
        outcomes.push(failed);
    }
    let (a, b) = (scrape(10.05, 1000.0, 2.0), scrape(20.05, 1195.0, 2.0));
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    assert_eq!(cell.ext.status, CellStatus::Error);
    assert_eq!(cell.aggregate_tps, None);
    assert_eq!(cell.num_errors, 3);
    assert_eq!(
        cell.ext.error_reasons,
        vec!["HTTP 500 from x: boom".to_string()]
    );
    assert!(
        (cell.ext.error_rate - 0.5).abs() < 1e-9,
        "{}",
        cell.ext.error_rate
    );
}

#[test]
fn a_window_whose_scrapes_straddle_a_restart_gets_no_server_count() {
    let outcomes = two_streams();
    // Counters went down: a new process began counting from 0.
    let (a, b) = (scrape(10.05, 5000.0, 2.0), scrape(20.05, 150.0, 2.0));
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    assert_eq!(cell.server_output_tokens, 0);
    assert_eq!(cell.server_gen_throughput, 0.0);
    assert_eq!(cell.ext.server_client_mismatch, None);
    assert_eq!(cell.aggregate_tps, Some(19.5), "the client count stands");
    // Counters grew, but the process start time changed: a mix of two
    // processes' counts, not a delta.
    let (mut a, mut b) = (scrape(10.05, 100.0, 2.0), scrape(20.05, 1300.0, 2.0));
    a.snap.process_start = Some(1_700_000_000.0);
    b.snap.process_start = Some(1_700_000_015.5);
    let cell = assemble(inputs(&outcomes, &a, &b, &[]));
    assert_eq!(cell.server_output_tokens, 0);
    assert_eq!(cell.ext.server_client_mismatch, None);
}

/// Issue 24 item 8: a window read by three scrapes (start, one periodic at
/// 12 s, end). The KV cache fills from 0.2 to 0.8 in the first two seconds;
/// the periodic read caught two restarting requests in the queue. Each read
/// now weighs by the part of the window it stands for, the end scrape (sent
/// at the window's end, streams running) included, and one read with a
/// queue does not make the cell capacity-limited. The cell says what the
/// means rest on.
#[test]
fn sparse_scrapes_give_time_weighted_gauges_and_need_two_queue_reads() {
    let outcomes = two_streams();
    let with = |t: f64, tokens: f64, kv: f64, waiting: f64| {
        let mut s = scrape(t, tokens, 2.0);
        s.snap.kv_usage = Some(kv);
        s.snap.waiting = Some(waiting);
        s
    };
    let a = with(10.05, 1000.0, 0.2, 0.0);
    let sched = [with(12.05, 1040.0, 0.8, 2.0)];
    let b = with(20.05, 1195.0, 0.8, 0.0);
    let cell = assemble(inputs(&outcomes, &a, &b, &sched));
    // Read at 10.045, 12.045 and 20.045 (the middle of each send → answer
    // span): 0.2 stands for [10, 11.045].
    let want = (0.2 * 1.045 + 0.8 * 8.955) / 10.0;
    assert!(
        (cell.server_utilization - want).abs() < 1e-4,
        "{} (the unweighted start + periodic mean was 0.5)",
        cell.server_utilization
    );
    assert_eq!(
        cell.ext.status,
        CellStatus::Ok,
        "{}",
        cell.ext.status_reason
    );
    assert!(!cell.sched.capacity_limited);
    let basis = cell.ext.server_gauge_basis.expect("basis");
    assert_eq!(basis.method, "time_weighted_scrapes");
    assert_eq!((basis.scrapes, basis.queue_scrapes), (3, 1));
    // The end scrape, read at 20.045, stands at the window's end (20.0).
    assert!((basis.max_gap_s - 4.98).abs() < 0.01, "{basis:?}");
}

/// Issue 24 item 8: the same window as above, where one reading alone saw
/// the queue, now with the read the cell takes after its end scrape to
/// confirm it. A confirming read that sees a queue too makes the queue count
/// (the lone reading stands for half the window: mean 1.0 queued); one that
/// sees none leaves the cell as it was. Either way the basis records it.
#[test]
fn a_confirming_read_decides_a_lone_queue_reading() {
    let outcomes = two_streams();
    let with = |t: f64, tokens: f64, waiting: f64| {
        let mut s = scrape(t, tokens, 2.0);
        s.snap.waiting = Some(waiting);
        s
    };
    let (a, b) = (with(10.05, 1000.0, 0.0), with(20.05, 1195.0, 0.0));
    let sched = [with(12.05, 1040.0, 2.0)];
    for (confirm_waiting, limited) in [(3.0, true), (0.0, false)] {
        let confirm = with(20.6, 1200.0, confirm_waiting);
        let mut i = inputs(&outcomes, &a, &b, &sched);
        i.confirm_scrape = Some(&confirm);
        let cell = assemble(i);
        assert_eq!(cell.sched.capacity_limited, limited, "{:?}", cell.sched);
        let basis = cell.ext.server_gauge_basis.expect("basis");
        assert_eq!((basis.scrapes, basis.queue_scrapes), (3, 1));
        assert_eq!(basis.confirm_scrapes, 1);
        assert_eq!(basis.confirm_queue_scrapes, u64::from(limited));
        // The confirming read enters no mean: only the lone reading's queue.
        assert!(
            (cell.sched.avg_queue_reqs - 0.9955).abs() < 1e-3,
            "{:?}",
            cell.sched
        );
    }
}
