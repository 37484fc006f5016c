//! The run: discovery, the scout, then either one fixed batch or the
//! adaptive search followed by collection at the best level. The document
//! is saved after every batch, so a stopped or killed run keeps what it
//! measured.

use std::sync::Arc;

use ldb_client::Http;
use ldb_client::stream::RunClock;
pub use ldb_eval::cstats::CsEvent;
use ldb_eval::cstats::{AdaptiveRule, CsDocument, CsRun, LevelSummary, Phase, summarize_runs};
use tokio_util::sync::CancellationToken;

use super::batch::{BatchEnv, BatchResult, run_batch};
use super::config::CsConfig;
use super::meta::metadata;
use crate::ctx::Hardware;
use crate::kvbudget::kv_budget;
use crate::live::Live;
use crate::run::RunError;

/// Inputs besides the configuration.
pub struct CsHooks {
    /// Cancelled on q / Ctrl-C / SIGTERM: streams stop, the result is kept.
    pub stop: CancellationToken,
    /// Atomic save of the document, after every batch.
    pub save: Box<dyn Fn(&CsDocument) + Send + Sync>,
    /// Progress for the display.
    pub progress: Arc<dyn Fn(CsEvent) + Send + Sync>,
    /// Hardware sampler.
    pub hardware: Option<Arc<dyn Hardware>>,
    /// The NVIDIA P2P override check, as in decode results (`None` when
    /// not made; written `null`).
    pub p2p: Option<ldb_core::hardware::P2pOverride>,
}

/// How the run ended.
#[derive(Debug)]
pub struct CsOutcome {
    /// The final document (also saved).
    pub doc: CsDocument,
    /// Stopped by the user.
    pub interrupted: bool,
}

struct State {
    doc: CsDocument,
    next_index: usize,
    exhausted: bool,
    dataset: Option<(usize, usize)>,
    hw_mark: Option<usize>,
}

impl State {
    fn save(&mut self, hooks: &CsHooks) {
        let ds = self.dataset.map(|(t, s)| (t, s, self.exhausted));
        self.doc.derive(ds);
        if let (Some(hw), Some(mark)) = (&hooks.hardware, self.hw_mark) {
            self.doc.hardware_run_summary = Some(hw.summary_since(mark));
        }
        (hooks.save)(&self.doc);
    }

    fn take(&mut self, r: BatchResult) -> Vec<CsRun> {
        self.next_index = r.next_index;
        self.exhausted |= r.exhausted;
        self.doc.runs.extend(r.runs.iter().cloned());
        r.runs
    }
}

/// Run the mode against the server in `cfg.base`.
pub async fn run_completion_stats(cfg: CsConfig, hooks: CsHooks) -> Result<CsOutcome, RunError> {
    let note = |s: String| (hooks.progress)(CsEvent::Note(s));
    let http = Http::new(
        &cfg.base.target.base_url,
        cfg.base.target.api_key.clone(),
        cfg.max_concurrency() + 2,
    )?;
    let (live, _rx) = Live::new();
    let disc = crate::run::discover_when_up(&http, &cfg.base.target, &live).await?;
    let kv = kv_budget(&cfg.base.kv, &disc, &http);
    note(format!(
        "server {} {} model {}",
        disc.engine.display_name(),
        disc.engine_version,
        disc.model
    ));
    for n in disc.notes.iter().chain(&kv.notes) {
        note(n.clone());
    }
    let cfg = Arc::new(cfg);
    let mut st = State {
        doc: CsDocument {
            metadata: metadata(&cfg, &disc, &kv, hooks.p2p.as_ref()),
            nvidia_p2p_override: hooks.p2p.clone(),
            methodology: ldb_eval::cstats::CsMethodology::standard(),
            ..CsDocument::default()
        },
        next_index: 0,
        exhausted: false,
        dataset: cfg
            .task
            .dataset
            .as_ref()
            .map(|d| (d.items_total, cfg.task.items.len())),
        hw_mark: hooks.hardware.as_ref().map(|h| h.mark()),
    };
    let progress = hooks.progress.clone();
    let env = BatchEnv {
        http,
        clock: RunClock::new(),
        cfg: cfg.clone(),
        model: disc.model.clone(),
        stop: hooks.stop.clone(),
        on_run: Arc::new(move |r: &CsRun| progress(CsEvent::Run(Box::new(r.clone())))),
        on_active: {
            let progress = hooks.progress.clone();
            Arc::new(move |a| progress(CsEvent::Active(Box::new(a))))
        },
    };
    if cfg.prefill_scout {
        (hooks.progress)(CsEvent::Batch {
            phase: Phase::PrefillScout,
            concurrency: 1,
            count: 1,
        });
        let r = run_batch(&env, Phase::PrefillScout, 1, 0, 1, Some(1)).await;
        st.doc.prefill_scout = r.runs.into_iter().next();
        st.save(&hooks);
    }
    match cfg.fixed_concurrency {
        Some(c) => fixed(&env, &hooks, &mut st, c).await,
        None => adaptive(&env, &hooks, &mut st).await,
    }
    let interrupted = hooks.stop.is_cancelled();
    st.doc.metadata.interrupted = interrupted;
    if st.exhausted {
        note("dataset_exhausted: every selected item was used".into());
    }
    st.save(&hooks);
    Ok(CsOutcome {
        doc: st.doc,
        interrupted,
    })
}

