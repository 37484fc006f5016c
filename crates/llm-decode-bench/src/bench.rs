//! The benchmark mode (concurrency matrix, request-count cells, open-loop
//! rates, burst, prefill profile; `rerun`): its lowered settings and its
//! [`Mode`] implementation for the session driver. The runner decides from
//! the configuration which phases run.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_core::document::ResultDocument;
use ldb_core::result::CellStatus;
use ldb_runner::coding_peak::CodingPeakConfig;
use ldb_runner::{Live, RunConfig, RunHooks, RunOutcome};

use crate::error::{AppError, exit};
use crate::fabric_config::FabricPlan;
use crate::session::{Mode, Session, StartupInputs};
use crate::target::Target;

mod save;

/// The benchmark, lowered from its flags.
pub(crate) struct BenchSession {
    /// The run configuration (final: pointed at its target, SLO included).
    pub(crate) cfg: RunConfig,
    /// The server, or the simulator to start.
    pub(crate) target: Target,
    /// The startup's inputs.
    pub(crate) startup: StartupInputs,
    /// `--display-mode` (None: chosen from the terminal).
    pub(crate) display: Option<ldb_tui::DisplayMode>,
    /// `--refresh-rate`, redraws per second.
    pub(crate) refresh_hz: f64,
    /// `--html`: the page rewritten after each save.
    pub(crate) html: Option<PathBuf>,
    /// `--requests-jsonl`: the request samples written at the end.
    pub(crate) requests_jsonl: Option<PathBuf>,
    /// `--metrics-listen ADDR:PORT`.
    pub(crate) metrics_listen: Option<String>,
    /// `--dry-run`.
    pub(crate) dry_run: bool,
    /// `--resume`.
    pub(crate) resume: bool,
    /// `--resume`: the document read back (by [`Mode::check`]).
    pub(crate) resumed: Option<ResultDocument>,
    /// The fabric diagnostics to run before the benchmark.
    pub(crate) fabric: FabricPlan,
    /// `--coding-peak`: the probe after the report.
    pub(crate) coding_peak: Option<CodingPeakConfig>,
    /// `rerun`: the recorded run, to say where this one differs.
    pub(crate) prior: Option<ResultDocument>,
    /// `--metrics-listen`: the bound socket (by [`Mode::prepare`]).
    pub(crate) metrics_listener: Option<tokio::net::TcpListener>,
    /// `--shards`: this process's role (docs/shards.md).
    pub(crate) shard: crate::shard::ShardPlan,
    /// `--shards`, shard 0: the leader, once every follower joined (by [`Mode::prepare`]).
    pub(crate) leader: Option<Arc<ldb_runner::shard::ShardLeader>>,
}

impl BenchSession {
    /// Run it through the session driver.
    pub(crate) async fn drive(mut self) -> Result<i32, AppError> {
        let target = std::mem::replace(&mut self.target, Target::Server);
        crate::session::drive(self, target).await
    }
}

/// What the measurement leaves for the report.
pub(crate) struct Measured {
    result: Result<RunOutcome, ldb_runner::RunError>,
    html_error: Option<Arc<Mutex<Option<String>>>>,
    opts: ldb_report::text::TextOptions,
}

impl Mode for BenchSession {
    type Measured = Measured;

    fn most_streams(&self) -> u64 {
        u64::from(
            self.cfg
                .matrix
                .concurrency
                .iter()
                .copied()
                .max()
                .unwrap_or(1),
        )
    }

    fn output(&self) -> &Path {
        &self.cfg.output.output
    }

    fn writes_result(&self) -> bool {
        !self.dry_run
    }

    fn check(&mut self) -> Result<(), AppError> {
        if self.resume {
            self.resumed = Some(load_for_resume(&self.cfg.output.output)?);
        }
        Ok(())
    }

    async fn prepare(&mut self) -> Result<(), AppError> {
        if self.dry_run {
            return Ok(());
        }
        // The HTML and JSONL files are extras: a path that cannot be written
        // is said now, and the run goes on.
        for (flag, path) in [
            ("--html", &self.html),
            ("--requests-jsonl", &self.requests_jsonl),
        ] {
            if let Some(Err(e)) = path.as_deref().map(ldb_report::json::prepare_output) {
                eprintln!("warning: {flag}: {e}; the run goes on without it");
            }
        }
        if let Some(spec) = &self.metrics_listen {
            self.metrics_listener = Some(crate::metrics_listen::bind(spec).await?);
        }
        self.leader = crate::shard::prepare(&self.shard).await?;
        Ok(())
    }

