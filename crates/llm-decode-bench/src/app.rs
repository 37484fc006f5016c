//! Wiring: simulator, telemetry, dashboard, runner, report, result file.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use ldb_core::live::Control;
use ldb_core::result::CellStatus;
use ldb_core::slo::SloSpec;
use ldb_runner::{Controls, Hardware, Live, RunHooks};
use ldb_telemetry::{HardwareMonitor, MonitorConfig, MonitorHandle};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::cli::{BenchArgs, SimArgs};
use crate::config::{ConfigError, build};
use crate::error::{AppError, exit_with};

pub use crate::error::exit;

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
}

/// `llm-decode-bench sim …`: serve until Ctrl-C.
pub async fn serve_sim(a: SimArgs) -> i32 {
    exit_with(serve_sim_until_stopped(a).await)
}

async fn serve_sim_until_stopped(a: SimArgs) -> Result<i32, AppError> {
    if a.list {
        for n in ldb_sim::Scenario::builtin_names() {
            println!("{n}");
        }
        return Ok(exit::OK);
    }
    let personality = a
        .engine
        .as_deref()
        .map(str::parse::<ldb_sim::Personality>)
        .transpose()
        .map_err(AppError::config)?;
    let mut scenario = ldb_sim::Scenario::load(&a.scenario).map_err(AppError::config)?;
    if let Some(seed) = a.seed {
        scenario.seed = seed;
    }
    // A socket per running sequence: thousands of them pass the usual soft
    // limit of 1,024. Raised when allowed; otherwise the simulator still
    // serves (it queues what it cannot accept), with the reason said once.
    if let Err(e) = crate::fdlimit::ensure_open_files(
        u64::from(scenario.scheduler.max_running) + crate::fdlimit::BASE_FILES,
        &format!("a simulator of {} running", scenario.scheduler.max_running),
    ) {
        eprintln!("warning: {e}");
    }
    let addr = format!("{}:{}", a.host, a.port)
        .parse()
        .map_err(|_| AppError::config(format!("invalid --host/--port: {}:{}", a.host, a.port)))?;
    let sim = ldb_sim::SimServer::start(scenario, personality, addr)
        .await
        .map_err(AppError::config)?;
    println!(
        "simulated {} ({}) serving at {} — Ctrl-C to stop",
        sim.personality(),
        a.scenario,
        sim.base_url()
    );
    let _ = tokio::signal::ctrl_c().await;
    sim.shutdown().await;
    Ok(exit::OK)
}

/// The benchmark.
pub async fn bench(a: BenchArgs, argv: Vec<String>) -> i32 {
    exit_with(run_bench(a, argv, None).await)
}

/// `rerun`: the benchmark with the flags of `prior`, said where it differs.
pub async fn bench_again(
    a: BenchArgs,
    argv: Vec<String>,
    prior: ldb_core::document::ResultDocument,
) -> i32 {
    exit_with(run_bench(a, argv, Some(prior)).await)
}

