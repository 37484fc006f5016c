//! One test per event: what `LiveSnapshot::apply` changes, and what it keeps.

use super::*;
use crate::result::CellStatus;

fn planned() -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    s.apply(LiveEvent::RunPlanned(Box::new(RunLayout {
        model: "m".into(),
        engine: "vLLM".into(),
        server: "sim".into(),
        kv_budget: 4096,
        concurrencies: vec![1, 2],
        column_labels: vec![],
        contexts: vec![0],
        matrix: [1, 2]
            .map(|c| MatrixCell {
                context: 0,
                concurrency: c,
                state: MatrixCellState::Pending,
            })
            .to_vec(),
    })));
    s
}

fn done(tps: f64) -> MatrixCellState {
    MatrixCellState::Done {
        tps: Some(tps),
        ttft_p50: 0.1,
        itl_p50: 0.01,
        ttfo_p50: 0.2,
        status: CellStatus::Ok,
        effective: 2.0,
        tps_ci95: None,
    }
}

#[test]
fn run_planned_sets_the_server_and_the_pending_matrix() {
    let s = planned();
    assert_eq!((s.model.as_str(), s.engine.as_str()), ("m", "vLLM"));
    assert_eq!((s.server.as_str(), s.kv_budget), ("sim", 4096));
    assert_eq!(s.concurrencies, [1, 2]);
    assert_eq!(s.matrix.len(), 2);
    assert!(s.column_labels.is_empty());
    assert_eq!(s.column_label(2), "C=2");
}

#[test]
fn run_planned_with_rate_columns_labels_them() {
    let mut s = LiveSnapshot::default();
    s.apply(LiveEvent::RunPlanned(Box::new(RunLayout {
        concurrencies: vec![1, 2],
        column_labels: vec!["R=1/s".into(), "R=2/s".into()],
        ..RunLayout::default()
    })));
    assert_eq!(s.column_label(2), "R=2/s");
}

#[test]
fn phase_changed_and_run_ended() {
    let mut s = planned();
    s.apply(LiveEvent::PhaseChanged(Phase::Decode));
    assert_eq!(s.phase, Phase::Decode);
    s.current = Some(CurrentCell::default());
    s.apply(LiveEvent::RunEnded);
    assert_eq!(s.phase, Phase::Done);
    assert!(s.current.is_none());
}

#[test]
fn cell_started_marks_it_running_and_sets_the_clocks() {
    let mut s = planned();
    s.apply(LiveEvent::CellStarted {
        concurrency: 2,
        context: 0,
        elapsed: 12.0,
        eta: Some(30.0),
    });
    assert_eq!((s.elapsed, s.eta), (12.0, Some(30.0)));
    assert_eq!(s.matrix[0].state, MatrixCellState::Pending);
    assert_eq!(s.matrix[1].state, MatrixCellState::Running);
    // a cell outside the matrix changes nothing in it
    s.apply(LiveEvent::CellStarted {
        concurrency: 9,
        context: 0,
        elapsed: 13.0,
        eta: None,
    });
    assert_eq!(s.matrix[0].state, MatrixCellState::Pending);
}

#[test]
fn cell_finished_shows_its_outcome() {
    let mut s = planned();
    s.apply(LiveEvent::CellFinished {
        concurrency: 1,
        context: 0,
        state: done(100.0),
    });
    assert_eq!(s.matrix[0].state, done(100.0));
    assert_eq!(s.matrix[1].state, MatrixCellState::Pending);
}

fn stage(s: &mut LiveSnapshot, c: u32, stage: CellStage) {
    s.apply(LiveEvent::StageEntered {
        concurrency: c,
        context: 0,
        stage,
        elapsed: 0.5,
        window_total: 10.0,
    });
}

#[test]
fn stage_entered_keeps_the_cell_and_a_new_cell_starts_blank() {
    let mut s = planned();
    stage(&mut s, 1, CellStage::Scout);
    s.current.as_mut().unwrap().window_tokens = 77;
    stage(&mut s, 1, CellStage::Window);
    let cur = s.current.clone().unwrap();
    assert_eq!((cur.stage, cur.window_tokens), (CellStage::Window, 77));
    assert_eq!((cur.stage_elapsed, cur.window_total), (0.5, 10.0));
    stage(&mut s, 2, CellStage::Scout);
    let cur = s.current.unwrap();
    assert_eq!((cur.concurrency, cur.window_tokens), (2, 0));
}

#[test]
fn cell_sampled_fills_the_running_cell_and_keeps_what_it_lacks() {
    let mut s = planned();
    let sample = CellSample {
        concurrency: 2,
        stage: CellStage::Window,
        running: Some(2.0),
        queued: Some(0.0),
        producing: 2,
        window_tokens: 500,
        window_elapsed: 3.0,
        window_total: 10.0,
        accept_length: Some(2.5),
        tps_trace: Some(vec![150.0, 160.0]),
        outputs: vec![StreamText {
            slot: 0,
            text: "hello".into(),
        }],
        ..CellSample::default()
    };
    s.apply(LiveEvent::CellSampled(Box::new(sample.clone())));
    s.apply(LiveEvent::CellSampled(Box::new(CellSample {
        accept_length: None,
        tps_trace: None,
        window_tokens: 600,
        ..sample
    })));
    let cur = s.current.clone().unwrap();
    assert_eq!((cur.window_tokens, cur.producing), (600, 2));
    assert_eq!(cur.accept_length, Some(2.5));
    assert_eq!(cur.tps_trace, [150.0, 160.0]);
    assert_eq!(s.outputs[0].text, "hello");
}

