//! A whole run: discovery and the plan, prompts, then the phases (prefill,
//! decode warmup, the matrix, burst), each reporting to the recorder.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::discovery::{Discovery, discover};
use ldb_client::scrape::{ScrapePace, Scraper};
use ldb_client::stream::RunClock;
use ldb_client::{ClientError, Http};
use ldb_core::document::{Metadata, ResultDocument, StartupDiagnostics};
use ldb_core::hardware::P2pOverride;
use ldb_core::live::LiveEvent;
use ldb_core::tokens::format_context;

use crate::config::{RunConfig, TargetConfig};
use crate::ctx::{Controls, Hardware, RunCtx};
use crate::kvbudget::{KvBudget, kv_budget};
use crate::live::Live;
use crate::matrix::{burst_matrix, decode_matrix, decode_warmup};
use crate::plan::{RunPlan, mark_carried, plan};
use crate::prefill_phase::prefill_phase;
use crate::prompts::{PromptPlan, size_prompts};
use crate::recorder::{Recorder, SaveFn};
use crate::resume::{resumed_document, setting_differences};
use crate::shard::CellExecutor;
pub use crate::startup::limits;
use crate::startup::{metadata, record_prompts, startup_events};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server could not be reached or answered wrongly.
    #[error(transparent)]
    Server(#[from] ClientError),
    /// The first generation request failed in a way every request would.
    #[error("{0}")]
    Preflight(String),
    /// `--resume`: the file was made against another server or with other
    /// settings (one line listing the differences).
    #[error("{0}")]
    Resume(String),
}

/// How the run ended.
#[derive(Debug)]
pub struct RunOutcome {
    /// The final document.
    pub doc: ResultDocument,
    /// The user stopped the run.
    pub interrupted: bool,
    /// The server stopped answering and did not come back within
    /// `--server-down-grace`: why the run ended (exit code 3).
    pub server_down: Option<String>,
}

/// Inputs besides the configuration.
pub struct RunHooks {
    /// Live view publisher.
    pub live: Live,
    /// User controls.
    pub controls: Arc<Controls>,
    /// Hardware telemetry.
    pub hardware: Option<Arc<dyn Hardware>>,
    /// Startup diagnostics (already redacted; `None` when not collected).
    pub diagnostics: Option<StartupDiagnostics>,
    /// NVIDIA P2P override check (`None` when not made).
    pub p2p: Option<P2pOverride>,
    /// Called with the document after every phase and cell (atomic save).
    pub save: SaveFn,
    /// `--resume`: the result file being continued, as read.
    pub resume: Option<ResultDocument>,
}

pub use crate::plan::test_order;

/// The fabric diagnostics measured before the run travel in the startup
/// diagnostics (which keep copies, as the reference's did); the document
/// gets them and their statuses. A resumed file keeps its own blocks unless
/// this run measured again.
fn fabric_blocks(doc: &mut ResultDocument, diagnostics: Option<&StartupDiagnostics>) {
    if let Some((p2p, cpu)) = diagnostics.map(StartupDiagnostics::fabric_blocks) {
        if let Some(b) = p2p {
            doc.p2pmark = b.clone();
        }
        if let Some(b) = cpu {
            doc.amd_fabric = b.clone();
        }
    }
    doc.metadata.p2pmark_status = doc.p2pmark.status.as_str().to_string();
    doc.metadata.amd_fabric_status = doc.amd_fabric.status.as_str().to_string();
}

/// Discovery, retried while the server is still starting (connection
/// refused, HTTP 502/503/504, no answer) for up to `--wait-for-server`
/// seconds; any other failure, or the time running out, is returned at once.
pub(crate) async fn discover_when_up(
    http: &Http,
    target: &TargetConfig,
    live: &Live,
) -> Result<Discovery, ldb_client::ClientError> {
    use ldb_client::ClientError;
    let start = std::time::Instant::now();
    let mut told = false;
    loop {
        let err = match discover(http, target.model.as_deref()).await {
            Ok(d) => return with_api(http, target, d).await,
            Err(e) => e,
        };
        let starting = matches!(
            &err,
            ClientError::Connect { .. }
                | ClientError::Timeout { .. }
                | ClientError::Status {
                    status: 502..=504,
                    ..
                }
        );
        let left = target.wait_for_server - start.elapsed().as_secs_f64();
        if !starting || left <= 0.0 {
            return Err(err);
        }
        if !told {
            live.event(format!(
                "server not ready ({err}); waiting up to {:.0} s",
                target.wait_for_server
            ));
            told = true;
        }
        tokio::time::sleep(Duration::from_secs_f64(left.min(2.0))).await;
    }
}

