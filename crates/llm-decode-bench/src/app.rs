//! Wiring: simulator, telemetry, dashboard, runner, report, result file.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use ldb_core::live::Control;
use ldb_core::result::CellStatus;
use ldb_runner::{Controls, Hardware, Live, RunHooks};
use ldb_telemetry::{HardwareMonitor, MonitorConfig, MonitorHandle};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::cli::{BenchArgs, SimArgs};
use crate::config::{ConfigError, build};

/// Process exit codes (see `cli::EXIT_CODES`).
pub mod exit {
    /// All cells valid.
    pub const OK: i32 = 0;
    /// Bad flags or configuration.
    pub const CONFIG: i32 = 2;
    /// Server unreachable or rejecting.
    pub const SERVER: i32 = 3;
    /// Some cells invalid.
    pub const INVALID_CELLS: i32 = 4;
    /// Result file not written.
    pub const OUTPUT: i32 = 5;
    /// Interrupted by the user.
    pub const INTERRUPTED: i32 = 130;
}

/// The runner's view of the telemetry monitor.
struct MonitorAdapter(MonitorHandle);

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
    if a.list {
        for n in ldb_sim::Scenario::builtin_names() {
            println!("{n}");
        }
        return exit::OK;
    }
    let personality = match a
        .engine
        .as_deref()
        .map(str::parse::<ldb_sim::Personality>)
        .transpose()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::CONFIG;
        }
    };
    let mut scenario = match ldb_sim::Scenario::load(&a.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::CONFIG;
        }
    };
    if let Some(seed) = a.seed {
        scenario.seed = seed;
    }
    let addr = match format!("{}:{}", a.host, a.port).parse() {
        Ok(a) => a,
        Err(_) => {
            eprintln!("error: invalid --host/--port: {}:{}", a.host, a.port);
            return exit::CONFIG;
        }
    };
    let sim = match ldb_sim::SimServer::start(scenario, personality, addr).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::CONFIG;
        }
    };
    println!(
        "simulated {} ({}) serving at {} — Ctrl-C to stop",
        sim.personality(),
        a.scenario,
        sim.base_url()
    );
    let _ = tokio::signal::ctrl_c().await;
    sim.shutdown().await;
    exit::OK
}

