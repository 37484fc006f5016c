//! Helpers shared by the subcommands: `sim` (serve until Ctrl-C), the
//! `--slo` and `--display-mode` parsers, the report width. The benchmark's
//! modes live in `bench.rs` and `cstats.rs`, driven by `session.rs`.

use std::io::IsTerminal;

use ldb_core::slo::SloSpec;

use crate::cli::SimArgs;
use crate::error::{AppError, exit_with};

pub use crate::error::exit;

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
    a.cache.apply(&mut scenario);
    if let Some(b) = a.max_num_batched_tokens {
        let cap = scenario.scheduler.max_running;
        if b <= cap {
            return Err(AppError::config(format!(
                "invalid --max-num-batched-tokens: {b} leaves no room for a prompt beside {cap} \
                 decodes (use more than the scenario's max_running, {cap})"
            )));
        }
        scenario.scheduler.max_num_batched_tokens = Some(b);
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
    // Ctrl-C, SIGTERM or SIGHUP: close the listener and the streams in order
    crate::stop_signals::until_stopped(std::future::pending::<()>()).await;
    sim.shutdown().await;
    Ok(exit::OK)
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

/// `--display-mode`: `screen` (or `live`) or `plain`.
pub(crate) fn parse_mode(s: &str) -> Option<ldb_tui::DisplayMode> {
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
