//! The completion-stats mode: its lowered settings and its [`Mode`]
//! implementation for the session driver (live view or progress lines, the
//! run, the paired comparison with a baseline, the report and the exit
//! code). The configuration itself is built in `cstats_config.rs`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ldb_eval::cstats::{CsDocument, CsRun, Phase};
use ldb_report::export;
use ldb_runner::cstats::{CsConfig, CsEvent, CsHooks, CsOutcome, run_completion_stats};

use crate::cli::BenchArgs;
use crate::config::ConfigError;
use crate::cstats_config::build_cs;
use crate::error::{AppError, exit};
use crate::session::{Mode, Saves, Session, StartupInputs};
use crate::target::Target;

/// The completion-stats mode, lowered from its flags.
pub(crate) struct CsSession {
    /// The configuration (final: pointed at its target).
    cfg: CsConfig,
    /// The server, or the simulator to start.
    target: Target,
    /// The startup's inputs.
    startup: StartupInputs,
    /// `--compare-baseline FILE` (read once already, while lowering).
    baseline: Option<PathBuf>,
    /// `--display-mode plain`: progress lines even on a terminal.
    plain: bool,
}

/// `--completion-stats` / `--test-profile` / `--profile-file`: every check.
pub(crate) fn lower(mut a: BenchArgs, argv: Vec<String>) -> Result<CsSession, AppError> {
    let cfg = build_cs(&mut a, argv).map_err(|ConfigError(e)| AppError::Config(e))?;
    // the baseline must be readable before anything is sent
    if let Some(path) = &a.compare_baseline {
        ldb_report::paired::load_runs(path).map_err(AppError::Config)?;
    }
    let target = Target::lower(a.sim.as_deref(), a.sim_engine.as_deref())?;
    let base = target.point(cfg.base)?;
    let startup = crate::invocation::startup_inputs(&a, &base.target.base_url);
    Ok(CsSession {
        cfg: CsConfig { base, ..cfg },
        target,
        startup,
        baseline: a.compare_baseline,
        plain: a.display_mode.as_deref() == Some("plain"),
    })
}

impl CsSession {
    /// Run it through the session driver.
    pub(crate) async fn drive(mut self) -> Result<i32, AppError> {
        let target = std::mem::replace(&mut self.target, Target::Server);
        crate::session::drive(self, target).await
    }
}

impl Mode for CsSession {
    type Measured = CsOutcome;

    fn most_streams(&self) -> u64 {
        self.cfg.max_concurrency() as u64
    }

    fn output(&self) -> &Path {
        &self.cfg.base.output.output
    }

    async fn before_startup(&mut self) -> Option<Result<i32, AppError>> {
        for line in config_lines(&self.cfg) {
            eprintln!("{line}");
        }
        None
    }

    fn startup_inputs(&self) -> StartupInputs {
        self.startup.clone()
    }

    async fn measure(&mut self, s: &Session) -> Result<CsOutcome, AppError> {
        let title = self.cfg.task.title.clone();
        // the live view when stdout is a terminal, plain lines otherwise
        let screen = !self.plain && ldb_tui::choose_mode(None) == ldb_tui::DisplayMode::Screen;
        let (view_tx, view_rx) = tokio::sync::watch::channel(ldb_eval::cstats::CsLive::new(&title));
        let ui = if screen {
            ldb_tui::cstats::spawn_cs(view_rx, s.control_tx.clone())
        } else {
            None
        };
        // the live view's hardware panel: the sampler's latest snapshot, read
        // at the view's own pace (the task ends with the run)
        let hw_feed = ui.is_some().then(|| {
            let (tx, monitor) = (view_tx.clone(), s.startup.monitor.clone());
            tokio::spawn(async move {
                loop {
                    let hw = monitor.live();
                    tx.send_modify(|v| v.hardware = hw);
                    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
                }
            })
        });
        let progress: Arc<dyn Fn(CsEvent) + Send + Sync> = if ui.is_some() {
            Arc::new(move |e: CsEvent| view_tx.send_modify(|v| v.apply(e)))
        } else {
            eprintln!(
                "{title}: {} @ {}",
                self.cfg
                    .base
                    .target
                    .model
                    .as_deref()
                    .unwrap_or("(first listed model)"),
                self.cfg.base.target.server_label
            );
            Arc::new(Progress::default().into_fn())
        };
        let told = progress.clone();
        s.on_first_stop(Arc::new(move || told(CsEvent::Stopping)));
        s.watch_stops();
        let hooks = CsHooks {
            stop: s.controls.stop.clone(),
            save: save_to(self.cfg.base.output.output.clone(), s.saves.clone()),
            progress,
            hardware: Some(s.hardware()),
            p2p: s.startup.p2p.clone(),
        };
        let result = run_completion_stats(self.cfg.clone(), hooks).await;
        if let Some(t) = hw_feed {
            t.abort();
        }
        if let Some(ui) = ui {
            ui.finish();
        }
        result.map_err(|e| AppError::Server(e.to_string()))
    }