/// The benchmark.
pub async fn bench(mut a: BenchArgs, argv: Vec<String>) -> i32 {
    let sim_name = a.sim.clone();
    if let Some(m) = a.display_mode.as_deref()
        && parse_mode(m).is_none()
    {
        eprintln!("error: invalid --display-mode: {m:?} (use screen or plain)");
        return exit::CONFIG;
    }
    let mut cfg = match build(&a, sim_name.is_some(), argv.clone()) {
        Ok(c) => c,
        Err(ConfigError(e)) => {
            eprintln!("error: {e}");
            return exit::CONFIG;
        }
    };
    // The built-in simulator, in-process on a free loopback port.
    let mut sim = None;
    if let Some(name) = &sim_name {
        let personality = match a
            .sim_engine
            .as_deref()
            .map(str::parse::<ldb_sim::Personality>)
            .transpose()
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: invalid --sim-engine: {e}");
                return exit::CONFIG;
            }
        };
        let scenario = match ldb_sim::Scenario::load(name) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return exit::CONFIG;
            }
        };
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        match ldb_sim::SimServer::start(scenario, personality, addr).await {
            Ok(s) => {
                cfg.base_url = s.base_url();
                cfg.server_label = format!("{} (simulator: {name})", s.addr());
                cfg.sim_scenario = name.clone();
                a.host = s.base_url();
                sim = Some(s);
            }
            Err(e) => {
                eprintln!("error: cannot start the simulator: {e}");
                return exit::CONFIG;
            }
        }
    }

    if a.dry_run {
        return dry_run(&cfg).await;
    }

    // Starting the sampler and collecting diagnostics run commands with
    // timeouts; keep them off the async workers.
    let monitor_cfg =
        MonitorConfig::from_flags(a.hw_monitor_interval, a.no_hw_monitor, a.hw_gpu_limit);
    let monitor =
        match tokio::task::spawn_blocking(move || HardwareMonitor::start(monitor_cfg)).await {
            Ok(m) => m,
            Err(_) => HardwareMonitor::start(MonitorConfig::from_flags(0.0, true, 1)),
        };
    let args_json = args_for_diagnostics(&a);
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
    if let Some((_, Some(panel))) = &p2p_lines {
        // Shown before the dashboard takes the screen, and kept in the event log.
        eprintln!("NVIDIA P2P override");
        for line in panel {
            eprintln!("  {line}");
        }
    }

    let (live, rx) = Live::new();
    if let Some(w) = monitor.warning() {
        live.event(format!("startup WARNING {w}"));
    }
    if let Some((summary, panel)) = &p2p_lines {
        live.event(format!("startup NVIDIA P2P override: {summary}"));
        for line in panel.iter().flatten() {
            live.event(format!("startup   {line}"));
        }
    }
    let controls = Arc::new(Controls::default());
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Control>(8);
    let mode = ldb_tui::choose_mode(a.display_mode.as_deref().and_then(parse_mode));
    // stdin/stdout that are not terminals get plain mode and no key handling.
    let ui = ldb_tui::spawn(mode, rx, ctl_tx.clone(), ldb_tui::UiOptions::default());
    {
        let controls = controls.clone();
        tokio::spawn(async move {
            while let Some(c) = ctl_rx.recv().await {
                match c {
                    Control::Skip => controls.skip(),
                    Control::Stop => controls.stop.cancel(),
                }
            }
        });
    }
    {
        let tx = ctl_tx.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = tx.send(Control::Stop).await;
            }
        });
    }
    {
        let live = live.clone();
        let mon = monitor.clone();
        tokio::spawn(async move {
            loop {
                let hw = mon.live();
                live.update(|s| s.hardware = hw);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    let output = cfg.output.clone();
    let save_error: Arc<Mutex<Option<String>>> = Arc::default();
    let save_err2 = save_error.clone();
    let hooks = RunHooks {
        live: live.clone(),
        controls: controls.clone(),
        hardware: Some(Arc::new(MonitorAdapter(monitor.clone()))),
        diagnostics,
        p2p,
        save: Box::new(move |doc| {
            if let Err(e) = ldb_report::json::write_atomic(&output, doc) {
                *save_err2.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
            }
        }),
    };
    let show = cfg.show_capacity_limited_values;
    let output = cfg.output.clone();
    let result = ldb_runner::run(cfg, hooks).await;
    ui.finish().await;
    monitor.stop();
    if let Some(s) = sim {
        s.shutdown().await;
    }
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::SERVER;
        }
    };
    let width = terminal_width();
    let opts = ldb_report::text::TextOptions {
        width,
        show_capacity_limited_values: show,
        color: std::io::stdout().is_terminal(),
    };
    let mut out = std::io::stdout().lock();
    if outcome.interrupted {
        let _ = writeln!(out, "Interrupted by user. Saving partial results...");
    }
    let _ = ldb_report::text::render(&outcome.doc, &opts, &mut out);
    if let Some(e) = save_error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        eprintln!("error: {e}");
        return exit::OUTPUT;
    }
    let _ = writeln!(out, "Results saved to {}", output.display());
    if outcome.interrupted {
        return exit::INTERRUPTED;
    }
    let doc = &outcome.doc;
    let bad_cell = doc
        .results
        .iter()
        .chain(&doc.burst_results)
        .any(|c| matches!(c.ext.status, CellStatus::Error | CellStatus::NoTokens));
    // A prefill-only run is valid when it measured at least one row.
    let prefill_failed = doc.metadata.prefill_only
        && (doc.prefill.is_empty() || doc.prefill.values().all(|r| r.skipped));
    let invalid = bad_cell || prefill_failed;
    if invalid {
        exit::INVALID_CELLS
    } else {
        exit::OK
    }
}

fn parse_mode(s: &str) -> Option<ldb_tui::DisplayMode> {
    match s {
        "screen" | "live" => Some(ldb_tui::DisplayMode::Screen),
        "plain" => Some(ldb_tui::DisplayMode::Plain),
        _ => None,
    }
}

/// Report width: `COLUMNS` when set, else the terminal's width, else 120.
fn terminal_width() -> u16 {
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
            a.duration.map_or(Value::Null, Value::from),
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
/// request is sent.
async fn dry_run(cfg: &ldb_runner::config::RunConfig) -> i32 {
    match ldb_runner::run::dry_run(cfg).await {
        Ok((events, plan)) => {
            for e in events {
                println!("{e}");
            }
            println!("{plan}");
            println!("dry run: nothing was generated; drop --dry-run to run this plan");
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::SERVER
        }
    }
}