    async fn before_startup(&mut self) -> Option<Result<i32, AppError>> {
        if let Some(code) = crate::shard::run_instead(&self.shard, &self.cfg).await {
            return Some(code);
        }
        if !self.dry_run {
            return None;
        }
        if let Some(prior) = &self.prior {
            crate::rerun::announce(&self.cfg, prior, None).await;
        }
        Some(dry_run(&self.cfg, self.resumed.as_ref()).await)
    }

    fn startup_inputs(&self) -> StartupInputs {
        self.startup.clone()
    }

    async fn measure(&mut self, s: &Session) -> Result<Measured, AppError> {
        if let Some(prior) = &self.prior {
            let gpus = s.startup.monitor.latest().map(|h| h.gpu_count() as u64);
            crate::rerun::announce(&self.cfg, prior, gpus).await;
        }
        let mut diagnostics = s.startup.diagnostics.clone();
        let fabric_line = crate::fabric::before_bench(&self.fabric, &mut diagnostics).await;
        let (live, rx) = Live::new();
        let metrics_server = self
            .metrics_listener
            .take()
            .map(|l| crate::metrics_listen::serve(l, live.clone()));
        s.startup.announce(&live);
        if let Some(line) = fabric_line {
            live.event(line);
        }
        let mode = ldb_tui::choose_mode(self.display);
        // stdin/stdout that are not terminals get plain mode and no key handling.
        let ui_opts = ldb_tui::UiOptions {
            refresh_hz: self.refresh_hz,
            ..ldb_tui::UiOptions::default()
        };
        let ui = ldb_tui::spawn(mode, rx, s.control_tx.clone(), ui_opts);
        s.watch_stops();
        publish_hardware(&live, &s.startup.monitor);
        let html = self.html.clone().map(|path| save::LiveHtml {
            name: ldb_report::html::name_of(&self.cfg.output.output),
            path,
            live: live.clone(),
            show_capacity_limited_values: self.cfg.output.show_capacity_limited_values,
            error: Arc::default(),
        });
        let html_error = html.as_ref().map(|h| h.error.clone());
        let hooks = RunHooks {
            live: live.clone(),
            controls: s.controls.clone(),
            hardware: Some(s.hardware()),
            diagnostics,
            p2p: s.startup.p2p.clone(),
            save: save::hook(
                self.cfg.output.output.clone(),
                s.saves.clone(),
                self.cfg.slo.spec.clone(),
                html,
            ),
            resume: self.resumed.take(),
        };
        let opts = ldb_report::text::TextOptions {
            width: crate::app::terminal_width(),
            show_capacity_limited_values: self.cfg.output.show_capacity_limited_values,
            color: std::io::stdout().is_terminal(),
        };
        let executor = match &self.leader {
            Some(l) => {
                l.plan_started();
                ldb_runner::CellExecutor::ShardLeader(l.clone())
            }
            None => ldb_runner::CellExecutor::Local,
        };
        let result = ldb_runner::run_with(self.cfg.clone(), hooks, executor).await;
        if let Some(l) = &self.leader {
            l.finish().await;
        }
        ui.finish().await;
        if let Some(task) = metrics_server {
            task.abort();
        }
        Ok(Measured {
            result,
            html_error,
            opts,
        })
    }

