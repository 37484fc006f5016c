//! The recorder: the one owner of the result document. Phases hand it facts
//! (a prefill row, a finished cell); it updates the document and the live
//! matrix, stamps the run status, event log, hardware summary and
//! methodology, and saves the file atomically after every fact, so a killed
//! run keeps everything it measured.

use std::sync::Arc;

use ldb_core::document::{Methodology, MethodologyFacts, ResultDocument};
use ldb_core::live::{LiveEvent, MatrixCellState};
use ldb_core::result::{CellResult, CellStatus, PrefillEntry};
use ldb_core::tokens::format_context;

use crate::ctx::Hardware;
use crate::live::Live;

/// Writes the document somewhere (the binary's atomic file writer).
pub type SaveFn = Box<dyn Fn(&ResultDocument) + Send + Sync>;

/// Owner of the result document and its saves.
pub(crate) struct Recorder {
    doc: ResultDocument,
    live: Live,
    save: SaveFn,
    hardware: Option<Arc<dyn Hardware>>,
    request_mode: bool,
    /// The event log of the file being resumed; this run's lines follow it.
    prior_events: Vec<String>,
    /// Server outages and restarts, stamped into the metadata at each save.
    faults: Option<crate::server_watch::SharedFaults>,
    /// Energy and cost settings with the measured idle power; stamped into
    /// the cells at every save (`ldb_core::energy_cost`).
    energy: Option<ldb_core::energy_cost::RunEnergyCost>,
}

impl Recorder {
    /// Start recording `doc` (a fresh document, or the one a resumed run
    /// starts from: its event log is kept ahead of this run's); saves it once
    /// as `in_progress`.
    pub(crate) fn new(
        mut doc: ResultDocument,
        live: Live,
        save: SaveFn,
        hardware: Option<Arc<dyn Hardware>>,
        request_mode: bool,
    ) -> Recorder {
        let prior_events = std::mem::take(&mut doc.event_log);
        let mut r = Recorder {
            doc,
            live,
            save,
            hardware,
            request_mode,
            prior_events,
            faults: None,
            energy: None,
        };
        r.save(ldb_core::result::RunStatus::InProgress);
        r
    }

    /// Stamp energy and cost figures into every cell at each save.
    pub(crate) fn stamp_energy(&mut self, energy: ldb_core::energy_cost::RunEnergyCost) {
        self.energy = Some(energy);
    }

    /// Stamp the run's server faults into the metadata at every save.
    pub(crate) fn watch_faults(&mut self, faults: crate::server_watch::SharedFaults) {
        self.faults = Some(faults);
    }

    /// Cells carried over from a resumed file show as done in the live matrix.
    pub(crate) fn show_carried(&self, plan: &crate::plan::RunPlan) {
        for p in plan.cells.iter().filter(|p| p.carried.is_some()) {
            let (c, x) = (p.concurrency, p.context);
            if let Some(cell) = self
                .doc
                .results
                .iter()
                .find(|r| r.concurrency == c && r.context_tokens == x)
            {
                let state = done_state(cell);
                self.live.send(finished(c, x, state));
            }
        }
    }

