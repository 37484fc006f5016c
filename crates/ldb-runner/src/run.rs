//! A whole run: discovery, KV budget, prompts, prefill, the decode matrix.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::discovery::{Discovery, discover};
use ldb_client::scrape::Scraper;
use ldb_client::stream::{CellCounters, RunClock, SharedWindow, StreamEnv};
use ldb_client::{ClientError, Http};
use ldb_core::document::{Metadata, ResultDocument};
use ldb_core::kv::{Infeasible, check};
use ldb_core::live::{MatrixCell, MatrixCellState, Phase, PrefillRow};
use ldb_core::result::{CellResult, CellStatus, PrefillEntry};
use ldb_core::tokens::{format_context, thousands};
use serde_json::Value;

use crate::burst::{BurstSpec, MODE_BURST, MODE_REQUEST_COUNT, burst_counts, run_burst_cell};
use crate::cell::{CellSpec, drain, measure_cell, run_cell};
use crate::config::RunConfig;
use crate::ctx::{Controls, Hardware, RunCtx};
use crate::kvbudget::{KvBudget, kv_budget};
use crate::live::Live;
use crate::methodology::methodology;
use crate::plan::{RunPlan, ServerLimits, SkippedPrefill, plan, warmup_context};
use crate::prefill::{entry, probe, validated_probe};
use crate::prompts::{PromptPlan, size_prompts};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The server could not be reached or answered wrongly.
    #[error(transparent)]
    Server(#[from] ClientError),
    /// The first generation request failed in a way every request would.
    #[error("{0}")]
    Preflight(String),
}

/// How the run ended.
#[derive(Debug)]
pub struct RunOutcome {
    /// The final document.
    pub doc: ResultDocument,
    /// The user stopped the run.
    pub interrupted: bool,
}

/// Inputs besides the configuration.
pub struct RunHooks {
    /// Live view publisher.
    pub live: Live,
    /// User controls.
    pub controls: Arc<Controls>,
    /// Hardware telemetry.
    pub hardware: Option<Arc<dyn Hardware>>,
    /// Startup diagnostics (already redacted).
    pub diagnostics: Value,
    /// NVIDIA P2P override check.
    pub p2p: Value,
    /// Called with the document after every phase and cell (atomic save).
    pub save: Box<dyn Fn(&ResultDocument) + Send + Sync>,
}

pub use crate::plan::test_order;

