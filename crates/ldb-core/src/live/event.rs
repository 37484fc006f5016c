//! What happens during a run, as the live view hears of it. The runner
//! sends [`LiveEvent`]s; [`LiveSnapshot::apply`] is the only place the
//! dashboard's state changes (the shape `ldb_eval::cstats::CsLive::apply`
//! has for completion-stats), so every change is tested without a runner
//! or a terminal.

use super::replay::ReplayProgress;
use super::{
    CellStage, CurrentCell, HardwareLive, LiveRateCi, LiveSnapshot, MatrixCell, MatrixCellState,
    Phase, PrefillRow, StreamText,
};

/// Lines of the event log kept in the snapshot (the result file keeps all).
pub const LIVE_EVENTS: usize = 200;

/// Something the run did that the live view shows.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveEvent {
    /// The server is known and the matrix laid out (sent once, at startup).
    RunPlanned(Box<RunLayout>),
    /// The run entered a phase.
    PhaseChanged(Phase),
    /// A matrix cell starts; the run's clocks as they stand.
    CellStarted {
        /// Column key (the concurrency, or an open-loop rate's key).
        concurrency: u32,
        /// Context tokens.
        context: u64,
        /// Seconds since the run started.
        elapsed: f64,
        /// Estimated seconds until the run ends.
        eta: Option<f64>,
    },
    /// The running cell entered a stage (scout, ramp-up, window, drain); a
    /// different cell than the one shown starts from a blank view.
    StageEntered {
        /// Concurrency.
        concurrency: u32,
        /// Context tokens.
        context: u64,
        /// The stage.
        stage: CellStage,
        /// Seconds in the stage so far.
        elapsed: f64,
        /// Window length (0 = not known in advance).
        window_total: f64,
    },
    /// A refresh of the running cell (a few times a second).
    CellSampled(Box<CellSample>),
    /// `--duration auto`: the window's rate interval as it stands (`None`
    /// before there are enough samples).
    WindowEstimated(Option<LiveRateCi>),
    /// The running cell's view closes (it finished, failed or was skipped).
    CellEnded,
    /// A matrix cell has its outcome: measured, skipped, a repeat added, or
    /// carried over from the file being resumed.
    CellFinished {
        /// Column key.
        concurrency: u32,
        /// Context tokens.
        context: u64,
        /// What the table shows.
        state: MatrixCellState,
    },
    /// A prefill row starts (it replaces an earlier row of its context).
    PrefillStarted {
        /// Context tokens.
        context: u64,
        /// Method word.
        method: String,
        /// Estimated seconds it takes.
        eta: Option<f64>,
    },
    /// A standalone prefill row took one more sample.
    PrefillSampled {
        /// Context tokens.
        context: u64,
        /// The sample's TTFT, seconds.
        ttft: f64,
        /// Seconds spent on the row so far.
        elapsed: f64,
        /// Seconds left of `--prefill-duration`.
        eta: f64,
        /// A new method line (with the sample count and rate), if any.
        method: Option<String>,
    },
    /// A prefill row is done or skipped.
    PrefillFinished {
        /// Context tokens.
        context: u64,
        /// The method word it ended with (`None` keeps the row's).
        method: Option<String>,
        /// tok/s (`None` when skipped).
        tok_per_sec: Option<f64>,
        /// TTFT, seconds (`None` when skipped).
        ttft: Option<f64>,
        /// The skip reason.
        skipped: Option<String>,
    },
    /// A trace replay's or session run's counts as they stand (a few
    /// times a second while it runs).
    ReplayProgressed(Box<ReplayProgress>),
    /// A hardware reading (`None`: telemetry unavailable).
    HardwareRead(Option<HardwareLive>),
    /// A timestamped line for the event log.
    Logged(String),
    /// The run finished or stopped; the report follows.
    RunEnded,
}

/// Who is serving and how the live matrix is laid out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunLayout {
    /// Model name.
    pub model: String,
    /// Engine display name.
    pub engine: String,
    /// Server label.
    pub server: String,
    /// KV budget tokens (0 unknown).
    pub kv_budget: u64,
    /// Column keys (see [`LiveSnapshot::concurrencies`]).
    pub concurrencies: Vec<u32>,
    /// Column headings when the columns are not concurrencies (empty:
    /// the snapshot's are kept).
    pub column_labels: Vec<String>,
    /// Context rows.
    pub contexts: Vec<u64>,
    /// Every cell, pending, in the order they run.
    pub matrix: Vec<MatrixCell>,
}

/// One refresh of the running cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellSample {
    /// Concurrency.
    pub concurrency: u32,
    /// Context tokens.
    pub context: u64,
    /// Stage.
    pub stage: CellStage,
    /// Seconds in the stage.
    pub stage_elapsed: f64,
    /// Running requests reported by the server.
    pub running: Option<f64>,
    /// Queued requests reported by the server.
    pub queued: Option<f64>,
    /// Streams producing tokens.
    pub producing: u32,
    /// Tokens counted in the window so far.
    pub window_tokens: u64,
    /// Window seconds elapsed.
    pub window_elapsed: f64,
    /// Window length (0 = not known).
    pub window_total: f64,
    /// Speculative accept length (`None` keeps the last one shown).
    pub accept_length: Option<f64>,
    /// Tokens per second, one value a second (`None` keeps the trace shown).
    pub tps_trace: Option<Vec<f64>>,
    /// The streams' latest text.
    pub outputs: Vec<StreamText>,
}