#[test]
fn window_estimated_needs_a_running_cell() {
    let ci = LiveRateCi {
        mean: 100.0,
        half_width: 1.0,
        ..LiveRateCi::default()
    };
    let mut s = planned();
    s.apply(LiveEvent::WindowEstimated(Some(ci)));
    assert!(s.current.is_none());
    stage(&mut s, 1, CellStage::Window);
    s.apply(LiveEvent::WindowEstimated(Some(ci)));
    assert_eq!(s.current.as_ref().unwrap().rate_ci, Some(ci));
    s.apply(LiveEvent::CellEnded);
    assert!(s.current.is_none());
}

#[test]
fn a_prefill_row_starts_takes_samples_and_finishes() {
    let mut s = planned();
    let start = LiveEvent::PrefillStarted {
        context: 8192,
        method: "client".into(),
        eta: Some(5.0),
    };
    s.apply(start.clone());
    s.apply(start);
    assert_eq!(s.prefill.len(), 1, "a restart replaces the row");
    s.apply(LiveEvent::PrefillSampled {
        context: 8192,
        ttft: 0.4,
        elapsed: 1.0,
        eta: 4.0,
        method: Some("client (1 samples, last 20480 tok/s)".into()),
    });
    let row = &s.prefill[0];
    assert_eq!(
        (row.ttft, row.elapsed, row.eta),
        (Some(0.4), 1.0, Some(4.0))
    );
    assert!(row.method.contains("1 samples"));
    s.apply(LiveEvent::PrefillSampled {
        context: 8192,
        ttft: 0.5,
        elapsed: 2.0,
        eta: 3.0,
        method: None,
    });
    assert!(s.prefill[0].method.contains("1 samples"), "kept");
    s.apply(LiveEvent::PrefillFinished {
        context: 8192,
        method: None,
        tok_per_sec: Some(20000.0),
        ttft: Some(0.41),
        skipped: None,
    });
    let row = &s.prefill[0];
    assert_eq!(
        (row.tok_per_sec, row.ttft, row.eta),
        (Some(20000.0), Some(0.41), None)
    );
    assert!(row.method.contains("1 samples"), "no method given: kept");
}

#[test]
fn a_skipped_prefill_row_keeps_its_reason_and_method() {
    let mut s = planned();
    s.apply(LiveEvent::PrefillStarted {
        context: 1024,
        method: "scout_only".into(),
        eta: None,
    });
    s.apply(LiveEvent::PrefillFinished {
        context: 1024,
        method: Some("client".into()),
        tok_per_sec: None,
        ttft: None,
        skipped: Some("skipped by user".into()),
    });
    let row = &s.prefill[0];
    assert_eq!(row.method, "client");
    assert_eq!(row.skipped.as_deref(), Some("skipped by user"));
    // an event for a row not shown changes nothing
    s.apply(LiveEvent::PrefillFinished {
        context: 7,
        method: None,
        tok_per_sec: Some(1.0),
        ttft: None,
        skipped: None,
    });
    assert_eq!(s.prefill.len(), 1);
}

#[test]
fn hardware_read_replaces_the_panel() {
    let mut s = planned();
    s.apply(LiveEvent::HardwareRead(Some(HardwareLive {
        cpu_util_pct: Some(12.0),
        ..HardwareLive::default()
    })));
    assert_eq!(s.hardware.as_ref().unwrap().cpu_util_pct, Some(12.0));
    s.apply(LiveEvent::HardwareRead(None));
    assert!(s.hardware.is_none());
}

#[test]
fn logged_lines_are_bounded_oldest_dropped() {
    let mut s = LiveSnapshot::default();
    for i in 0..LIVE_EVENTS + 5 {
        s.apply(LiveEvent::Logged(format!("line {i}")));
    }
    assert_eq!(s.events.len(), LIVE_EVENTS);
    assert_eq!(s.events[0], "line 5");
    assert_eq!(
        s.events.last().unwrap(),
        &format!("line {}", LIVE_EVENTS + 4)
    );
}

#[test]
fn replay_progress_replaces_the_last_one() {
    let mut s = planned();
    let mut p = ReplayProgress {
        sent: 3,
        ..ReplayProgress::default()
    };
    s.apply(LiveEvent::ReplayProgressed(Box::new(p.clone())));
    p.sent = 7;
    s.apply(LiveEvent::ReplayProgressed(Box::new(p)));
    assert_eq!(s.replay.as_ref().map(|r| r.sent), Some(7));
}