/// Discovery, retried while the server is still starting (connection
/// refused, HTTP 502/503/504, no answer) for up to `--wait-for-server`
/// seconds; any other failure, or the time running out, is returned at once.
async fn discover_when_up(
    http: &Http,
    cfg: &RunConfig,
    live: &Live,
) -> Result<Discovery, ldb_client::ClientError> {
    use ldb_client::ClientError;
    let start = std::time::Instant::now();
    let mut told = false;
    loop {
        let err = match discover(http, cfg.model.as_deref()).await {
            Ok(d) => return Ok(d),
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
        let left = cfg.wait_for_server - start.elapsed().as_secs_f64();
        if !starting || left <= 0.0 {
            return Err(err);
        }
        if !told {
            live.event(format!(
                "server not ready ({err}); waiting up to {:.0} s",
                cfg.wait_for_server
            ));
            told = true;
        }
        tokio::time::sleep(Duration::from_secs_f64(left.min(2.0))).await;
    }
}

/// `--dry-run`: discovery (no generation request, no prompt sizing) and the
/// plan the run would follow. Returns the startup event lines and the plan.
pub async fn dry_run(cfg: &RunConfig) -> Result<(Vec<String>, RunPlan), RunError> {
    let (live, _rx) = Live::new();
    let http = Http::new(&cfg.base_url, cfg.api_key.clone(), 2)?;
    live.event(format!("startup server={}", cfg.server_label));
    let disc = discover_when_up(&http, cfg, &live).await?;
    let kv = kv_budget(cfg, &disc, &http);
    startup_events(&live, &disc, &kv);
    Ok((live.events(), plan(cfg, limits(&disc, &kv))))
}

/// Run the benchmark.
pub async fn run(cfg: RunConfig, hooks: RunHooks) -> Result<RunOutcome, RunError> {
    let live = hooks.live.clone();
    let clock = RunClock::new();
    let max_c = cfg.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let http = Http::new(&cfg.base_url, cfg.api_key.clone(), max_c + 20)?;
    live.event(format!("startup server={}", cfg.server_label));
    let disc = discover_when_up(&http, &cfg, &live).await?;
    let kv = kv_budget(&cfg, &disc, &http);
    startup_events(&live, &disc, &kv);
    let scraper = Scraper::start(
        http.clone(),
        disc.engine,
        clock,
        Duration::from_secs_f64(cfg.scrape_interval),
        disc.metrics_available,
    );
    live.update(|s| {
        s.model = disc.model.clone();
        s.engine = disc.engine.display_name().into();
        s.server = cfg.server_label.clone();
        s.kv_budget = kv.budget;
        s.concurrencies = cfg.concurrency.clone();
        s.contexts = cfg.contexts.clone();
        // --prefill-only runs no decode cell.
        let cells = if cfg.prefill_only {
            vec![]
        } else {
            test_order(&cfg.concurrency, &cfg.contexts)
        };
        s.matrix = cells
            .into_iter()
            .map(|(c, x)| MatrixCell {
                context: x,
                concurrency: c,
                state: MatrixCellState::Pending,
            })
            .collect();
    });
    let rc = RunCtx {
        http: http.clone(),
        scraper: scraper.clone(),
        engine: disc.engine,
        metrics: disc.metrics_available,
        model: disc.model.clone(),
        clock,
        live: live.clone(),
        controls: hooks.controls.clone(),
        hardware: hooks.hardware.clone(),
        prefill_rate: Mutex::new(None),
        cfg,
    };
    let cfg = &rc.cfg;
    let plan = plan(cfg, limits(&disc, &kv));
    let warm_ctx = warmup_context(cfg, limits(&disc, &kv));
    let needed = &plan.prompt_contexts;
    live.event(format!(
        "calibrating prompt sizes up to {}",
        format_context(needed.last().copied().unwrap_or(0))
    ));
    let prompts = size_prompts(
        &http,
        &disc,
        needed,
        cfg.calibration_context,
        cfg.calibration_cache.as_deref(),
    )
    .await;
    for n in &prompts.notes {
        live.event(format!("startup {n}"));
    }

    let mut doc = ResultDocument {
        metadata: metadata(cfg, &disc, &kv, &prompts, warm_ctx),
        startup_diagnostics: hooks.diagnostics.clone(),
        nvidia_p2p_override: hooks.p2p.clone(),
        ..ResultDocument::default()
    };
    doc.metadata.startup_diagnostics_available = hooks.diagnostics.is_object();
    doc.metadata.nvidia_p2p_override_effective = hooks
        .p2p
        .get("effective")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let finish = |doc: &mut ResultDocument, status: &str| {
        doc.metadata.timestamp = chrono::Local::now()
            .format("%Y-%m-%dT%H:%M:%S%.6f")
            .to_string();
        doc.metadata.run_status = status.into();
        doc.event_log = live.events();
        if let Some(h) = &rc.hardware {
            doc.hardware_run_summary = serde_json::to_value(h.summary_since(0)).unwrap_or_default();
        }
        let spec_present = doc.results.iter().any(|c| c.spec.steps_per_s > 0.0);
        let request_mode = rc.cfg.request_count > 0;
        doc.methodology = methodology(
            &doc.metadata.prefill_mode,
            !doc.prefill.is_empty(),
            !doc.results.is_empty() && !request_mode,
            !doc.burst_results.is_empty() || (request_mode && !doc.results.is_empty()),
            spec_present,
        );
        (hooks.save)(doc);
    };
    finish(&mut doc, "in_progress");

    // Prefill: JIT warmup, prefill warmup, scout-only extras.
    live.update(|s| s.phase = Phase::Prefill);
    let env = StreamEnv {
        http: http.clone(),
        clock,
        window: Arc::new(SharedWindow::default()),
        counters: Arc::new(CellCounters::default()),
        cancel: rc.controls.stop.child_token(),
        text_sink: None,
        path: "/v1/chat/completions",
    };
    live.event("decode warmup start");
    let jit = probe(
        &env,
        &rc.model,
        &prompts.messages(0, "jit"),
        &rc.controls.stop,
    )
    .await;
    // A route or key problem would fail every cell the same way: stop here
    // with the server's answer instead of producing a matrix of ERROR cells.
    if let Some(e) = jit.error.as_ref().filter(|e| e.is_fatal()) {
        scraper.stop();
        return Err(RunError::Preflight(e.to_string()));
    }
    // Prefill contexts beyond the prompt limit: recorded skips, decided before sending.
    for sk in &plan.prefill_skipped {
        live.event(format!(
            "prefill skipped ctx={}: {}",
            format_context(sk.context),
            sk.reason
        ));
        doc.prefill.insert(sk.context, skipped_prefill(sk));
    }
    if let Some(w) = plan.prefill_warmup {
        live.event(format!("prefill warmup start ctx={}", format_context(w)));
        let _ = probe(
            &env,
            &rc.model,
            &prompts.messages(w, "warm-prefill"),
            &rc.controls.stop,
        )
        .await;
        live.event(format!("prefill warmup done ctx={}", format_context(w)));
    }
    for &x in &plan.scout_only {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let row = scout_only(&rc, &env, &prompts, x).await;
        doc.prefill.insert(x, row);
        finish(&mut doc, "in_progress");
    }

    // Standalone cold prefill profile.
    for &x in &plan.standalone {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let row = crate::standalone::profile(&rc, &env, &prompts, x).await;
        doc.prefill.insert(x, row);
        finish(&mut doc, "in_progress");
    }
    if cfg.prefill_only {
        return Ok(end_run(&rc, doc, &finish, "prefill-only run complete"));
    }

    // Hidden decode warmup.
    if cfg.decode_warmup_seconds > 0.0 && !rc.controls.stop.is_cancelled() {
        live.update(|s| s.phase = Phase::DecodeWarmup);
        live.event(format!(
            "decode warmup start C=1 ctx={} {}s",
            format_context(warm_ctx),
            cfg.decode_warmup_seconds
        ));
        let spec = CellSpec {
            concurrency: 1,
            context: warm_ctx,
            messages: prompts.messages(warm_ctx, &format!("warm-decode{warm_ctx}")),
            duration: cfg.decode_warmup_seconds,
            record_prefill: false,
        };
        let _ = run_cell(&rc, spec).await;
        live.event(format!(
            "decode warmup done C=1 ctx={}",
            format_context(warm_ctx)
        ));
    }

    // The matrix.
    let phase = if cfg.request_count > 0 {
        Phase::Burst
    } else {
        Phase::Decode
    };
    live.update(|s| s.phase = phase);
    let mut recorded: Vec<u64> = Vec::new();
    let t_matrix = clock.now();
    let total = plan.cells.len() as f64;
    for (idx, planned) in plan.cells.iter().enumerate() {
        let (c, x) = (planned.concurrency, planned.context);
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let done = idx as f64;
        let elapsed = clock.now() - t_matrix;
        live.update(|s| {
            s.elapsed = clock.now();
            s.eta = (done > 0.0).then(|| elapsed / done * (total - done));
            set_cell(s, c, x, MatrixCellState::Running);
        });
        let cell = match &planned.skip {
            Some(inf) => skip_cell(&live, c, x, inf),
            None => {
                let record = plan.integrated_prefill.contains(&x) && !recorded.contains(&x);
                let out = if cfg.request_count > 0 {
                    let spec = BurstSpec {
                        concurrency: c,
                        context: x,
                        messages: prompts.messages(x, &format!("ctx{x}")),
                        requests: cfg.request_count,
                        warmup: cfg.warmup_request_count,
                        mode: MODE_REQUEST_COUNT,
                        record_prefill: record,
                    };
                    run_burst_cell(&rc, spec).await
                } else {
                    let spec = CellSpec {
                        concurrency: c,
                        context: x,
                        messages: prompts.messages(x, &format!("ctx{x}")),
                        duration: cfg.duration,
                        record_prefill: record,
                    };
                    measure_cell(&rc, spec).await
                };
                if let Some(p) = out.prefill {
                    recorded.push(x);
                    doc.prefill.insert(x, p);
                }
                out.cell
            }
        };
        if let Some(p) = cell
            .latency
            .input_seq_len_avg
            .gt(&0.0)
            .then_some(cell.latency.input_seq_len_avg)
        {
            let served = p.round() as u64;
            let key = x.to_string();
            doc.metadata
                .prompt_tokens_by_context
                .entry(key.clone())
                .or_insert(served);
            if !doc
                .metadata
                .prompt_tokens_served_by_context
                .contains_key(&key)
            {
                let sized = doc.metadata.prompt_tokens_by_context.get(&key).copied();
                if sized.is_some_and(|t| t != served) {
                    live.event(format!(
                        "context {}: the server counted {served} prompt tokens, sizing counted {}",
                        format_context(x),
                        sized.unwrap_or(0)
                    ));
                }
                doc.metadata
                    .prompt_tokens_served_by_context
                    .insert(key, served);
            }
        }
        if doc.metadata.usage_mode.is_empty()
            && !cell.ext.usage_mode.is_empty()
            && !cell.ext.status.is_skip()
            && cell.ext.status != CellStatus::Error
        {
            doc.metadata.usage_mode = cell.ext.usage_mode.clone();
        }
        live.update(|s| set_cell(s, c, x, done_state(&cell)));
        let stopped = cell.ext.status == CellStatus::SkippedUser && rc.controls.stop.is_cancelled();
        if !stopped {
            doc.results.push(cell);
        }
        finish(&mut doc, "in_progress");
        if rc.cfg.cell_pause_seconds > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(rc.cfg.cell_pause_seconds)).await;
        }
    }
    if cfg.run_burst && cfg.request_count == 0 {
        burst_matrix(&rc, &prompts, &kv, disc.model_context, &mut doc, &finish).await;
    }
    Ok(end_run(&rc, doc, &finish, "run complete"))
}