/// Probe the APIs the server serves, refuse `--api` for one it lacks (a
/// one-line error naming the API and its path, before any request is
/// measured), and make the client speak the chosen one.
async fn with_api(
    http: &Http,
    target: &TargetConfig,
    mut d: Discovery,
) -> Result<Discovery, ldb_client::ClientError> {
    d.apis_served = ldb_client::api_probe::probe_apis(http).await;
    if !d.apis_served.contains(&target.api) {
        return Err(ldb_client::api_probe::not_served(http, target.api));
    }
    http.set_api(target.api);
    Ok(d)
}

/// `--dry-run`: discovery (no generation request, no prompt sizing) and the
/// plan the run would follow; with `resume`, the cells and rows the file
/// already holds are marked as carried over. Returns the startup event lines
/// and the plan.
pub async fn dry_run(
    cfg: &RunConfig,
    resume: Option<&ResultDocument>,
) -> Result<(Vec<String>, RunPlan), RunError> {
    let (live, _rx) = Live::new();
    let http = Http::new(&cfg.target.base_url, cfg.target.api_key.clone(), 2)?;
    live.event(format!("startup server={}", cfg.target.server_label));
    let disc = discover_when_up(&http, &cfg.target, &live).await?;
    let kv = kv_budget(&cfg.kv, &disc, &http);
    startup_events(&live, &disc, &kv);
    let mut p = plan(cfg, limits(&disc, &kv));
    if let Some(prior) = resume {
        let md = metadata(cfg, &disc, &kv, p.decode_warmup.unwrap_or(0));
        check_settings(cfg, &prior.metadata, &md)?;
        mark_carried(&mut p, cfg, prior);
    }
    Ok((live.events(), p))
}

/// `rerun`: the plan this configuration gets from the server now, and the
/// metadata it would record, for [`crate::rerun::differences`].
pub async fn preview(cfg: &RunConfig) -> Result<(RunPlan, Metadata), RunError> {
    let (live, _rx) = Live::new();
    let http = Http::new(&cfg.target.base_url, cfg.target.api_key.clone(), 2)?;
    let disc = discover_when_up(&http, &cfg.target, &live).await?;
    let kv = kv_budget(&cfg.kv, &disc, &http);
    let p = plan(cfg, limits(&disc, &kv));
    let md = metadata(cfg, &disc, &kv, p.decode_warmup.unwrap_or(0));
    Ok((p, md))
}

/// `--resume` refused: the file and this run differ in a compared setting.
fn check_settings(cfg: &RunConfig, saved: &Metadata, now: &Metadata) -> Result<(), RunError> {
    let diffs = setting_differences(saved, now);
    if diffs.is_empty() {
        return Ok(());
    }
    Err(RunError::Resume(format!(
        "--resume: {} was made with other settings than this run ({}); rerun the command \
         that wrote it, or drop --resume to start over",
        cfg.output.output.display(),
        diffs.join("; ")
    )))
}

/// Run the benchmark in this process alone: [`run_with`] a local executor.
pub async fn run(cfg: RunConfig, hooks: RunHooks) -> Result<RunOutcome, RunError> {
    run_with(cfg, hooks, CellExecutor::Local).await
}