impl LiveSnapshot {
    /// Take one event into the view.
    pub fn apply(&mut self, ev: LiveEvent) {
        match ev {
            LiveEvent::RunPlanned(layout) => self.lay_out(*layout),
            LiveEvent::PhaseChanged(p) => self.phase = p,
            LiveEvent::CellStarted {
                concurrency,
                context,
                elapsed,
                eta,
            } => {
                self.elapsed = elapsed;
                self.eta = eta;
                self.set_cell(concurrency, context, MatrixCellState::Running);
            }
            LiveEvent::StageEntered {
                concurrency,
                context,
                stage,
                elapsed,
                window_total,
            } => {
                let cur = self.current.get_or_insert_with(CurrentCell::default);
                if cur.concurrency != concurrency || cur.context != context {
                    *cur = CurrentCell::default();
                }
                cur.concurrency = concurrency;
                cur.context = context;
                cur.stage = stage;
                cur.stage_elapsed = elapsed;
                cur.window_total = window_total;
            }
            LiveEvent::CellSampled(sample) => self.sampled(*sample),
            LiveEvent::WindowEstimated(ci) => {
                if let Some(cur) = self.current.as_mut() {
                    cur.rate_ci = ci;
                }
            }
            LiveEvent::CellEnded => self.current = None,
            LiveEvent::CellFinished {
                concurrency,
                context,
                state,
            } => self.set_cell(concurrency, context, state),
            ev @ (LiveEvent::PrefillStarted { .. }
            | LiveEvent::PrefillSampled { .. }
            | LiveEvent::PrefillFinished { .. }) => self.prefill_event(ev),
            LiveEvent::ReplayProgressed(p) => self.replay = Some(*p),
            LiveEvent::HardwareRead(hw) => self.hardware = hw,
            LiveEvent::Logged(line) => {
                self.events.push(line);
                if self.events.len() > LIVE_EVENTS {
                    let extra = self.events.len() - LIVE_EVENTS;
                    self.events.drain(..extra);
                }
            }
            LiveEvent::RunEnded => {
                self.phase = Phase::Done;
                self.current = None;
            }
        }
    }

    fn lay_out(&mut self, l: RunLayout) {
        self.model = l.model;
        self.engine = l.engine;
        self.server = l.server;
        self.kv_budget = l.kv_budget;
        self.concurrencies = l.concurrencies;
        if !l.column_labels.is_empty() {
            self.column_labels = l.column_labels;
        }
        self.contexts = l.contexts;
        self.matrix = l.matrix;
    }

    fn set_cell(&mut self, concurrency: u32, context: u64, state: MatrixCellState) {
        if let Some(m) = self
            .matrix
            .iter_mut()
            .find(|m| m.concurrency == concurrency && m.context == context)
        {
            m.state = state;
        }
    }

    fn sampled(&mut self, s: CellSample) {
        let cur = self.current.get_or_insert_with(CurrentCell::default);
        cur.concurrency = s.concurrency;
        cur.context = s.context;
        cur.stage = s.stage;
        cur.stage_elapsed = s.stage_elapsed;
        cur.running = s.running;
        cur.queued = s.queued;
        cur.producing = s.producing;
        cur.window_tokens = s.window_tokens;
        cur.window_elapsed = s.window_elapsed;
        cur.window_total = s.window_total;
        if s.accept_length.is_some() {
            cur.accept_length = s.accept_length;
        }
        if let Some(t) = s.tps_trace {
            cur.tps_trace = t;
        }
        self.outputs = s.outputs;
    }

    fn prefill_event(&mut self, ev: LiveEvent) {
        match ev {
            LiveEvent::PrefillStarted {
                context,
                method,
                eta,
            } => {
                self.prefill.retain(|r| r.context != context);
                self.prefill.push(PrefillRow {
                    context,
                    method,
                    eta,
                    ..PrefillRow::default()
                });
            }
            LiveEvent::PrefillSampled {
                context,
                ttft,
                elapsed,
                eta,
                method,
            } => {
                if let Some(row) = self.prefill.iter_mut().find(|r| r.context == context) {
                    row.tok_per_sec = None;
                    row.ttft = Some(ttft);
                    row.elapsed = elapsed;
                    row.eta = Some(eta);
                    if let Some(m) = method {
                        row.method = m;
                    }
                }
            }
            LiveEvent::PrefillFinished {
                context,
                method,
                tok_per_sec,
                ttft,
                skipped,
            } => {
                if let Some(row) = self.prefill.iter_mut().find(|r| r.context == context) {
                    if let Some(m) = method {
                        row.method = m;
                    }
                    row.tok_per_sec = tok_per_sec;
                    row.ttft = ttft;
                    row.eta = None;
                    row.skipped = skipped;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