/// Close the run: stop scraping, mark the live view done, save the final document.
fn end_run(
    rc: &RunCtx,
    mut doc: ResultDocument,
    finish: &impl Fn(&mut ResultDocument, &str),
    done_event: &str,
) -> RunOutcome {
    let interrupted = rc.controls.stop.is_cancelled();
    rc.scraper.stop();
    rc.live.update(|s| {
        s.phase = Phase::Done;
        s.current = None;
    });
    rc.live.event(if interrupted {
        "run stopped by the user"
    } else {
        done_event
    });
    finish(
        &mut doc,
        if interrupted {
            "interrupted"
        } else {
            "complete"
        },
    );
    RunOutcome { doc, interrupted }
}

/// The Burst / E2E matrix after the sustained one (`--run-burst`), same order.
async fn burst_matrix(
    rc: &RunCtx,
    plan: &PromptPlan,
    kv: &KvBudget,
    model_ctx: u64,
    doc: &mut ResultDocument,
    finish: &impl Fn(&mut ResultDocument, &str),
) {
    let cfg = &rc.cfg;
    rc.live.update(|s| s.phase = Phase::Burst);
    rc.live.event("Phase 3: Burst / E2E decode request burst");
    for (c, x) in test_order(&cfg.concurrency, &cfg.contexts) {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let (n, w) = burst_counts(
            c,
            cfg.burst_request_count,
            cfg.burst_warmup_request_count,
            cfg.burst_requests_per_concurrency,
        );
        let mut cell = match check(c, x, cfg.max_tokens, kv.budget, model_ctx) {
            Some(inf) => {
                let mut cell = skip_cell(&rc.live, c, x, &inf);
                cell.benchmark_mode = MODE_BURST.into();
                cell
            }
            None => {
                let spec = BurstSpec {
                    concurrency: c,
                    context: x,
                    messages: plan.messages(x, &format!("ctx{x}")),
                    requests: n,
                    warmup: w,
                    mode: MODE_BURST,
                    record_prefill: false,
                };
                run_burst_cell(rc, spec).await.cell
            }
        };
        cell.request_count_target = n;
        cell.warmup_request_count = w;
        let stopped = cell.ext.status == CellStatus::SkippedUser && rc.controls.stop.is_cancelled();
        if !stopped {
            doc.burst_results.push(cell);
        }
        finish(doc, "in_progress");
        if cfg.cell_pause_seconds > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(cfg.cell_pause_seconds)).await;
        }
    }
}

