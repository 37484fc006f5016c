//! The command line lowered once: [`Invocation::lower`] turns the parsed
//! flags into one value saying what this process does, with every
//! cross-flag check made inside its construction (a failure is one line and
//! exit code 2). Nothing after lowering reads `BenchArgs`, and the run
//! configurations it holds are final (the simulator's address included:
//! see `target.rs`).
//!
//! The checks run in the order they always have, so a command line with
//! two mistakes is told the same one as before.

use std::path::PathBuf;

use ldb_core::document::ResultDocument;
use serde_json::Value;

use crate::bench::BenchSession;
use crate::cli::{BenchArgs, Cli, Command};
use crate::config::{ConfigError, build};
use crate::cstats::CsSession;
use crate::error::{AppError, exit};
use crate::fabric_config::FabricPlan;
use crate::session::StartupInputs;
use crate::target::Target;

/// What this process does.
pub(crate) enum Invocation {
    /// `completions SHELL`.
    Completions(clap_complete::Shell),
    /// `man`.
    Man,
    /// `deploy k8s|slurm …`: print manifests or an sbatch script.
    Deploy(crate::deploy::DeployArgs),
    /// `sim …`: serve a simulator until Ctrl-C.
    Sim(crate::cli::SimArgs),
    /// `compare BASE NEW…`.
    Compare(crate::cli::CompareArgs),
    /// `report FILE…`.
    Report(crate::cli::ReportArgs),
    /// `merge SHARD…`: offline shards' records into one result.
    Merge(crate::merge::MergeArgs),
    /// `convert-trace --from aiperf|agentx INPUT…`: agent traces as our JSONL.
    ConvertTrace(crate::convert_trace::ConvertTraceArgs),
    /// `selftest`.
    Selftest(crate::cli::SelftestArgs),
    /// `cjk-watchdog`.
    CjkWatchdog(crate::cli::CjkWatchdogArgs),
    /// `--print-config`: the effective configuration as TOML.
    PrintConfig(String),
    /// `--compare-baseline A --compare-candidate B`: two files, no server.
    Paired(crate::paired::Standalone),
    /// `--amd-fabric-only` / `--p2pmark-only`: the diagnostics alone.
    FabricOnly {
        /// The diagnostics asked for.
        plan: FabricPlan,
        /// The fabric-only result file.
        output: PathBuf,
    },
    /// The concurrency matrix, request-count and open-loop rate runs (and
    /// `rerun`): the runner decides which from the configuration.
    Bench(Box<BenchSession>),
    /// `--completion-stats` / `--test-profile` / `--profile-file`.
    CompletionStats(Box<CsSession>),
}

impl Invocation {
    /// Lower the parsed command line (`argv`: as given, after `--config`).
    pub(crate) fn lower(cli: Cli, argv: Vec<String>) -> Result<Invocation, AppError> {
        Ok(match cli.command {
            Some(Command::Completions(a)) => Invocation::Completions(a.shell),
            Some(Command::Man) => Invocation::Man,
            Some(Command::Deploy(a)) => Invocation::Deploy(a),
            Some(Command::Sim(a)) => Invocation::Sim(a),
            Some(Command::Compare(a)) => Invocation::Compare(a),
            Some(Command::Report(a)) => Invocation::Report(a),
            Some(Command::Selftest(a)) => Invocation::Selftest(a),
            Some(Command::CjkWatchdog(a)) => Invocation::CjkWatchdog(a),
            Some(Command::Merge(a)) => Invocation::Merge(a),
            Some(Command::ConvertTrace(a)) => Invocation::ConvertTrace(a),
            Some(Command::Rerun(a)) => {
                let program = argv.first().cloned().unwrap_or_default();
                let (bench, argv, prior) = crate::rerun::prepare(&a, program)?;
                lower_bench(bench, argv, Some(prior))?
            }
            None => lower_bench(cli.bench, argv, None)?,
        })
    }

