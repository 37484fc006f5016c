//! The session driver: the steps every mode that talks to a server shares,
//! in one place and one order. The mode (the concurrency matrix and the
//! open-loop rates, completion-stats, …) is a [`Mode`] implementation; see
//! docs/architecture.md § Adding a mode.
//!
//! Order: open-file limit → the mode's checks that read files → output
//! preparation → the mode's own preparation → simulator → (a mode may end
//! here, e.g. `--dry-run`) → startup (hardware sampler, diagnostics, P2P
//! check) → stop signals and save lock → measure → sampler stopped → finish
//! (report, extras, exit code) → simulator shut down.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ldb_core::live::Control;
use ldb_runner::{Controls, Hardware};
use ldb_telemetry::{HardwareMonitor, MonitorConfig, MonitorHandle};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::{AppError, exit};
use crate::stop_signals::StopSignals;
use crate::target::Target;

/// One mode of the benchmark that talks to a server.
pub(crate) trait Mode {
    /// What [`Mode::measure`] hands to [`Mode::finish`].
    type Measured;

    /// The most streams open at once, for the open-file limit.
    fn most_streams(&self) -> u64;

    /// The result file.
    fn output(&self) -> &Path;

    /// False when this session writes no result (`--dry-run`): the output
    /// is then not prepared.
    fn writes_result(&self) -> bool {
        true
    }

    /// Checks that read files, before the output is prepared (`--resume`).
    fn check(&mut self) -> Result<(), AppError> {
        Ok(())
    }

    /// The mode's own preparation once the output is known to be writable
    /// (extra output files, listeners).
    async fn prepare(&mut self) -> Result<(), AppError> {
        Ok(())
    }

    /// A session that ends once the server is up, before the startup (the
    /// dry run): its exit code.
    async fn before_startup(&mut self) -> Option<Result<i32, AppError>> {
        None
    }

    /// What the startup records: the sampler's settings, the flags for the
    /// diagnostics, the server's address.
    fn startup_inputs(&self) -> StartupInputs;

    /// The measurement, with the dashboard or progress lines.
    async fn measure(&mut self, s: &Session) -> Result<Self::Measured, AppError>;

    /// After the hardware sampler stopped, while the server is still up:
    /// the report, the extras and the exit code.
    async fn finish(self, measured: Self::Measured, s: &Session) -> Result<i32, AppError>;
}

/// Run one mode against its target.
pub(crate) async fn drive<M: Mode>(mut mode: M, target: Target) -> Result<i32, AppError> {
    let most = mode.most_streams();
    // a stream holds a socket, two when the simulator runs in this process
    let ends = if target.in_process() { 2 } else { 1 };
    crate::fdlimit::ensure_open_files(
        ends * most + crate::fdlimit::BASE_FILES,
        &format!("C = {most}"),
    )?;
    mode.check()?;
    if mode.writes_result() {
        // Before anything is sent: a run whose result cannot be saved is wasted.
        ldb_report::json::prepare_output(mode.output())
            .map_err(|e| AppError::Output(e.to_string()))?;
    }
    mode.prepare().await?;
    let sim = target.start()?;
    let code = match mode.before_startup().await {
        Some(code) => code,
        None => with_startup(mode).await,
    };
    if let Some(s) = sim {
        s.shutdown().await;
    }
    code
}

async fn with_startup<M: Mode>(mut mode: M) -> Result<i32, AppError> {
    let startup = Startup::collect(mode.startup_inputs()).await;
    let session = Session::new(startup, mode.output().to_path_buf());
    let measured = mode.measure(&session).await;
    session.startup.monitor.stop();
    mode.finish(measured?, &session).await
}