/// Run the benchmark: discovery and the plan, prompts, then the phases in
/// order, every fact going through the recorder; `executor` says whether
/// the cells are measured here alone or dealt out to shards.
pub async fn run_with(
    cfg: RunConfig,
    mut hooks: RunHooks,
    executor: CellExecutor,
) -> Result<RunOutcome, RunError> {
    let (rc, disc, kv) = start(cfg, &hooks, executor).await?;
    let mut plan = plan(&rc.cfg, limits(&disc, &kv));
    let mut md = metadata(&rc.cfg, &disc, &kv, plan.decode_warmup.unwrap_or(0));
    let prior = hooks.resume.take();
    if let Some(prior) = &prior {
        if let Err(e) = check_settings(&rc.cfg, &prior.metadata, &md) {
            rc.scraper.stop();
            return Err(e);
        }
        mark_carried(&mut plan, &rc.cfg, prior);
    }
    let prompts = match rc.cfg.replay {
        Some(_) => crate::replay::unsized_prompts(),
        None => sized_prompts(&rc, &disc, &plan).await,
    };
    record_prompts(&mut md, &prompts);
    crate::interference::prepare(&rc, &prompts, limits(&disc, &kv));
    md.prefix_cache = Some(crate::prefix_run::start_prefix_cache(&rc, &disc, &prompts).await);
    let mut doc = match prior {
        Some(prior) => {
            announce_resume(&rc, &plan);
            resumed_document(prior, md, &plan, unix_now())
        }
        None => ResultDocument {
            metadata: md,
            ..ResultDocument::default()
        },
    };
    doc.startup_diagnostics = hooks.diagnostics.clone();
    doc.nvidia_p2p_override = hooks.p2p.clone();
    doc.metadata.startup_diagnostics_available = hooks.diagnostics.is_some();
    fabric_blocks(&mut doc, hooks.diagnostics.as_ref());
    doc.metadata.nvidia_p2p_override_effective = hooks.p2p.as_ref().is_some_and(|p| p.effective);
    let request_mode = rc.cfg.matrix.request_count > 0;
    let mut rec = Recorder::new(
        doc,
        rc.live.clone(),
        hooks.save,
        rc.hardware.clone(),
        request_mode,
    );
    rec.stamp_energy(crate::energy::settings(&rc));
    rec.show_carried(&plan);
    rec.watch_faults(rc.faults.clone());
    if rc.cfg.replay.is_some() {
        crate::replay::run(&rc, &disc, &mut rec).await;
        return Ok(end_run(&rc, rec, "run complete"));
    }
    if let Err(e) = prefill_phase(&rc, &plan, &prompts, &mut rec).await {
        rc.scraper.stop();
        return Err(e);
    }
    if rc.cfg.prefill.prefill_only {
        return Ok(end_run(&rc, rec, "prefill-only run complete"));
    }
    decode_warmup(&rc, &plan, &prompts, &mut rec).await;
    if rc.cfg.open_loop.is_on() {
        crate::open_loop::rate_matrix(&rc, &plan, &prompts, &mut rec).await;
        return Ok(end_run(&rc, rec, "run complete"));
    }
    decode_matrix(&rc, &plan, &prompts, &mut rec).await;
    if rc.cfg.burst.run_burst && !request_mode {
        burst_matrix(&rc, &rc.cfg.burst, &plan, &prompts, &mut rec).await;
    }
    Ok(end_run(&rc, rec, "run complete"))
}

/// The resume in the event log: what the file holds and what is left.
fn announce_resume(rc: &RunCtx, plan: &RunPlan) {
    let carried = plan.cells.iter().filter(|c| c.carried.is_some()).count();
    let left = plan.cells_to_measure().count();
    rc.live.event(format!(
        "resuming {}: {carried} cells and {} prefill rows carried over, {left} cells to measure",
        rc.cfg.output.output.display(),
        plan.prefill_carried.len(),
    ));
}