    /// Do it; the process's exit code.
    pub(crate) async fn execute(self) -> i32 {
        use crate::error::exit_with;
        match self {
            Invocation::Completions(shell) => crate::tools::completions(shell),
            Invocation::Man => crate::tools::man(),
            Invocation::Deploy(a) => crate::deploy::run(&a),
            Invocation::Sim(a) => crate::app::serve_sim(a).await,
            Invocation::Compare(a) => crate::compare::run(&a),
            Invocation::Report(a) => crate::report::run(&a),
            Invocation::Merge(a) => exit_with(crate::merge::run(&a)),
            Invocation::ConvertTrace(a) => exit_with(crate::convert_trace::run(&a)),
            Invocation::Selftest(a) => crate::selftest::run(&a).await,
            Invocation::CjkWatchdog(a) => crate::cjk_watchdog::run(a).await,
            Invocation::PrintConfig(toml) => {
                print!("{toml}");
                exit::OK
            }
            Invocation::Paired(p) => exit_with(p.run()),
            Invocation::FabricOnly { plan, output } => exit_with(
                crate::fabric::run_only(plan, &output, crate::app::terminal_width()).await,
            ),
            Invocation::Bench(b) => exit_with((*b).drive().await),
            Invocation::CompletionStats(c) => exit_with((*c).drive().await),
        }
    }
}