/// What a mode gets from the driver while it measures and reports.
pub(crate) struct Session {
    /// The hardware sampler and the host diagnostics.
    pub(crate) startup: Startup,
    /// Stop and skip, as the runner reads them.
    pub(crate) controls: Arc<Controls>,
    /// Where a dashboard sends its keys (Stop, Skip).
    pub(crate) control_tx: mpsc::Sender<Control>,
    /// The save lock and the first failed save.
    pub(crate) saves: Saves,
    /// Called once, on the first stop, before the run is told to stop.
    stop_notice: Arc<Mutex<Option<StopNotice>>>,
    /// The keys' receiver and the result file, until [`Session::watch_stops`].
    control_rx: Mutex<Option<(mpsc::Receiver<Control>, PathBuf)>>,
}

/// What a mode says when the first stop arrives.
pub(crate) type StopNotice = Arc<dyn Fn() + Send + Sync>;

impl Session {
    fn new(startup: Startup, output: PathBuf) -> Session {
        let (control_tx, control_rx) = mpsc::channel::<Control>(8);
        Session {
            startup,
            controls: Arc::new(Controls::default()),
            control_tx,
            saves: Saves::default(),
            stop_notice: Arc::default(),
            control_rx: Mutex::new(Some((control_rx, output))),
        }
    }

    /// From now on, keys and Ctrl-C, SIGTERM and SIGHUP stop the run: the
    /// first softly (the result so far is saved and reported), a second
    /// one at once (exit code 130) once no save is in progress, so the file
    /// on disk is the last complete save. The mode calls it when its view
    /// is up; a second call does nothing.
    pub(crate) fn watch_stops(&self) {
        let taken = self
            .control_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some((mut control_rx, output)) = taken else {
            return;
        };
        let (c, lock) = (self.controls.clone(), self.saves.lock.clone());
        let notice = self.stop_notice.clone();
        tokio::spawn(async move {
            while let Some(k) = control_rx.recv().await {
                match k {
                    Control::Skip => c.skip(),
                    Control::Stop if c.stop.is_cancelled() => exit_now(&lock, &output),
                    Control::Stop => {
                        let told = notice.lock().unwrap_or_else(|p| p.into_inner()).clone();
                        if let Some(tell) = told {
                            tell();
                        }
                        c.stop.cancel();
                    }
                }
            }
        });
        let signal_tx = self.control_tx.clone();
        tokio::spawn(async move {
            let mut signals = StopSignals::new();
            while signals.next().await {
                if signal_tx.send(Control::Stop).await.is_err() {
                    break;
                }
            }
        });
    }

    /// What to tell when the first stop arrives (before the run stops).
    pub(crate) fn on_first_stop(&self, notice: StopNotice) {
        *self.stop_notice.lock().unwrap_or_else(|p| p.into_inner()) = Some(notice);
    }

    /// The sampler as the runner reads it.
    pub(crate) fn hardware(&self) -> Arc<dyn Hardware> {
        Arc::new(MonitorAdapter(self.startup.monitor.clone()))
    }
}

/// The save lock (held while a result file is written; the second stop
/// waits for it) and the first failed save (for the exit code).
#[derive(Clone, Default)]
pub(crate) struct Saves {
    lock: Arc<Mutex<()>>,
    error: Arc<Mutex<Option<String>>>,
}

impl Saves {
    /// Runs `write` under the save lock; its first failure is kept.
    pub(crate) fn write(&self, write: impl FnOnce() -> Result<(), String>) {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = write() {
            self.error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        }
    }

    /// The first failed save, as the session's error (exit 5).
    pub(crate) fn failed(&self) -> Result<(), AppError> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(AppError::Output(e)),
            None => Ok(()),
        }
    }
}

/// The runner's view of the telemetry monitor.
pub(crate) struct MonitorAdapter(pub(crate) MonitorHandle);

impl Hardware for MonitorAdapter {
    fn mark(&self) -> usize {
        self.0.mark()
    }

    fn summary_since(&self, mark: usize) -> ldb_core::hardware::HardwareSummary {
        self.0.summary_since(mark)
    }

