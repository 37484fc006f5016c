//! Wiring of the completion-stats mode: configuration, the shared startup
//! (simulator, hardware sampler, P2P check), stop signals, progress lines,
//! the run, the report and the result file.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use ldb_core::live::Control;
use ldb_eval::cstats::{CsDocument, CsRun, Phase};
use ldb_runner::cstats::{CsEvent, CsHooks, run_completion_stats};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::app::{
    MonitorAdapter, Startup, StopSignals, exit_now, start_builtin_sim, terminal_width,
};
use crate::cli::BenchArgs;
use crate::config::ConfigError;
use crate::cstats_config::build_cs;
use crate::error::{AppError, exit};

/// `--completion-stats` / `--test-profile` / `--profile-file`.
pub async fn run(mut a: BenchArgs, argv: Vec<String>) -> Result<i32, AppError> {
    let mut cfg = build_cs(&mut a, argv).map_err(|ConfigError(e)| AppError::Config(e))?;
    // the baseline must be readable before anything is sent
    let baseline = a.compare_baseline.clone();
    if let Some(path) = &baseline {
        ldb_report::paired::load_runs(path).map_err(AppError::Config)?;
    }
    let most = cfg.max_concurrency() as u64;
    let ends = if a.sim.is_some() { 2 } else { 1 };
    crate::fdlimit::ensure_open_files(
        ends * most + crate::fdlimit::BASE_FILES,
        &format!("C = {most}"),
    )?;
    let output = cfg.base.output.clone();
    ldb_report::json::prepare_output(&output).map_err(|e| AppError::Output(e.to_string()))?;
    let sim = match a.sim.clone() {
        Some(name) => Some(start_builtin_sim(&name, &mut a, &mut cfg.base).await?),
        None => None,
    };
    for line in config_lines(&cfg) {
        eprintln!("{line}");
    }
    let startup = Startup::collect(&a, &cfg.base).await;
    let stop = CancellationToken::new();
    let save_lock: Arc<Mutex<()>> = Arc::default();
    let save_error: Arc<Mutex<Option<String>>> = Arc::default();
    let title = cfg.task.title.clone();
    // the live view when stdout is a terminal, plain lines otherwise
    let screen = a.display_mode.as_deref() != Some("plain")
        && ldb_tui::choose_mode(None) == ldb_tui::DisplayMode::Screen;
    let (view_tx, view_rx) = tokio::sync::watch::channel(ldb_eval::cstats::CsLive::new(&title));
    let (ctl_tx, ctl_rx) = tokio::sync::mpsc::channel::<Control>(8);
    let ui = if screen {
        ldb_tui::cstats::spawn_cs(view_rx, ctl_tx.clone())
    } else {
        None
    };
    // the live view's hardware panel: the sampler's latest snapshot, read
    // at the view's own pace (the task ends with the run)
    let hw_feed = ui.is_some().then(|| {
        let (tx, monitor) = (view_tx.clone(), startup.monitor.clone());
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
            cfg.base.model.as_deref().unwrap_or("(first listed model)"),
            cfg.base.server_label
        );
        Arc::new(Progress::default().into_fn())
    };
    watch_stops(ctl_tx, ctl_rx, &stop, &save_lock, &output, progress.clone());
    let hooks = CsHooks {
        stop: stop.clone(),
        save: save_to(output.clone(), save_error.clone(), save_lock),
        progress,
        hardware: Some(Arc::new(MonitorAdapter(startup.monitor.clone()))),
        p2p: startup.p2p.clone(),
    };
    let result = run_completion_stats(cfg, hooks).await;
    if let Some(t) = hw_feed {
        t.abort();
    }
    if let Some(ui) = ui {
        ui.finish();
    }
    startup.monitor.stop();
    if let Some(s) = sim {
        s.shutdown().await;
    }
    let outcome = result.map_err(|e| AppError::Server(e.to_string()))?;
    let mut doc = outcome.doc;
    // --compare-baseline: the paired comparison is embedded as `comparison`
    // and the file saved again; one that cannot be made (no common item) is
    // a warning, the run's own result stands.
    let mut comparison = None;
    if let Some(path) = baseline.as_deref() {
        match paired_comparison(path, &doc, &output) {
            Ok(c) => {
                doc.comparison = Some(serde_json::to_value(&c).unwrap_or(Value::Null));
                if c.error.is_none() {
                    comparison = Some(c);
                }
                if let Err(e) = ldb_report::cstats::write_atomic(&output, &doc) {
                    return Err(AppError::Output(e.to_string()));
                }
            }
            Err(e) => eprintln!("warning: --compare-baseline: {e}"),
        }
    }
    let opts = ldb_report::text::TextOptions {
        width: terminal_width(),
        show_capacity_limited_values: false,
        color: std::io::stdout().is_terminal(),
    };
    let mut out = std::io::stdout().lock();
    if outcome.interrupted {
        let _ = writeln!(out, "Interrupted by user. Saving partial results...");
    }
    let _ = ldb_report::cstats::render(&doc, &opts, &mut out);
    if let Some(c) = &comparison {
        let _ = write!(out, "{}", ldb_report::text::render_paired(c, &opts));
    } else if let Some(e) = doc
        .comparison
        .as_ref()
        .and_then(|c| c.get("error"))
        .and_then(Value::as_str)
    {
        let _ = writeln!(out, "Paired comparison: {e}");
    }
    if let Some(e) = save_error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(AppError::Output(e));
    }
    let _ = writeln!(out, "Results saved to {}", output.display());
    Ok(if outcome.interrupted {
        exit::INTERRUPTED
    } else if doc.all_summary.completed == 0 {
        exit::INVALID_CELLS
    } else {
        exit::OK
    })
}

/// The configuration, told before the run starts (stderr).
fn config_lines(cfg: &ldb_runner::cstats::CsConfig) -> Vec<String> {
    let t = &cfg.task;
    let mut v = vec![
        format!("Configuration — {}", t.title),
        format!(
            "  Model: {} @ {}",
            cfg.base.model.as_deref().unwrap_or("(first listed)"),
            cfg.base.server_label
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

/// `q` in the live view, Ctrl-C, SIGTERM and SIGHUP stop the run softly
/// (the partial result is saved and reported, exit 130); a second stop
/// exits at once.
fn watch_stops(
    ctl_tx: tokio::sync::mpsc::Sender<Control>,
    mut ctl_rx: tokio::sync::mpsc::Receiver<Control>,
    stop: &CancellationToken,
    save_lock: &Arc<Mutex<()>>,
    output: &Path,
    progress: Arc<dyn Fn(CsEvent) + Send + Sync>,
) {
    let (stop, save_lock, output) = (stop.clone(), save_lock.clone(), output.to_path_buf());
    tokio::spawn(async move {
        while let Some(c) = ctl_rx.recv().await {
            if c != Control::Stop {
                continue;
            }
            if stop.is_cancelled() {
                exit_now(&save_lock, &output);
            }
            progress(CsEvent::Stopping);
            stop.cancel();
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
}

/// The save hook: atomic write under the save lock; the first failure is
/// kept for the exit code.
fn save_to(
    output: std::path::PathBuf,
    error: Arc<Mutex<Option<String>>>,
    lock: Arc<Mutex<()>>,
) -> Box<dyn Fn(&CsDocument) + Send + Sync> {
    Box::new(move |doc| {
        let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = ldb_report::cstats::write_atomic(&output, doc) {
            error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e.to_string());
        }
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