/// Failures that no later request can escape: authentication, a missing
/// route or model, an unreachable server.
fn set_cell(s: &mut ldb_core::live::LiveSnapshot, c: u32, x: u64, state: MatrixCellState) {
    if let Some(m) = s
        .matrix
        .iter_mut()
        .find(|m| m.concurrency == c && m.context == x)
    {
        m.state = state;
    }
}

fn done_state(cell: &CellResult) -> MatrixCellState {
    MatrixCellState::Done {
        tps: cell.aggregate_tps,
        ttft_p50: cell.latency.ttft.map_or(f64::NAN, |d| d.p50),
        itl_p50: cell.latency.inter_token_latency.p50,
        ttfo_p50: cell.latency.ttfo.map_or(f64::NAN, |d| d.p50),
        status: cell.ext.status,
        effective: cell.sched.effective_concurrency,
    }
}

fn skip_cell(live: &Live, c: u32, x: u64, inf: &Infeasible) -> CellResult {
    let (status, word) = match inf {
        Infeasible::Context { .. } => (CellStatus::SkippedContext, "context"),
        Infeasible::Kv { .. } => (CellStatus::SkippedKv, "KV"),
    };
    live.event(format!(
        "cell skipped C={c} ctx={} ({word}): {}",
        format_context(x),
        inf.reason()
    ));
    let mut cell = CellResult::skipped(c, x, "duration", status, inf.reason());
    cell.ext.kv_deficit_tokens = inf.deficit();
    if let Infeasible::Kv { needed, .. } = inf {
        cell.ext.kv_required_tokens = *needed;
    }
    cell
}