    async fn finish(self, m: Measured, s: &Session) -> Result<i32, AppError> {
        let mut outcome = m.result.map_err(run_error)?;
        // The same verdicts the saved file carries (the save hook judged its copy).
        if let Some(spec) = &self.cfg.slo.spec {
            ldb_core::slo::evaluate(spec, &mut outcome.doc);
        }
        let output = &self.cfg.output.output;
        let mut out = std::io::stdout().lock();
        if outcome.interrupted {
            let _ = writeln!(out, "Interrupted by user. Saving partial results...");
        }
        let runs = [ldb_report::export::Run {
            name: "",
            doc: &outcome.doc,
        }];
        let _ = ldb_report::export::write_to(&ldb_report::export::Text(m.opts), &runs, &mut out);
        save::report_extras(
            self.html.as_deref(),
            self.requests_jsonl.as_deref(),
            &outcome.doc,
            m.html_error.as_deref(),
            &mut out,
        );
        s.saves.failed()?;
        let _ = writeln!(out, "Results saved to {}", output.display());
        let matrix_done = !outcome.interrupted && outcome.server_down.is_none();
        if self.coding_peak.is_some() && !matrix_done {
            let _ = writeln!(out, "Coding peak not run: the matrix did not finish.");
        }
        drop(out);
        if let (Some(peak), true) = (&self.coding_peak, matrix_done) {
            let server = (
                self.cfg.target.base_url.clone(),
                self.cfg.target.api_key.clone(),
            );
            let html = self.html.as_deref();
            let doc = &mut outcome.doc;
            let code =
                crate::coding_peak::run(peak, html, &server, doc, &s.controls, output, &m.opts);
            if let Some(code) = code.await? {
                return Ok(code);
            }
        }
        if let Some(code) = crate::shard::leader_exit(self.leader.as_deref(), &outcome.doc) {
            return Ok(code);
        }
        if let Some(why) = &outcome.server_down {
            return Err(AppError::Server(format!(
                "{why}; the cells finished before are saved in {} (continue with --resume once the \
                 server is back)",
                output.display()
            )));
        }
        Ok(if outcome.interrupted {
            exit::INTERRUPTED
        } else if run_invalid(&outcome.doc) {
            exit::INVALID_CELLS
        } else {
            exit::OK
        })
    }
}

/// A run that cannot start: a refused `--resume` is a configuration problem
/// (exit 2), anything else the server's (exit 3).
pub(crate) fn run_error(e: ldb_runner::RunError) -> AppError {
    match e {
        ldb_runner::RunError::Resume(m) => AppError::Config(m),
        other => AppError::Server(other.to_string()),
    }
}

/// `--resume`: the result file to continue, read and checked before anything
/// is sent. Every failure is one line and exit code 2; the file is untouched.
fn load_for_resume(output: &Path) -> Result<ResultDocument, AppError> {
    if !output.exists() {
        return Err(AppError::Config(format!(
            "--resume: {} does not exist, so there is no run to continue (drop --resume to start one)",
            output.display()
        )));
    }
    let doc = ldb_report::load_result_file(output)
        .map_err(|e| AppError::Config(format!("--resume: {e}")))?;
    ldb_runner::resume::check_resumable(&doc)
        .map_err(|e| AppError::Config(format!("--resume: {}: {e}", output.display())))?;
    // SLO verdicts come from this run's --slo alone (every save judges the
    // whole document again); the stopped run's verdicts do not carry over.
    let mut doc = doc;
    ldb_core::slo::clear(&mut doc);
    Ok(doc)
}

/// Hardware readings into the live view once a second.
fn publish_hardware(live: &Live, monitor: &ldb_telemetry::MonitorHandle) {
    let (live, mon) = (live.clone(), monitor.clone());
    tokio::spawn(async move {
        loop {
            let hw = mon.live();
            live.send(ldb_core::live::LiveEvent::HardwareRead(hw));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// A failed or empty cell, or a prefill-only run that measured no row.
fn run_invalid(doc: &ResultDocument) -> bool {
    let bad_cell = doc
        .results
        .iter()
        .chain(&doc.burst_results)
        .any(|c| matches!(c.ext.status, CellStatus::Error | CellStatus::NoTokens));
    let prefill_failed = doc.metadata.prefill_only
        && (doc.prefill.is_empty() || doc.prefill.values().all(|r| r.skipped));
    bad_cell || prefill_failed
}

/// `--dry-run`: what the run would do, from discovery alone; no generation
/// request is sent. With `--resume`, what the file holds is marked as carried over.
async fn dry_run(cfg: &RunConfig, resume: Option<&ResultDocument>) -> Result<i32, AppError> {
    let (events, plan) = ldb_runner::run::dry_run(cfg, resume)
        .await
        .map_err(run_error)?;
    for e in events {
        println!("{e}");
    }
    match &cfg.replay {
        Some(replay) => println!("{replay}"),
        None => println!("{}", ldb_report::text::plan::PlanText(&plan)),
    }
    println!("dry run: nothing was generated; drop --dry-run to run this plan");
    Ok(exit::OK)
}