    /// The warmup stopped at its limit or failed; the run goes on, and the
    /// file says so (`metadata.warmup_timeout`).
    pub(crate) fn warmup_label(&mut self, why: String) {
        let note = &mut self.doc.metadata.warmup_timeout;
        if !note.is_empty() {
            note.push_str("; ");
        }
        note.push_str(&why);
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A prefill row (measured or skipped).
    pub(crate) fn prefill_row(&mut self, context: u64, row: PrefillEntry) {
        self.doc.prefill.insert(context, row);
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A decode cell is about to run; `eta` is the matrix's remaining time.
    pub(crate) fn cell_started(&self, c: u32, x: u64, elapsed: f64, eta: Option<f64>) {
        self.live.send(LiveEvent::CellStarted {
            concurrency: c,
            context: x,
            elapsed,
            eta,
        });
    }

    /// The primary matrix's cells recorded so far.
    pub(crate) fn results(&self) -> &[CellResult] {
        &self.doc.results
    }

    /// The cell has a record that was measured (not skipped), which later
    /// repeats add to.
    pub(crate) fn measured(&self, c: u32, x: u64) -> bool {
        self.doc
            .results
            .iter()
            .any(|r| r.concurrency == c && r.context_tokens == x && !r.ext.status.is_skip())
    }

    /// A finished cell of the primary matrix; `repeat` is its 1-based
    /// repeat number (`--repeat`): repeats after the first are added to the
    /// cell's record (`ldb_core::repeat`). The first measured cell of a
    /// context also records the prompt tokens the server counted for it.
    pub(crate) fn decode_cell(&mut self, cell: CellResult, stopped: bool, repeat: u32) {
        if repeat > 1 {
            self.repeat_cell(cell, stopped, repeat);
            return;
        }
        self.note_served_prompt(&cell);
        let md = &mut self.doc.metadata;
        if md.usage_mode.is_none()
            && !cell.ext.status.is_skip()
            && cell.ext.status != CellStatus::Error
        {
            md.usage_mode = Some(cell.ext.usage_mode);
        }
        let state = done_state(&cell);
        let (c, x) = (cell.concurrency, cell.context_tokens);
        self.live.send(finished(c, x, state));
        // A cell cut short by stopping the run is not a result.
        if !stopped {
            self.doc.results.push(cell);
        }
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// Repeat `repeat` of a measured cell: added to its record. A repeat the
    /// user skipped or stopped is not a measurement and is dropped.
    fn repeat_cell(&mut self, cell: CellResult, stopped: bool, repeat: u32) {
        let (c, x) = (cell.concurrency, cell.context_tokens);
        let record = self
            .doc
            .results
            .iter_mut()
            .find(|r| r.concurrency == c && r.context_tokens == x);
        match record {
            Some(r) if !stopped && !cell.ext.status.is_skip() => {
                ldb_core::repeat::add(r, cell, repeat);
                let state = done_state(r);
                self.live.send(finished(c, x, state));
            }
            Some(r) => {
                let state = done_state(r);
                self.live.send(finished(c, x, state));
            }
            None if !stopped => self.doc.results.push(cell),
            None => {}
        }
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A finished burst cell (`--run-burst`).
    pub(crate) fn burst_cell(&mut self, cell: CellResult, stopped: bool) {
        if !stopped {
            self.doc.burst_results.push(cell);
        }
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A finished open-loop cell (`--request-rate`).
    pub(crate) fn rate_cell(&mut self, row: ldb_core::open_loop::RateResult) {
        let (key, x) = (rate_key(&self.live, row.request_rate), row.context_tokens);
        let state = rate_done_state(&row);
        self.live.send(finished(key, x, state));
        self.doc.rate_results.push(row);
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A finished trace replay (`--trace`).
    pub(crate) fn trace_result(&mut self, r: ldb_core::replay::TraceResult) {
        self.doc.trace_results.push(r);
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// A finished session run (`--sessions`).
    pub(crate) fn session_result(&mut self, r: ldb_core::replay::session::SessionResult) {
        self.doc.session_results.push(r);
        self.save(ldb_core::result::RunStatus::InProgress);
    }

    /// The final save; returns the document.
    /// Note the stream events of an unknown type the run met (ignored by
    /// the parsers, counted for the file).
    pub(crate) fn note_unknown_events(&mut self, n: u64) {
        self.doc.metadata.api_unknown_events = n;
    }

    pub(crate) fn close(mut self, interrupted: bool) -> ResultDocument {
        self.save(if interrupted {
            ldb_core::result::RunStatus::Interrupted
        } else {
            ldb_core::result::RunStatus::Complete
        });
        self.doc
    }

    fn note_served_prompt(&mut self, cell: &CellResult) {
        let avg = cell.latency.input_seq_len_avg;
        if avg <= 0.0 {
            return;
        }
        let (served, x) = (avg.round() as u64, cell.context_tokens);
        let key = x.to_string();
        let md = &mut self.doc.metadata;
        md.prompt_tokens_by_context
            .entry(key.clone())
            .or_insert(served);
        if md.prompt_tokens_served_by_context.contains_key(&key) {
            return;
        }
        let sized = md.prompt_tokens_by_context.get(&key).copied();
        if let Some(sized) = sized.filter(|&t| t != served) {
            self.live.event(format!(
                "context {}: the server counted {served} prompt tokens, sizing counted {sized}",
                format_context(x),
            ));
        }
        md.prompt_tokens_served_by_context.insert(key, served);
    }

    /// Stamp the time, status, event log, hardware summary and methodology,
    /// then save.
    fn save(&mut self, status: ldb_core::result::RunStatus) {
        let doc = &mut self.doc;
        doc.metadata.timestamp = chrono::Local::now()
            .format("%Y-%m-%dT%H:%M:%S%.6f")
            .to_string();
        doc.metadata.run_status = Some(status);
        if let Some(f) = &self.faults {
            f.lock()
                .unwrap_or_else(|p| p.into_inner())
                .stamp(&mut doc.metadata);
        }
        doc.event_log = self.prior_events.clone();
        doc.event_log.extend(self.live.events());
        if let Some(h) = &self.hardware {
            doc.hardware_run_summary = h.summary_since(0);
        }
        if let Some(energy) = &self.energy {
            ldb_core::energy_cost::stamp(doc, energy.clone());
        }
        let spec_present = doc.results.iter().any(|c| c.spec.steps_per_s > 0.0);
        let request_mode = self.request_mode;
        doc.methodology = Methodology::of_run(&MethodologyFacts {
            prefill_mode: doc.metadata.prefill_mode,
            prefill_present: !doc.prefill.is_empty(),
            sustained_present: !doc.results.is_empty() && !request_mode,
            burst_present: !doc.burst_results.is_empty()
                || (request_mode && !doc.results.is_empty()),
            spec_present,
            duration_auto: doc.metadata.duration_auto.as_ref(),
        });
        (self.save)(doc);
    }
}

fn finished(concurrency: u32, context: u64, state: MatrixCellState) -> LiveEvent {
    LiveEvent::CellFinished {
        concurrency,
        context,
        state,
    }
}

/// The live matrix's column key of an open-loop rate (columns are keyed
/// 1, 2, … in rate order; see `LiveSnapshot::column_labels`).
pub(crate) fn rate_key(live: &Live, rate: f64) -> u32 {
    let label = rate_label(rate);
    live.snapshot()
        .column_labels
        .iter()
        .position(|l| *l == label)
        .map_or(0, |i| u32::try_from(i + 1).unwrap_or(u32::MAX))
}

/// The dashboard's heading of a rate column: `R=2/s`, `R=0.5/s`.
pub(crate) fn rate_label(rate: f64) -> String {
    format!("R={rate}/s")
}

/// A finished rate cell as the dashboard shows it: output tok/s, its
/// latencies from the scheduled send time, and a saturated cell marked like
/// a capacity-limited one.
fn rate_done_state(row: &ldb_core::open_loop::RateResult) -> MatrixCellState {
    let measured = matches!(row.status, CellStatus::Ok | CellStatus::CapacityLimited);
    MatrixCellState::Done {
        tps: measured.then_some(row.output_tps),
        ttft_p50: row.ttft_p50.unwrap_or(f64::NAN),
        itl_p50: f64::NAN,
        ttfo_p50: row.ttfo_p50.unwrap_or(f64::NAN),
        status: if measured && row.saturated {
            CellStatus::CapacityLimited
        } else {
            row.status
        },
        effective: 0.0,
        tps_ci95: None,
    }
}

fn done_state(cell: &CellResult) -> MatrixCellState {
    MatrixCellState::Done {
        tps: cell.aggregate_tps,
        ttft_p50: cell.latency.ttft.map_or(f64::NAN, |d| d.p50),
        itl_p50: cell.latency.inter_token_latency.p50,
        ttfo_p50: cell.latency.ttfo.map_or(f64::NAN, |d| d.p50),
        status: cell.ext.status,
        effective: cell.sched.effective_concurrency,
        tps_ci95: cell
            .ext
            .repeat_stats
            .get("aggregate_tps")
            .and_then(|m| m.ci95),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn recorder() -> (Recorder, Arc<Mutex<Vec<ResultDocument>>>) {
        let saved: Arc<Mutex<Vec<ResultDocument>>> = Arc::default();
        let s2 = saved.clone();
        let (live, _rx) = Live::new();
        let r = Recorder::new(
            ResultDocument::default(),
            live,
            Box::new(move |d| s2.lock().expect("lock").push(d.clone())),
            None,
            false,
        );
        (r, saved)
    }

    fn cell(c: u32, x: u64, prompt: f64) -> CellResult {
        let mut cell = CellResult {
            concurrency: c,
            context_tokens: x,
            ..CellResult::default()
        };
        cell.latency.input_seq_len_avg = prompt;
        cell.ext.usage_mode = ldb_core::result::UsageMode::Continuous;
        cell
    }

    /// Open-loop cells fill the dashboard's matrix under their rate
    /// columns: running, then output tok/s; a saturated one is marked.
    #[test]
    fn rate_cells_fill_the_live_matrix_under_their_rate_column() {
        use ldb_core::live::MatrixCell;
        use ldb_core::open_loop::RateResult;
        let (mut r, _saved) = recorder();
        r.live
            .send(LiveEvent::RunPlanned(Box::new(ldb_core::live::RunLayout {
                column_labels: vec![rate_label(0.5), rate_label(4.0)],
                concurrencies: vec![1, 2],
                matrix: [1, 2]
                    .map(|c| MatrixCell {
                        context: 0,
                        concurrency: c,
                        state: MatrixCellState::Pending,
                    })
                    .to_vec(),
                ..Default::default()
            })));
        assert_eq!(r.live.snapshot().column_label(2), "R=4/s");
        assert_eq!(rate_key(&r.live, 4.0), 2);
        r.cell_started(2, 0, 1.0, None);
        assert_eq!(r.live.snapshot().matrix[1].state, MatrixCellState::Running);
        r.rate_cell(RateResult {
            request_rate: 4.0,
            output_tps: 321.0,
            ttft_p50: Some(0.2),
            saturated: true,
            ..RateResult::default()
        });
        let snap = r.live.snapshot();
        assert_eq!(snap.matrix[0].state, MatrixCellState::Pending);
        match &snap.matrix[1].state {
            MatrixCellState::Done {
                tps,
                status,
                ttft_p50,
                ..
            } => {
                assert_eq!(*tps, Some(321.0));
                assert_eq!(*status, CellStatus::CapacityLimited);
                assert!((ttft_p50 - 0.2).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_fact_is_saved_and_the_last_save_says_complete() {
        let (mut r, saved) = recorder();
        r.prefill_row(1024, PrefillEntry::default());
        r.decode_cell(cell(1, 1024, 1030.0), false, 1);
        r.burst_cell(cell(1, 0, 0.0), false);
        let doc = r.close(false);
        let saved = saved.lock().expect("lock");
        let status: Vec<&str> = saved
            .iter()
            .map(|d| d.metadata.run_status.map_or("", |s| s.as_str()))
            .collect();
        assert_eq!(
            status,
            [
                "in_progress",
                "in_progress",
                "in_progress",
                "in_progress",
                "complete"
            ]
        );
        assert_eq!(
            saved[2].results.len(),
            1,
            "the cell is in the save after it"
        );
        assert_eq!(doc.results.len(), 1);
        assert_eq!(doc.burst_results.len(), 1);
        assert_eq!(
            doc.metadata.usage_mode,
            Some(ldb_core::result::UsageMode::Continuous)
        );
    }

    #[test]
    fn the_served_prompt_of_a_context_is_recorded_once() {
        let (mut r, _) = recorder();
        r.doc
            .metadata
            .prompt_tokens_by_context
            .insert("1024".into(), 1024);
        r.decode_cell(cell(1, 1024, 1030.0), false, 1);
        r.decode_cell(cell(2, 1024, 1100.0), false, 1);
        let doc = r.close(true);
        assert_eq!(doc.metadata.prompt_tokens_served_by_context["1024"], 1030);
        assert_eq!(doc.metadata.prompt_tokens_by_context["1024"], 1024);
        assert_eq!(
            doc.metadata.run_status,
            Some(ldb_core::result::RunStatus::Interrupted)
        );
    }

    #[test]
    fn a_resumed_document_keeps_its_event_log_ahead_of_this_runs() {
        let saved: Arc<Mutex<Vec<ResultDocument>>> = Arc::default();
        let s2 = saved.clone();
        let (live, _rx) = Live::new();
        let prior = ResultDocument {
            event_log: vec!["09:00:00 benchmark start".into()],
            results: vec![cell(1, 0, 0.0)],
            ..ResultDocument::default()
        };
        let mut r = Recorder::new(
            prior,
            live.clone(),
            Box::new(move |d| s2.lock().expect("lock").push(d.clone())),
            None,
            false,
        );
        live.event("resuming");
        r.decode_cell(cell(2, 0, 0.0), false, 1);
        let doc = r.close(false);
        assert_eq!(doc.event_log.len(), 2);
        assert_eq!(doc.event_log[0], "09:00:00 benchmark start");
        assert!(doc.event_log[1].ends_with("resuming"));
        assert_eq!(doc.results.len(), 2, "the carried cell stays first");
        assert_eq!(saved.lock().expect("lock").len(), 3);
    }

    #[test]
    fn a_cell_cut_by_stopping_the_run_is_not_a_result() {
        let (mut r, _) = recorder();
        r.decode_cell(cell(1, 0, 0.0), true, 1);
        r.burst_cell(cell(1, 0, 0.0), true);
        let doc = r.close(true);
        assert!(doc.results.is_empty() && doc.burst_results.is_empty());
    }
}