    async fn finish(self, outcome: CsOutcome, s: &Session) -> Result<i32, AppError> {
        let output = &self.cfg.base.output.output;
        let mut doc = outcome.doc;
        // --compare-baseline: the paired comparison is embedded as `comparison`
        // and the file saved again; one that cannot be made (no common item) is
        // a warning, the run's own result stands.
        let mut comparison = None;
        if let Some(path) = self.baseline.as_deref() {
            match paired_comparison(path, &doc, output) {
                Ok(c) => {
                    doc.comparison = Some(c.clone());
                    if c.error.is_none() {
                        comparison = Some(c);
                    }
                    if let Err(e) = export::write_atomic(&export::Json, &doc, output) {
                        return Err(AppError::Output(e.to_string()));
                    }
                }
                Err(e) => eprintln!("warning: --compare-baseline: {e}"),
            }
        }
        let text = export::Text(ldb_report::text::TextOptions {
            width: crate::app::terminal_width(),
            show_capacity_limited_values: false,
            color: std::io::stdout().is_terminal(),
        });
        let mut out = std::io::stdout().lock();
        if outcome.interrupted {
            let _ = writeln!(out, "Interrupted by user. Saving partial results...");
        }
        let _ = export::write_to(&text, &doc, &mut out);
        if let Some(c) = &comparison {
            let _ = export::write_to(&text, c, &mut out);
        } else if let Some(e) = doc.comparison.as_ref().and_then(|c| c.error.as_deref()) {
            let _ = writeln!(out, "Paired comparison: {e}");
        }
        s.saves.failed()?;
        let _ = writeln!(out, "Results saved to {}", output.display());
        Ok(if outcome.interrupted {
            exit::INTERRUPTED
        } else if doc.all_summary.completed == 0 {
            exit::INVALID_CELLS
        } else {
            exit::OK
        })
    }
}

/// The configuration, told before the run starts (stderr).
fn config_lines(cfg: &ldb_runner::cstats::CsConfig) -> Vec<String> {
    let t = &cfg.task;
    let mut v = vec![
        format!("Configuration — {}", t.title),
        format!(
            "  Model: {} @ {}",
            cfg.base.target.model.as_deref().unwrap_or("(first listed)"),
            cfg.base.target.server_label
        ),
        format!("  Prompt: {}", t.prompt_source),
    ];
    if let Some(d) = &t.dataset {
        v.push(format!(
            "  Dataset: {} ({} items, sha256 {}…)",
            d.name,
            t.items.len(),
            d.sha256.chars().take(16).collect::<String>()
        ));
    }
    v.push(match cfg.fixed_concurrency {
        Some(c) => format!("  Concurrency: {c}"),
        None => format!(
            "  Concurrency: adaptive {}",
            cfg.levels
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    });
    let runs = if cfg.fixed_concurrency.is_some() {
        cfg.fixed_runs()
    } else {
        cfg.min_results
    };
    v.push(format!(
        "  Measured runs: {runs} | Max tokens: {}",
        cfg.max_tokens
            .map_or("omitted (no client cap)".to_owned(), |n| n.to_string())
    ));
    v.push(format!(
        "  Scoring: {}",
        t.scorer.as_ref().map_or("off".to_owned(), |s| s.describe())
    ));
    v
}

/// The paired per-item comparison of this run (the candidate) with a
/// baseline result file (docs/completion-stats.md § Paired comparison).
fn paired_comparison(
    baseline: &Path,
    doc: &CsDocument,
    output: &Path,
) -> Result<ldb_eval::paired::Comparison, String> {
    let current = serde_json::to_value(doc).map_err(|e| e.to_string())?;
    ldb_report::paired::compare_with_baseline(baseline, &current, &output.display().to_string())
}

/// The save hook: atomic write under the save lock; the first failure is
/// kept for the exit code.
fn save_to(output: PathBuf, saves: Saves) -> Box<dyn Fn(&CsDocument) + Send + Sync> {
    Box::new(move |doc| {
        saves.write(|| {
            export::write_atomic(&export::Json, doc, &output)
                .map(drop)
                .map_err(|e| e.to_string())
        })
    })
}

/// Plain progress lines on stderr: one per batch, one per finished request.
#[derive(Default)]
struct Progress {
    done: Mutex<(usize, usize)>,
}

impl Progress {
    fn into_fn(self) -> impl Fn(CsEvent) + Send + Sync {
        move |e| match e {
            CsEvent::Note(s) => eprintln!("  {s}"),
            CsEvent::Batch {
                phase,
                concurrency,
                count,
            } => {
                *self.done.lock().unwrap_or_else(|p| p.into_inner()) = (0, count);
                eprintln!("{} C={concurrency}: {count} request(s)", phase.as_str());
            }
            CsEvent::Run(r) => {
                let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
                d.0 += 1;
                eprintln!("  [{}/{}] {}", d.0, d.1, run_line(&r));
            }
            // the in-flight sample is for the live view only
            CsEvent::Level { .. } | CsEvent::Active(_) => {}
            CsEvent::Stopping => {
                eprintln!(
                    "stopping: the requests in flight are cancelled, the result so far is kept"
                )
            }
        }
    }
}

fn run_line(r: &CsRun) -> String {
    if r.phase == Phase::PrefillScout {
        return format!(
            "scout: {} prompt tok, TTFT {:.3}s",
            r.prompt_tokens.unwrap_or(0),
            r.ttft.unwrap_or(0.0)
        );
    }
    let verdict = match (&r.error, &r.score_label, r.cancelled) {
        (_, _, true) => "cancelled".to_owned(),
        (Some(e), _, _) => format!("ERR {e}"),
        (None, Some(l), _) => l.to_uppercase(),
        _ => "-".to_owned(),
    };
    let answer: String = r.final_answer.chars().take(80).collect();
    format!(
        "#{} {} tok, {:.1} tok/s, {verdict}: {answer}",
        r.run_index, r.completion_tokens, r.gen_tok_s
    )
}