async fn batch(
    env: &BatchEnv,
    hooks: &CsHooks,
    st: &mut State,
    phase: Phase,
    c: usize,
    count: usize,
) -> Vec<CsRun> {
    (hooks.progress)(CsEvent::Batch {
        phase,
        concurrency: c,
        count,
    });
    let r = run_batch(env, phase, c, st.next_index, count, None).await;
    st.take(r)
}

async fn fixed(env: &BatchEnv, hooks: &CsHooks, st: &mut State, c: usize) {
    let runs = batch(env, hooks, st, Phase::Profile, c, env.cfg.fixed_runs()).await;
    st.doc.selected_concurrency = Some(c);
    let summary = summarize_runs(&runs);
    (hooks.progress)(level_event(c, Phase::Profile, &summary));
    st.doc.level_summaries.push(LevelSummary {
        concurrency: c,
        phase: Phase::Profile,
        summary,
        selected: true,
        improved: false,
    });
    st.save(hooks);
}

async fn adaptive(env: &BatchEnv, hooks: &CsHooks, st: &mut State) {
    let cfg = &env.cfg;
    let mut rule = AdaptiveRule::new(cfg.min_improvement, cfg.patience, cfg.auto_stop);
    for &c in &cfg.levels {
        if hooks.stop.is_cancelled() || st.exhausted {
            break;
        }
        let count = c * cfg.probe_waves;
        let runs = batch(env, hooks, st, Phase::Probe, c, count).await;
        if hooks.stop.is_cancelled() {
            // a cut level says nothing about its speed
            st.save(hooks);
            break;
        }
        let summary = summarize_runs(&runs);
        let rate = summary.aggregate_gen_tok_s;
        let v = rule.observe(c, rate);
        (hooks.progress)(CsEvent::Note(format!(
            "probe C={c}: {} of {} completed, aggregate {rate:.1} gen tok/s{}",
            summary.completed,
            runs.len(),
            if v.improved { " (best so far)" } else { "" }
        )));
        (hooks.progress)(CsEvent::Level {
            concurrency: c,
            phase: Phase::Probe,
            completed: summary.completed,
            attempted: summary.attempted,
            rate,
            improved: v.improved,
        });
        st.doc.level_summaries.push(LevelSummary {
            concurrency: c,
            phase: Phase::Probe,
            summary,
            selected: false,
            improved: v.improved,
        });
        st.doc.selected_concurrency = Some(rule.best_c());
        st.save(hooks);
        if v.stop {
            break;
        }
    }
    let best = rule.best_c();
    st.doc.selected_concurrency = Some(best);
    let mut collected: Vec<CsRun> = Vec::new();
    loop {
        let done = st
            .doc
            .runs
            .iter()
            .filter(|r| r.concurrency == best && r.completed())
            .count();
        if done >= cfg.min_results || hooks.stop.is_cancelled() || st.exhausted {
            break;
        }
        let runs = batch(env, hooks, st, Phase::Collect, best, cfg.min_results - done).await;
        let none_ok = !runs.iter().any(|r| r.ok);
        collected.extend(runs);
        st.save(hooks);
        if none_ok {
            (hooks.progress)(CsEvent::Note(format!(
                "collect at C={best}: a batch without a successful request; stopping"
            )));
            break;
        }
    }
    if !collected.is_empty() {
        let summary = summarize_runs(&collected);
        (hooks.progress)(level_event(best, Phase::Collect, &summary));
        st.doc.level_summaries.push(LevelSummary {
            concurrency: best,
            phase: Phase::Collect,
            summary,
            selected: true,
            improved: false,
        });
    }
}

fn level_event(c: usize, phase: Phase, s: &ldb_eval::cstats::RunSummary) -> CsEvent {
    CsEvent::Level {
        concurrency: c,
        phase,
        completed: s.completed,
        attempted: s.attempted,
        rate: s.aggregate_gen_tok_s,
        improved: false,
    }
}