async fn scout_only(rc: &RunCtx, env: &StreamEnv, plan: &PromptPlan, x: u64) -> PrefillEntry {
    let live = &rc.live;
    let skip = rc.controls.new_skip();
    live.event(format!(
        "prefill scout-only start ctx={}",
        format_context(x)
    ));
    let rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    live.update(|s| {
        s.prefill.retain(|r| r.context != x);
        s.prefill.push(PrefillRow {
            context: x,
            method: "scout_only".into(),
            eta: rate.map(|r| x as f64 / r),
            ..Default::default()
        });
    });
    let msgs = plan.messages(x, &format!("ctx{x}"));
    let (p, validation) = validated_probe(rc, env, &msgs, &skip, true).await;
    let mut row = entry(
        "scout_only",
        x,
        &p,
        validation,
        rc.cfg.prefill_metric == crate::config::PrefillMetric::Prometheus,
    );
    if let Some(e) = &p.error {
        row.skipped = true;
        row.skip_reason = e.to_string();
        live.event(format!(
            "prefill scout-only failed ctx={}: {e}",
            format_context(x)
        ));
    } else {
        live.event(format!(
            "prefill scout-only done ctx={} {} tok/s",
            format_context(x),
            thousands(row.tok_per_sec as u64)
        ));
        if let Ok(mut g) = rc.prefill_rate.lock() {
            *g = Some(row.tok_per_sec);
        }
    }
    live.update(|s| {
        if let Some(r) = s.prefill.iter_mut().find(|r| r.context == x) {
            r.tok_per_sec = Some(row.tok_per_sec);
            r.ttft = Some(row.ttft_seconds);
            r.eta = None;
            r.skipped = row.skipped.then(|| row.skip_reason.clone());
        }
    });
    drain(rc).await;
    row
}

/// What the plan needs from discovery and the KV budget.
pub fn limits(disc: &Discovery, kv: &KvBudget) -> ServerLimits {
    ServerLimits {
        model_context: disc.model_context,
        kv_budget: kv.budget,
    }
}

/// The row of a prefill context beyond the prompt limit.
fn skipped_prefill(sk: &SkippedPrefill) -> PrefillEntry {
    PrefillEntry {
        skipped: true,
        skip_reason: sk.reason.clone(),
        method: sk.method.into(),
        hardware_summary: serde_json::json!({}),
        ..Default::default()
    }
}