/// Seconds since the Unix epoch (0 when the clock is before it).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Discovery, the KV budget, the scraper and the live view's header: the
/// run context every phase works in.
pub(crate) async fn start(
    cfg: RunConfig,
    hooks: &RunHooks,
    executor: CellExecutor,
) -> Result<(RunCtx, Discovery, KvBudget), RunError> {
    let live = hooks.live.clone();
    let clock = RunClock::new();
    let max_c = cfg.matrix.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let http = Http::new(&cfg.target.base_url, cfg.target.api_key.clone(), max_c + 20)?;
    live.event(format!("startup server={}", cfg.target.server_label));
    let mut disc = discover_when_up(&http, &cfg.target, &live).await?;
    // --metrics-url: the replicas' metrics and KV capacity, summed
    let replicas = crate::replicas::discover(&cfg, &mut disc, &live).await?;
    let kv = kv_budget(&cfg.kv, &disc, &http);
    startup_events(&live, &disc, &kv);
    let scraper = Scraper::start_replicas(
        http.clone(),
        disc.engine,
        clock,
        ScrapePace {
            idle: Duration::from_secs_f64(cfg.timing.scrape_interval),
            measuring: (cfg.timing.metrics_interval > 0.0)
                .then(|| Duration::from_secs_f64(cfg.timing.metrics_interval)),
        },
        disc.metrics_available,
        disc.attn_tp_size,
        replicas,
    );
    live.send(LiveEvent::RunPlanned(Box::new(crate::live::layout(
        &cfg, &disc, kv.budget,
    ))));
    let rc = RunCtx {
        http,
        scraper,
        engine: disc.engine,
        metrics: disc.metrics_available,
        model: disc.model.clone(),
        clock,
        live,
        controls: hooks.controls.clone(),
        hardware: hooks.hardware.clone(),
        prefill_rate: Mutex::new(None),
        faults: Default::default(),
        sent_prompts: Default::default(),
        prefix: Default::default(),
        probe: Default::default(),
        executor,
        cfg,
    };
    Ok((rc, disc, kv))
}

/// Size the prompts the plan will send.
pub(crate) async fn sized_prompts(rc: &RunCtx, disc: &Discovery, plan: &RunPlan) -> PromptPlan {
    let needed = &plan.prompt_contexts;
    rc.live.event(format!(
        "calibrating prompt sizes up to {}",
        format_context(needed.last().copied().unwrap_or(0))
    ));
    let prompts = size_prompts(
        &rc.http,
        disc,
        needed,
        rc.cfg.prefill.calibration_context,
        rc.cfg.prefill.calibration_cache.as_deref(),
        !rc.cfg.prefill.estimate_only,
        (
            rc.cfg.prefix_cache.shared_prefix_tokens,
            rc.cfg.prefix_cache.groups(),
        ),
    )
    .await;
    for n in &prompts.notes {
        rc.live.event(format!("startup {n}"));
    }
    prompts
}

/// Close the run: stop scraping, mark the live view done, save the final document.
fn end_run(rc: &RunCtx, mut rec: Recorder, done_event: &str) -> RunOutcome {
    rec.note_unknown_events(rc.http.unknown_events());
    let interrupted = rc.controls.stop.is_cancelled();
    rc.scraper.stop();
    rc.live.send(LiveEvent::RunEnded);
    crate::server_watch::note_metrics(rc);
    let server_down = crate::server_watch::gone(rc);
    rc.live.event(if interrupted {
        "run stopped by the user"
    } else if server_down.is_some() {
        "run ended: the server is down"
    } else {
        done_event
    });
    RunOutcome {
        doc: rec.close(interrupted),
        interrupted,
        server_down,
    }
}

#[cfg(test)]
mod fabric_tests {
    use super::*;
    use ldb_core::document::{FabricBlock, FabricStatus};

    #[test]
    fn measured_blocks_reach_the_document_and_a_resumed_file_keeps_its_own() {
        let mut doc = ResultDocument::default();
        let diag = StartupDiagnostics {
            p2pmark: Some(FabricBlock::with_status(FabricStatus::NotRun)),
            amd_fabric: Some(FabricBlock::with_status(FabricStatus::Timeout)),
            ..StartupDiagnostics::default()
        };
        fabric_blocks(&mut doc, Some(&diag));
        assert_eq!(doc.amd_fabric.status, FabricStatus::Timeout);
        assert_eq!(doc.p2pmark, FabricBlock::default(), "written as not_run");
        assert_eq!(
            (
                doc.metadata.p2pmark_status.as_str(),
                doc.metadata.amd_fabric_status.as_str()
            ),
            ("not_run", "timeout")
        );
        // a resumed run that measured nothing keeps the file's block
        let not_run = StartupDiagnostics {
            amd_fabric: Some(FabricBlock::with_status(FabricStatus::NotRun)),
            ..StartupDiagnostics::default()
        };
        fabric_blocks(&mut doc, Some(&not_run));
        assert_eq!(doc.metadata.amd_fabric_status, "timeout");
        fabric_blocks(&mut doc, None);
        assert_eq!(doc.amd_fabric.status, FabricStatus::Timeout);
    }
}