async fn run_bench(
    mut a: BenchArgs,
    argv: Vec<String>,
    prior: Option<ldb_core::document::ResultDocument>,
) -> Result<i32, AppError> {
    if a.print_config {
        return Ok(crate::effective::print(&a, &argv));
    }
    // the standalone paired comparison reads two files and contacts no server
    if a.compare_candidate.is_some() {
        return crate::paired::run_standalone(&a, &argv);
    }
    // Every fabric flag is checked first, whatever the mode.
    let fabric = crate::fabric::checked_plan(&a.fabric)?;
    if fabric.only {
        return crate::fabric::run_only(fabric, &a.output, terminal_width()).await;
    }
    if a.cstats.mode() {
        return crate::cstats::run(a, argv).await;
    }
    if let Some(flag) = a.cstats.stray_flag() {
        return Err(AppError::config(format!(
            "{flag} only applies to the completion-stats mode (add --completion-stats)"
        )));
    }
    if a.compare_baseline.is_some() {
        return Err(AppError::config(
            "--compare-baseline needs --compare-candidate FILE or a completion-stats run \
             (--completion-stats, --prompt, --test-profile)",
        ));
    }
    if let Some(m) = a.display_mode.as_deref()
        && parse_mode(m).is_none()
    {
        return Err(AppError::config(format!(
            "invalid --display-mode: {m:?} (use screen or plain)"
        )));
    }
    let slo = parse_slo(a.slo.as_deref(), a.slo_preset.as_deref())?;
    let effective = crate::effective::from_argv(&argv);
    let mut cfg = build(&a, a.sim.is_some(), argv).map_err(|ConfigError(e)| AppError::Config(e))?;
    cfg.effective_config = crate::effective::recorded(effective, &cfg);
    cfg.slo = slo.clone();
    if slo.is_none() {
        for (given, flag) in [
            (a.slo_search, "--slo-search"),
            (a.slo_bisect, "--slo-bisect"),
        ] {
            if given {
                return Err(AppError::Config(format!(
                    "invalid {flag}: needs targets to judge: add --slo SPEC or --slo-preset NAME"
                )));
            }
        }
    }
    let most = cfg.concurrency.iter().copied().max().unwrap_or(1);
    // a stream holds a socket, two when the simulator runs in this process
    let ends = if a.sim.is_some() { 2 } else { 1 };
    crate::fdlimit::ensure_open_files(
        ends * u64::from(most) + crate::fdlimit::BASE_FILES,
        &format!("C = {most}"),
    )?;
    // --shards: checked before anything is sent; a follower's run is its own.
    let leader = match crate::shard::setup(&a, &cfg, a.dry_run).await? {
        crate::shard::Role::Follower(f) => return crate::shard::follow(f, &cfg).await,
        crate::shard::Role::Offline(o) => return crate::shard::offline(o, cfg).await,
        crate::shard::Role::Leader(l) => Some(l),
        crate::shard::Role::Alone => None,
    };
    let resume = if a.resume {
        Some(load_for_resume(&cfg.output)?)
    } else {
        None
    };
    if !a.dry_run {
        // Before anything is sent: a run whose result cannot be saved is wasted.
        ldb_report::json::prepare_output(&cfg.output)
            .map_err(|e| AppError::Output(e.to_string()))?;
        // The HTML and JSONL files are extras: a path that cannot be written
        // is said now, and the run goes on.
        for (flag, path) in [("--html", &a.html), ("--requests-jsonl", &a.requests_jsonl)] {
            if let Some(Err(e)) = path.as_deref().map(ldb_report::json::prepare_output) {
                eprintln!("warning: {flag}: {e}; the run goes on without it");
            }
        }
    }
    let metrics_listener = match (&a.metrics_listen, a.dry_run) {
        (Some(spec), false) => Some(crate::metrics_listen::bind(spec).await?),
        _ => None,
    };
    let sim = match a.sim.clone() {
        Some(name) => Some(start_builtin_sim(&name, &mut a, &mut cfg).await?),
        None => None,
    };
    if a.dry_run {
        if let Some(prior) = &prior {
            crate::rerun::announce(&cfg, prior, None).await;
        }
        let r = dry_run(&cfg, resume.as_ref()).await;
        if let Some(s) = sim {
            s.shutdown().await;
        }
        return r;
    }
    let mut startup = Startup::collect(&a, &cfg).await;
    if let Some(prior) = &prior {
        let gpus = startup.monitor.latest().map(|h| h.gpu_count() as u64);
        crate::rerun::announce(&cfg, prior, gpus).await;
    }
    let fabric_line = crate::fabric::before_bench(&fabric, &mut startup.diagnostics).await;
    let (live, rx) = Live::new();
    let metrics_server = metrics_listener.map(|l| crate::metrics_listen::serve(l, live.clone()));
    startup.announce(&live);
    if let Some(line) = fabric_line {
        live.event(line);
    }
    let controls = Arc::new(Controls::default());
    let save_lock: Arc<Mutex<()>> = Arc::default();
    let ui = spawn_ui(&a, rx, &controls, &save_lock, &cfg.output);
    publish_hardware(&live, &startup.monitor);
    let save_error: Arc<Mutex<Option<String>>> = Arc::default();
    let html = a.html.clone().map(|path| LiveHtml {
        name: ldb_report::html::name_of(&cfg.output),
        path,
        live: live.clone(),
        show_capacity_limited_values: cfg.show_capacity_limited_values,
        error: Arc::default(),
    });
    let html_error = html.as_ref().map(|h| h.error.clone());
    let hooks = RunHooks {
        live: live.clone(),
        controls: controls.clone(),
        hardware: Some(Arc::new(MonitorAdapter(startup.monitor.clone()))),
        diagnostics: startup.diagnostics,
        p2p: startup.p2p,
        save: atomic_save(
            cfg.output.clone(),
            save_error.clone(),
            save_lock,
            slo.clone(),
            html,
        ),
        resume,
    };
    let opts = ldb_report::text::TextOptions {
        width: terminal_width(),
        show_capacity_limited_values: cfg.show_capacity_limited_values,
        color: std::io::stdout().is_terminal(),
    };
    let output = cfg.output.clone();
    let server = (cfg.base_url.clone(), cfg.api_key.clone());
    if let Some(l) = &leader {
        ldb_runner::shard::install(l.clone());
        l.plan_started();
    }
    let result = ldb_runner::run(cfg, hooks).await;
    if let Some(l) = &leader {
        l.finish().await;
    }
    ui.finish().await;
    if let Some(task) = metrics_server {
        task.abort();
    }
    startup.monitor.stop();
    // The coding peak needs the server after the report; the simulator stays
    // up until then.
    let mut outcome = match result {
        Ok(o) => o,
        Err(e) => {
            if let Some(s) = sim {
                s.shutdown().await;
            }
            return Err(run_error(e));
        }
    };
    // The same verdicts the saved file carries (the save hook judged its copy).
    if let Some(spec) = &slo {
        ldb_core::slo::evaluate(spec, &mut outcome.doc);
    }
    let mut out = std::io::stdout().lock();
    if outcome.interrupted {
        let _ = writeln!(out, "Interrupted by user. Saving partial results...");
    }
    let _ = ldb_report::text::render(&outcome.doc, &opts, &mut out);
    report_extras(&a, &outcome.doc, html_error.as_deref(), &mut out);
    if let Some(e) = save_error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(AppError::Output(e));
    }
    let _ = writeln!(out, "Results saved to {}", output.display());
    if a.coding_peak && (outcome.interrupted || outcome.server_down.is_some()) {
        let _ = writeln!(out, "Coding peak not run: the matrix did not finish.");
    }
    let peak = if a.coding_peak && !outcome.interrupted && outcome.server_down.is_none() {
        drop(out);
        Some(
            crate::coding_peak::run(&a, &server, &mut outcome.doc, &controls, &output, &opts).await,
        )
    } else {
        None
    };
    if let Some(s) = sim {
        s.shutdown().await;
    }
    if let Some(code) = peak.transpose()?.flatten() {
        return Ok(code);
    }
    if let Some(code) = crate::shard::leader_exit(leader.as_deref(), &outcome.doc) {
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

/// The built-in simulator, in-process on a free loopback port; the run is
/// pointed at it.
pub(crate) async fn start_builtin_sim(
    name: &str,
    a: &mut BenchArgs,
    cfg: &mut ldb_runner::config::RunConfig,
) -> Result<ldb_sim::SimHandle, AppError> {
    let personality = a
        .sim_engine
        .as_deref()
        .map(str::parse::<ldb_sim::Personality>)
        .transpose()
        .map_err(|e| AppError::config(format!("invalid --sim-engine: {e}")))?;
    let scenario = ldb_sim::Scenario::load(name).map_err(AppError::config)?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let s = ldb_sim::SimServer::start(scenario, personality, addr)
        .await
        .map_err(|e| AppError::config(format!("cannot start the simulator: {e}")))?;
    cfg.base_url = s.base_url();
    cfg.server_label = format!("{} (simulator: {name})", s.addr());
    cfg.sim_scenario = name.to_string();
    a.host = s.base_url();
    Ok(s)
}

/// What is gathered before the server is contacted: the hardware sampler,
/// the host diagnostics and the NVIDIA P2P check.
pub(crate) struct Startup {
    pub(crate) monitor: MonitorHandle,
    diagnostics: Value,
    pub(crate) p2p: Value,
    p2p_lines: Option<(String, Option<Vec<String>>)>,
}

impl Startup {
    pub(crate) async fn collect(a: &BenchArgs, cfg: &ldb_runner::config::RunConfig) -> Startup {
        // Starting the sampler and collecting diagnostics run commands with
        // timeouts; keep them off the async workers.
        let monitor_cfg =
            MonitorConfig::from_flags(a.hw_monitor_interval, a.no_hw_monitor, a.hw_gpu_limit);
        let monitor =
            match tokio::task::spawn_blocking(move || HardwareMonitor::start(monitor_cfg)).await {
                Ok(m) => m,
                Err(_) => HardwareMonitor::start(MonitorConfig::from_flags(0.0, true, 1)),
            };
        let args_json = args_for_diagnostics(a);
        let diag_url = ldb_core::redact::redact_url(&cfg.base_url);
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
        let diagnostics = diagnostics.map_or(Value::Null, |d| d.to_json());
        let p2p = diagnostics
            .get("nvidia_p2p_override")
            .cloned()
            .unwrap_or(Value::Null);
        Startup {
            monitor,
            diagnostics,
            p2p,
            p2p_lines,
        }
    }

    /// The P2P panel before the dashboard takes the screen, and the startup
    /// warnings in the event log.
    fn announce(&self, live: &Live) {
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
fn load_for_resume(
    output: &std::path::Path,
) -> Result<ldb_core::document::ResultDocument, AppError> {
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

/// The dashboard (or plain progress) and the controls: keys, and Ctrl-C,
/// SIGTERM and SIGHUP as Stop. A second Stop exits at once (exit code 130)
/// once no save is in progress, so the file on disk is the last complete save.
fn spawn_ui(
    a: &BenchArgs,
    rx: tokio::sync::watch::Receiver<ldb_core::live::LiveSnapshot>,
    controls: &Arc<Controls>,
    save_lock: &Arc<Mutex<()>>,
    output: &std::path::Path,
) -> ldb_tui::UiHandle {
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Control>(8);
    let mode = ldb_tui::choose_mode(a.display_mode.as_deref().and_then(parse_mode));
    // stdin/stdout that are not terminals get plain mode and no key handling.
    let opts = ldb_tui::UiOptions {
        refresh_hz: a.refresh_rate.unwrap_or(ldb_tui::MAX_REFRESH_HZ),
        ..ldb_tui::UiOptions::default()
    };
    let ui = ldb_tui::spawn(mode, rx, ctl_tx.clone(), opts);
    let controls = controls.clone();
    let (save_lock, output) = (save_lock.clone(), output.to_path_buf());
    tokio::spawn(async move {
        while let Some(c) = ctl_rx.recv().await {
            match c {
                Control::Skip => controls.skip(),
                Control::Stop if controls.stop.is_cancelled() => exit_now(&save_lock, &output),
                Control::Stop => controls.stop.cancel(),
            }
        }
    });
    tokio::spawn(async move {
        let mut signals = StopSignals::new();
        while signals.next().await {
            if ctl_tx.send(Control::Stop).await.is_err() {
                break;
            }
        }
    });
    ui
}

/// Ctrl-C (SIGINT), SIGTERM and SIGHUP. The streams are made once: a signal
/// arriving between two waits is then still seen.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    pub(crate) fn new() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// The next stop signal; false when none can be received.
    pub(crate) async fn next(&mut self) -> bool {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
                match s {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            }
            if self.int.is_none() && self.term.is_none() && self.hup.is_none() {
                return false;
            }
            tokio::select! {
                r = recv(&mut self.int) => r.is_some(),
                r = recv(&mut self.term) => r.is_some(),
                r = recv(&mut self.hup) => r.is_some(),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }
}

/// The second stop: wait for a save in progress to finish (holding the save
/// lock so no other begins), give the terminal back and exit 130.
pub(crate) fn exit_now(save_lock: &Mutex<()>, output: &std::path::Path) -> ! {
    let _held = save_lock.lock().unwrap_or_else(|p| p.into_inner());
    ldb_tui::terminal::restore();
    eprintln!(
        "interrupted again: stopped at once; {} holds the last saved result (continue it with --resume)",
        output.display()
    );
    std::process::exit(exit::INTERRUPTED);
}

/// Hardware readings into the live view once a second.
fn publish_hardware(live: &Live, monitor: &MonitorHandle) {
    let (live, mon) = (live.clone(), monitor.clone());
    tokio::spawn(async move {
        loop {
            let hw = mon.live();
            live.update(|s| s.hardware = hw);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// `--slo` over `--slo-preset` (its keys win), checked before anything is sent.
pub(crate) fn parse_slo(
    spec: Option<&str>,
    preset: Option<&str>,
) -> Result<Option<SloSpec>, AppError> {
    let explicit = spec
        .map(SloSpec::parse)
        .transpose()
        .map_err(|e| AppError::Config(e.to_string()))?;
    let preset = preset
        .map(ldb_core::slo::preset)
        .transpose()
        .map_err(|e| AppError::Config(e.to_string()))?;
    Ok(match (preset, explicit) {
        (Some(p), Some(e)) => Some(p.overridden_by(&e)),
        (p, e) => e.or(p),
    })
}

/// `--html` on a run: where the page goes and how a failed write is told.
struct LiveHtml {
    path: std::path::PathBuf,
    /// The series name of this run in the page (the result file's stem).
    name: String,
    live: Live,
    show_capacity_limited_values: bool,
    /// The first failed write (told once in the event log, then at the end).
    error: Arc<Mutex<Option<String>>>,
}

impl LiveHtml {
    /// Writes the page for `doc`; a failure is a warning, never the run's end.
    fn write(&self, doc: &ldb_core::document::ResultDocument) {
        let inputs = [ldb_report::html::Input {
            name: &self.name,
            doc,
        }];
        let opts = ldb_report::html::HtmlOptions {
            show_capacity_limited_values: self.show_capacity_limited_values,
        };
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        match ldb_report::html::write_atomic(&self.path, &inputs, &opts) {
            Ok(()) => *error = None,
            Err(e) => {
                if error.is_none() {
                    self.live
                        .event(format!("WARNING cannot write the HTML report: {e}"));
                }
                *error = Some(e.to_string());
            }
        }
    }
}

/// The runner's save hook: an atomic write of the result file under the
/// save lock (see [`exit_now`]). A failed save leaves the previous file as
/// it was; the first failure is kept for the exit code. With `--slo`, each
/// save judges a copy of the document, so a file read mid-run carries the
/// verdicts so far. With `--html`, the page is rewritten (atomically too)
/// after the JSON.
fn atomic_save(
    output: std::path::PathBuf,
    error: Arc<Mutex<Option<String>>>,
    lock: Arc<Mutex<()>>,
    slo: Option<SloSpec>,
    html: Option<LiveHtml>,
) -> Box<dyn Fn(&ldb_core::document::ResultDocument) + Send + Sync> {
    Box::new(move |doc| {
        let judged = slo.as_ref().map(|spec| {
            let mut d = doc.clone();
            ldb_core::slo::evaluate(spec, &mut d);
            d
        });
        let doc = judged.as_ref().unwrap_or(doc);
        let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = ldb_report::json::write_atomic(&output, doc) {
            error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e.to_string());
        }
        if let Some(h) = &html {
            h.write(doc);
        }
    })
}

/// After the report: where the HTML page and the request samples went, or
/// why they did not (a warning; the exit code does not change).
fn report_extras(
    a: &BenchArgs,
    doc: &ldb_core::document::ResultDocument,
    html_error: Option<&Mutex<Option<String>>>,
    out: &mut impl Write,
) {
    if let (Some(path), Some(err)) = (&a.html, html_error) {
        match err.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
            None => {
                let _ = writeln!(out, "HTML report written to {}", path.display());
            }
            Some(e) => eprintln!("warning: the HTML report was not written: {e}"),
        }
    }
    if let Some(path) = &a.requests_jsonl {
        match ldb_report::jsonl::write_atomic(path, doc) {
            Ok(n) => {
                let _ = writeln!(out, "{n} request samples written to {}", path.display());
            }
            Err(e) => eprintln!("warning: the request samples were not written: {e}"),
        }
    }
}

/// A failed or empty cell, or a prefill-only run that measured no row.
fn run_invalid(doc: &ldb_core::document::ResultDocument) -> bool {
    let bad_cell = doc
        .results
        .iter()
        .chain(&doc.burst_results)
        .any(|c| matches!(c.ext.status, CellStatus::Error | CellStatus::NoTokens));
    let prefill_failed = doc.metadata.prefill_only
        && (doc.prefill.is_empty() || doc.prefill.values().all(|r| r.skipped));
    bad_cell || prefill_failed
}

fn parse_mode(s: &str) -> Option<ldb_tui::DisplayMode> {
    match s {
        "screen" | "live" => Some(ldb_tui::DisplayMode::Screen),
        "plain" => Some(ldb_tui::DisplayMode::Plain),
        _ => None,
    }
}

/// Report width: `COLUMNS` when set, else the terminal's width, else 120.
pub(crate) fn terminal_width() -> u16 {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| {
            std::io::stdout()
                .is_terminal()
                .then(|| crossterm::terminal::size().ok().map(|(w, _)| w))
                .flatten()
        })
        .unwrap_or(120)
}

/// The flags recorded in `startup_diagnostics.args`. The API key is never
/// included, only whether one was given.
fn args_for_diagnostics(a: &BenchArgs) -> Vec<(String, Value)> {
    let s = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
    vec![
        ("host".into(), a.host.clone().into()),
        ("port".into(), a.port.map_or(Value::Null, Value::from)),
        (
            "api_key".into(),
            Value::from(if a.api_key.as_deref().is_some_and(|k| !k.is_empty()) {
                "<redacted>"
            } else {
                ""
            }),
        ),
        ("model".into(), s(&a.model)),
        ("concurrency".into(), s(&a.concurrency)),
        ("contexts".into(), s(&a.contexts)),
        (
            "max_tokens".into(),
            a.max_tokens.map_or(Value::Null, Value::from),
        ),
        (
            "duration".into(),
            a.duration.map_or(Value::Null, |d| match d {
                crate::cli::DurationArg::Seconds(v) => Value::from(v),
                crate::cli::DurationArg::Auto => Value::from("auto"),
            }),
        ),
        ("prefill_contexts".into(), s(&a.prefill_contexts)),
        ("prefill_metric".into(), a.prefill_metric.clone().into()),
        ("skip_prefill".into(), a.skip_prefill.into()),
        ("dcp_size".into(), a.dcp_size.into()),
        ("kv_budget".into(), a.kv_budget.into()),
        ("request_count".into(), a.request_count.into()),
        ("warmup_request_count".into(), a.warmup_request_count.into()),
        ("run_burst".into(), a.run_burst.into()),
        ("standalone_prefill".into(), a.standalone_prefill.into()),
        ("prefill_only".into(), a.prefill_only.into()),
        ("sim".into(), s(&a.sim)),
    ]
}

/// `--dry-run`: what the run would do, from discovery alone; no generation
/// request is sent. With `--resume`, what the file holds is marked as carried over.
async fn dry_run(
    cfg: &ldb_runner::config::RunConfig,
    resume: Option<&ldb_core::document::ResultDocument>,
) -> Result<i32, AppError> {
    let (events, plan) = ldb_runner::run::dry_run(cfg, resume)
        .await
        .map_err(run_error)?;
    for e in events {
        println!("{e}");
    }
    println!("{plan}");
    println!("dry run: nothing was generated; drop --dry-run to run this plan");
    Ok(exit::OK)
}