fn startup_events(live: &Live, d: &Discovery, kv: &KvBudget) {
    live.event(format!("benchmark start engine={}", d.engine.as_str()));
    live.event(format!(
        "startup engine {} {} models={:?}",
        d.engine.display_name(),
        d.engine_version,
        d.models
    ));
    for n in &d.notes {
        live.event(format!("startup {n}"));
    }
    if !d.metrics_warning.is_empty() {
        live.event(format!("startup WARNING {}", d.metrics_warning));
    }
    for n in &kv.notes {
        live.event(format!("startup {n}"));
    }
    if d.model_context > 0 {
        live.event(format!(
            "startup model context length: {} tokens",
            thousands(d.model_context)
        ));
    }
}

fn metadata(
    cfg: &RunConfig,
    d: &Discovery,
    kv: &KvBudget,
    plan: &PromptPlan,
    warm_ctx: u64,
) -> Metadata {
    let request_mode = cfg.request_count > 0;
    let prompt_tokens: BTreeMap<String, u64> = plan
        .by_ctx
        .iter()
        .filter_map(|(k, p)| Some((k.to_string(), p.tokens?)))
        .collect();
    Metadata {
        version: env!("CARGO_PKG_VERSION").into(),
        engine: d.engine.as_str().into(),
        model: d.model.clone(),
        server: cfg.server_label.clone(),
        decode_mode: if request_mode { "request-count" } else { "duration" }.into(),
        primary_decode_layer: if request_mode { "burst_e2e_decode" } else { "sustained_decode" }.into(),
        duration_per_test: cfg.duration,
        request_count: cfg.request_count,
        warmup_request_count: cfg.warmup_request_count,
        run_burst: cfg.run_burst,
        prefill_mode: if cfg.skip_prefill {
            "skipped"
        } else if cfg.standalone_prefill || cfg.prefill_only {
            "standalone_cold"
        } else {
            "integrated_decode_scout"
        }
        .into(),
        standalone_prefill: cfg.standalone_prefill || cfg.prefill_only,
        prefill_only: cfg.prefill_only,
        skip_prefill: cfg.skip_prefill,
        burst_e2e_status: if request_mode || cfg.run_burst { "enabled" } else { "not_run_use_--run-burst" }.into(),
        burst_request_count: cfg.burst_request_count,
        burst_warmup_request_count: cfg.burst_warmup_request_count,
        burst_requests_per_concurrency: cfg.burst_requests_per_concurrency,
        decode_warmup_seconds: cfg.decode_warmup_seconds,
        decode_warmup_context: if cfg.decode_warmup_seconds > 0.0 { warm_ctx } else { 0 },
        decode_warmup_concurrency: u32::from(cfg.decode_warmup_seconds > 0.0),
        cell_warmup_timeout_seconds: cfg.cell_warmup_timeout,
        cell_warmup_timeout_policy: "streams launch -> ready: 60s (<64k), 120s (>=64k), 180s (>=128k), raised to fit 30s + 2x one cold prefill + 0.25x prefill per stream at the measured prefill speed; override >0 replaces it".into(),
        show_capacity_limited_values: cfg.show_capacity_limited_values,
        max_tokens: cfg.max_tokens,
        temperature: cfg.temperature,
        ignore_eos: !cfg.respect_eos,
        max_total_tokens: kv.budget,
        dcp_size: cfg.dcp_size,
        metrics_available: d.metrics_available,
        metrics_warning: d.metrics_warning.clone(),
        concurrency_levels: cfg.concurrency.clone(),
        context_lengths: cfg.contexts.clone(),
        startup_diagnostics_available: true,
        p2pmark_status: "not_run".into(),
        amd_fabric_status: "not_run".into(),
        schema_version: ldb_core::result::SCHEMA_VERSION,
        tool: "llm-decode-bench".into(),
        started_at: chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        engine_version: d.engine_version.clone(),
        model_context_length: d.model_context,
        kv_budget_source: kv.source.clone(),
        kv_budget_tokens: (kv.budget > 0).then_some(kv.budget),
        max_error_rate: cfg.max_error_rate,
        cp_size: kv.cp_size,
        cp_source: kv.cp_source.clone(),
        concurrency_levels_run: cfg.concurrency.clone(),
        token_targeting: plan.targeting.into(),
        chars_per_token: plan.model.chars_per_token,
        prompt_overhead_tokens: plan.model.overhead_tokens,
        prompt_tokens_by_context: prompt_tokens,
        sim_scenario: cfg.sim_scenario.clone(),
        ..Metadata::default()
    }
}