/// The benchmark's flags (no subcommand, or `rerun`), in the order the
/// checks have always run.
fn lower_bench(
    a: BenchArgs,
    argv: Vec<String>,
    prior: Option<ResultDocument>,
) -> Result<Invocation, AppError> {
    if a.print_config {
        return Ok(Invocation::PrintConfig(crate::effective::toml(&a, &argv)));
    }
    // the standalone paired comparison reads two files and contacts no server
    if a.compare_candidate.is_some() {
        return crate::paired::Standalone::lower(&a, &argv).map(Invocation::Paired);
    }
    // Every fabric flag is checked first, whatever the mode.
    let fabric = crate::fabric::checked_plan(&a.fabric)?;
    if fabric.only {
        return Ok(Invocation::FabricOnly {
            plan: fabric,
            output: a.output,
        });
    }
    if a.cstats.mode() {
        return crate::cstats::lower(a, argv).map(|c| Invocation::CompletionStats(Box::new(c)));
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
    let display = match a.display_mode.as_deref() {
        Some(m) => Some(crate::app::parse_mode(m).ok_or_else(|| {
            AppError::config(format!(
                "invalid --display-mode: {m:?} (use screen or plain)"
            ))
        })?),
        None => None,
    };
    let slo = crate::app::parse_slo(a.slo.as_deref(), a.slo_preset.as_deref())?;
    let effective = crate::effective::from_argv(&argv);
    let built = build(&a, a.sim.is_some(), argv).map_err(|ConfigError(e)| AppError::Config(e))?;
    let effective_config = crate::effective::recorded(effective, &built);
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
    let target = Target::lower(a.sim.as_deref(), a.sim_engine.as_deref())?;
    let cfg = target.point(ldb_runner::RunConfig {
        slo: ldb_runner::config::SloConfig {
            spec: slo,
            ..built.slo
        },
        output: ldb_runner::config::OutputConfig {
            effective_config,
            ..built.output
        },
        ..built
    })?;
    let startup = startup_inputs(&a, &cfg.target.base_url);
    let shard = crate::shard::lower(&a, &cfg)?;
    let coding_peak = a
        .coding_peak
        .then(|| ldb_runner::coding_peak::CodingPeakConfig {
            runs: a.coding_peak_runs,
            max_tokens: a.coding_peak_max_tokens,
            prompt: a.coding_peak_prompt.clone(),
            temperature: a.coding_peak_temperature,
        });
    Ok(Invocation::Bench(Box::new(BenchSession {
        cfg,
        target,
        startup,
        display,
        refresh_hz: a.refresh_rate.unwrap_or(ldb_tui::MAX_REFRESH_HZ),
        html: a.html,
        requests_jsonl: a.requests_jsonl,
        metrics_listen: a.metrics_listen,
        dry_run: a.dry_run,
        resume: a.resume,
        resumed: None,
        fabric,
        coding_peak,
        prior,
        metrics_listener: None,
        shard,
        leader: None,
    })))
}

/// What the startup records. `base_url`: where the run is pointed (for the
/// simulator, its address, which `startup_diagnostics.args.host` shows too).
pub(crate) fn startup_inputs(a: &BenchArgs, base_url: &str) -> StartupInputs {
    let host = if a.sim.is_some() {
        base_url.to_string()
    } else {
        a.host.clone()
    };
    StartupInputs {
        monitor: ldb_telemetry::MonitorConfig::from_flags(
            a.hw_monitor_interval,
            a.no_hw_monitor,
            a.hw_gpu_limit,
        ),
        args: args_for_diagnostics(a, host),
        base_url: base_url.to_string(),
    }
}

/// The flags recorded in `startup_diagnostics.args`. The API key is never
/// included, only whether one was given.
fn args_for_diagnostics(a: &BenchArgs, host: String) -> Vec<(String, Value)> {
    let s = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
    vec![
        ("host".into(), host.into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn lower(args: &[&str]) -> Result<Invocation, AppError> {
        let argv: Vec<String> = std::iter::once("llm-decode-bench")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        let cli = Cli::try_parse_from(&argv).expect("parses");
        Invocation::lower(cli, argv)
    }

    #[test]
    fn the_simulator_address_is_in_the_configuration_from_the_start() {
        let Ok(Invocation::Bench(b)) = lower(&["--sim", "quickstart", "--slo", "ttft_p99=2"])
        else {
            panic!("a benchmark");
        };
        assert!(b.target.in_process());
        assert!(
            b.cfg.target.base_url.starts_with("http://127.0.0.1:"),
            "{}",
            b.cfg.target.base_url
        );
        assert!(!b.cfg.target.base_url.ends_with(":0"));
        assert!(
            b.cfg
                .target
                .server_label
                .ends_with("(simulator: quickstart)")
        );
        assert_eq!(b.cfg.target.sim_scenario, "quickstart");
        assert!(
            b.cfg.slo.spec.is_some(),
            "the SLO is part of the built configuration"
        );
        assert!(!b.cfg.output.effective_config.is_empty());
        // the diagnostics record the simulator's address as the host
        assert_eq!(
            b.startup.args[0].1,
            Value::from(b.cfg.target.base_url.clone())
        );
    }

    #[test]
    fn each_mode_is_chosen_by_its_flags() {
        assert!(matches!(lower(&[]), Ok(Invocation::Bench(_))));
        assert!(matches!(
            lower(&["--print-config"]),
            Ok(Invocation::PrintConfig(_))
        ));
        assert!(matches!(
            lower(&["--compare-baseline", "a", "--compare-candidate", "b"]),
            Ok(Invocation::Paired(_))
        ));
        assert!(matches!(
            lower(&["--completion-stats", "--prompt", "hi"]),
            Ok(Invocation::CompletionStats(_))
        ));
        assert!(matches!(lower(&["man"]), Ok(Invocation::Man)));
    }

    #[test]
    fn cross_flag_mistakes_are_refused_while_lowering() {
        for (args, want) in [
            (&["--slo-search"][..], "invalid --slo-search"),
            (&["--display-mode", "fancy"], "invalid --display-mode"),
            (
                &["--compare-baseline", "a.json"],
                "--compare-baseline needs",
            ),
            (&["--sim", "no-such-scenario"], "unknown scenario"),
            (
                &["--sim", "quickstart", "--sim-engine", "x"],
                "invalid --sim-engine",
            ),
        ] {
            let Err(e) = lower(args) else {
                panic!("{args:?} lowers");
            };
            assert_eq!(e.exit_code(), exit::CONFIG, "{args:?}");
            assert!(e.to_string().contains(want), "{args:?}: {e}");
        }
    }
}