    fn summary_between(&self, start: usize, end: usize) -> ldb_core::hardware::HardwareSummary {
        self.0.summary_between(start, end)
    }

    fn samples_between(
        &self,
        start: usize,
        end: usize,
    ) -> Vec<ldb_core::hardware::HardwareSnapshot> {
        self.0.samples_between(start, end)
    }

    fn elapsed_s(&self) -> f64 {
        self.0.elapsed_s()
    }
}

/// The startup's inputs, lowered from the flags.
#[derive(Debug, Clone)]
pub(crate) struct StartupInputs {
    /// `--hw-monitor-interval`, `--no-hw-monitor`, `--hw-gpu-limit`.
    pub(crate) monitor: MonitorConfig,
    /// The flags recorded in `startup_diagnostics.args` (no secret).
    pub(crate) args: Vec<(String, Value)>,
    /// The server's base URL (redacted before it is recorded).
    pub(crate) base_url: String,
}

/// What is gathered before the server is contacted: the hardware sampler,
/// the host diagnostics and the NVIDIA P2P check.
pub(crate) struct Startup {
    pub(crate) monitor: MonitorHandle,
    pub(crate) diagnostics: Option<ldb_core::document::StartupDiagnostics>,
    pub(crate) p2p: Option<ldb_core::hardware::P2pOverride>,
    p2p_lines: Option<(String, Option<Vec<String>>)>,
}

impl Startup {
    async fn collect(inputs: StartupInputs) -> Startup {
        // Starting the sampler and collecting diagnostics run commands with
        // timeouts; keep them off the async workers.
        let monitor_cfg = inputs.monitor;
        let monitor =
            match tokio::task::spawn_blocking(move || HardwareMonitor::start(monitor_cfg)).await {
                Ok(m) => m,
                Err(_) => HardwareMonitor::start(MonitorConfig::from_flags(0.0, true, 1)),
            };
        let args_json = inputs.args;
        let diag_url = ldb_core::redact::redact_url(&inputs.base_url);
        let diagnostics = tokio::task::spawn_blocking(move || {
            ldb_telemetry::collect_startup_diagnostics(&args_json, &diag_url)
        })
        .await
        .ok();
        let p2p_lines = diagnostics.as_ref().map(|d| {
            let p = &d.nvidia_p2p_override;
            let panel = (p.status() == ldb_core::hardware::p2p::P2pStatus::NotEffective)
                .then(|| p.panel_lines());
            (p.summary_line(), panel)
        });
        let p2p = diagnostics.as_ref().map(|d| d.nvidia_p2p_override.clone());
        Startup {
            monitor,
            diagnostics,
            p2p,
            p2p_lines,
        }
    }

    /// The P2P panel before the dashboard takes the screen, and the startup
    /// warnings in the event log.
    pub(crate) fn announce(&self, live: &ldb_runner::Live) {
        if let Some((_, Some(panel))) = &self.p2p_lines {
            eprintln!("NVIDIA P2P override");
            for line in panel {
                eprintln!("  {line}");
            }
        }
        if let Some(w) = self.monitor.warning() {
            live.event(format!("startup WARNING {w}"));
        }
        if let Some((summary, panel)) = &self.p2p_lines {
            live.event(format!("startup NVIDIA P2P override: {summary}"));
            for line in panel.iter().flatten() {
                live.event(format!("startup   {line}"));
            }
        }
    }
}

/// The second stop: wait for a save in progress to finish (holding the save
/// lock so no other begins), give the terminal back and exit 130.
pub(crate) fn exit_now(save_lock: &Mutex<()>, output: &Path) -> ! {
    let _held = save_lock.lock().unwrap_or_else(|p| p.into_inner());
    ldb_tui::terminal::restore();
    eprintln!(
        "interrupted again: stopped at once; {} holds the last saved result (continue it with --resume)",
        output.display()
    );
    std::process::exit(exit::INTERRUPTED);
}
