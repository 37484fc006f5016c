//! What a running cell shows on the dashboard: its stage, the server's
//! running and queued requests, tokens so far, the rate trace and the
//! streamed text.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ldb_core::live::{CellSample, CellStage, LiveEvent, StreamText};
use ldb_core::readiness::Observation;

use crate::cell::CellSpec;
use crate::ctx::RunCtx;
use crate::pool::StreamPool;

/// Enter `stage` (resetting the view when a new cell starts).
pub(crate) fn set_stage(rc: &RunCtx, spec: &CellSpec, stage: CellStage, elapsed: f64) {
    enter_stage(
        rc,
        (spec.concurrency, spec.context),
        stage,
        elapsed,
        spec.duration,
    );
}

/// Enter `stage` of the cell `(C, context)`, whose window lasts
/// `window_total` seconds (0 = not known in advance).
pub(crate) fn enter_stage(
    rc: &RunCtx,
    (concurrency, context): (u32, u64),
    stage: CellStage,
    elapsed: f64,
    window_total: f64,
) {
    rc.live.send(LiveEvent::StageEntered {
        concurrency,
        context,
        stage,
        elapsed,
        window_total,
    });
}

/// The latest text of the streams that copy theirs, for the output view.
pub(crate) fn stream_texts(sinks: &[Arc<Mutex<String>>]) -> Vec<StreamText> {
    sinks
        .iter()
        .enumerate()
        .map(|(i, s)| StreamText {
            slot: i as u32,
            text: s.lock().map(|t| t.clone()).unwrap_or_default(),
        })
        .collect()
}

/// Where the cell stands, for one refresh of the view.
pub(crate) struct CellProgress<'a> {
    /// Current stage.
    pub stage: CellStage,
    /// Seconds in this stage.
    pub stage_elapsed: f64,
    /// Seconds of the window so far (0 before it opens).
    pub window_elapsed: f64,
    /// The last readiness observation.
    pub obs: &'a Observation,
    /// Tokens per second, one value per second of the window.
    pub trace: Option<&'a [f64]>,
}

/// Publish the cell's progress and its streams' text.
pub(crate) fn update_live(rc: &RunCtx, spec: &CellSpec, pool: &StreamPool, p: &CellProgress<'_>) {
    let outputs = stream_texts(&pool.sinks);
    let accept = rc
        .scraper
        .latest()
        .and_then(|s| s.snap.spec_accept_length_gauge);
    let window_tokens = pool.counters.window_tokens.load(Ordering::Relaxed);
    rc.live.send(LiveEvent::CellSampled(Box::new(CellSample {
        concurrency: spec.concurrency,
        context: spec.context,
        stage: p.stage,
        stage_elapsed: p.stage_elapsed,
        running: p.obs.running,
        queued: p.obs.waiting,
        producing: p.obs.producing,
        window_tokens,
        window_elapsed: p.window_elapsed,
        window_total: spec.duration,
        accept_length: accept,
        tps_trace: p.trace.map(<[f64]>::to_vec),
        outputs,
    })));
}

/// Window tokens per second, one value per second, the last 120 kept.
pub(crate) struct RateTrace {
    pub values: Vec<f64>,
    last_t: f64,
    last_tokens: u64,
}

impl RateTrace {
    pub(crate) fn new(start: f64) -> RateTrace {
        RateTrace {
            values: Vec::new(),
            last_t: start,
            last_tokens: 0,
        }
    }

    pub(crate) fn sample(&mut self, now: f64, tokens: u64) {
        if now - self.last_t < 1.0 {
            return;
        }
        self.values
            .push(tokens.saturating_sub(self.last_tokens) as f64 / (now - self.last_t));
        self.last_tokens = tokens;
        self.last_t = now;
        if self.values.len() > 120 {
            self.values.remove(0);
        }
    }
}
