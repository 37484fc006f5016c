//! The decode phases: the hidden decode warmup, the primary matrix
//! (sustained cells, or request-count cells) and the Burst / E2E matrix of
//! `--run-burst`, each cell handed to the recorder as it finishes.

use std::time::Duration;

use ldb_core::kv::Infeasible;
use ldb_core::live::{LiveEvent, Phase};
use ldb_core::result::{CellResult, CellStatus};
use ldb_core::tokens::format_context;

use crate::burst::{BurstSpec, MODE_BURST, MODE_REQUEST_COUNT, burst_counts, run_burst_cell};
use crate::cell::{CellOutput, CellSpec, measure_cell, run_cell};
use crate::config::BurstConfig;
use crate::ctx::RunCtx;
use crate::live::Live;
use crate::plan::{PlannedCell, RunPlan};
use crate::prompts::PromptPlan;
use crate::recorder::Recorder;
use crate::server_watch;

/// The hidden C=1 cell that warms the decode path; its result is dropped.
/// Its scout and ramp-up are bounded by the warmup limit each
/// (`TimingConfig::warmup_limit`), its window by its length: past that the
/// cell is cut as if skipped, the run goes on, and the file says so.
pub(crate) async fn decode_warmup(
    rc: &RunCtx,
    plan: &RunPlan,
    prompts: &PromptPlan,
    rec: &mut Recorder,
) {
    let Some(x) = plan.decode_warmup else {
        return;
    };
    if rc.controls.stop.is_cancelled() || server_watch::gone(rc).is_some() {
        return;
    }
    let secs = rc.cfg.matrix.decode_warmup_seconds;
    rc.live.send(LiveEvent::PhaseChanged(Phase::DecodeWarmup));
    rc.live.event(format!(
        "decode warmup start C=1 ctx={} {secs}s",
        format_context(x)
    ));
    let spec = CellSpec {
        concurrency: 1,
        context: x,
        messages: prompts.messages(x, &format!("warm-decode{x}")),
        duration: secs,
        auto_stop: None,
        record_prefill: false,
        probe: false,
    };
    // The scout and the ramp-up are each bounded (`cell_io::scout_limit`,
    // the readiness limit); a watchdog still cuts the cell (through its
    // skip token) once scout, ramp-up and window had their share, plus time
    // to drain: a long prompt's scout limit may exceed the warmup's.
    let bound = 2.0 * rc.cfg.timing.warmup_limit().as_secs_f64() + secs + WARMUP_DRAIN_S;
    let watchdog = tokio_util::sync::CancellationToken::new();
    let timer = {
        let (done, controls) = (watchdog.clone(), rc.controls.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = done.cancelled() => false,
                _ = tokio::time::sleep(Duration::from_secs_f64(bound)) => {
                    controls.skip();
                    true
                }
            }
        })
    };
    let out = run_cell(rc, spec).await;
    watchdog.cancel();
    let cut = timer.await.unwrap_or(false);
    let why = if cut && !rc.controls.stop.is_cancelled() {
        Some(format!(
            "decode warmup cell C=1 ctx={}: cut at its limit of {bound:.0} s",
            format_context(x)
        ))
    } else if out.cell.warmup_timed_out {
        Some(format!(
            "decode warmup cell C=1 ctx={}: {}",
            format_context(x),
            out.cell.timeout_reason
        ))
    } else {
        None
    };
    if let Some(why) = why {
        rc.live.event(format!("decode warmup timed out: {why}"));
        rec.warmup_label(why);
    }
    rc.live
        .event(format!("decode warmup done C=1 ctx={}", format_context(x)));
}

/// Time the hidden warmup cell may take past its scout, ramp-up and window
/// before the watchdog cuts it: joining its streams and the server's drain.
const WARMUP_DRAIN_S: f64 = 30.0;

/// The primary matrix in plan order, `--repeat N` times: pass 1 over every
/// cell, then pass 2 over the cells that measured, and so on, so a drift of
/// the server over time spreads over all cells instead of biasing the last
/// ones. The first measured cell of each integrated-prefill context records
/// its scout as the prefill row, unless the file being resumed holds that
/// row already. Cells carried over from that file are passed by (the
/// recorder holds them); partly repeated ones are measured for the passes
/// they miss. `--slo-search` skips levels in pass 1; `--slo-bisect` follows
/// the last pass.
pub(crate) async fn decode_matrix(
    rc: &RunCtx,
    plan: &RunPlan,
    prompts: &PromptPlan,
    rec: &mut Recorder,
) {
    let request_mode = rc.cfg.matrix.request_count > 0;
    rc.live.send(LiveEvent::PhaseChanged(if request_mode {
        Phase::Burst
    } else {
        Phase::Decode
    }));
    let mut recorded: Vec<u64> = plan.prefill_carried.clone();
    let t0 = rc.clock.now();
    let passes = rc.cfg.matrix.repeat.max(1);
    let todo: Vec<&PlannedCell> = plan.cells.iter().filter(|p| p.carried.is_none()).collect();
    let total: f64 = todo
        .iter()
        .map(|p| f64::from(passes.saturating_sub(p.carried_repeats)))
        .sum();
    let mode = if request_mode {
        ldb_core::result::DecodeMode::RequestCount
    } else {
        ldb_core::result::DecodeMode::Duration
    };
    let mut done = 0.0;
    'passes: for pass in 1..=passes {
        if passes > 1 {
            rc.live.event(format!("repeat pass {pass} of {passes}"));
        }
        for planned in &todo {
            if rc.controls.stop.is_cancelled() {
                break 'passes;
            }
            let (c, x) = (planned.concurrency, planned.context);
            if pass <= planned.carried_repeats {
                continue;
            }
            // Later passes repeat only cells that pass 1 measured.
            if pass > 1 && !rec.measured(c, x) {
                continue;
            }
            let gone = server_watch::gone(rc);
            if pass > 1 && gone.is_some() {
                break 'passes;
            }
            let elapsed = rc.clock.now() - t0;
            let eta = (done > 0.0).then(|| elapsed / done * (total - done));
            done += 1.0;
            rec.cell_started(c, x, rc.clock.now(), eta);
            let search = search_skip(rc, rec, c, x).filter(|_| pass == 1);
            let cell = match (&planned.skip, gone, search) {
                (Some(inf), _, _) => skip_cell(&rc.live, c, x, inf),
                (None, Some(why), _) => server_watch::gone_cell(c, x, mode, &why),
                (None, None, Some(why)) => slo_skip_cell(&rc.live, c, x, mode, why),
                (None, None, None) => {
                    let record = plan.integrated_prefill.contains(&x) && !recorded.contains(&x);
                    let out = run_planned(rc, c, x, prompts, record).await;
                    if let Some(p) = out.prefill {
                        recorded.push(x);
                        rec.prefill_row(x, p);
                    }
                    let mut cell = out.cell;
                    server_watch::after_cell(rc, &mut cell).await;
                    cell
                }
            };
            let stop = stopped(rc, &cell);
            rec.decode_cell(cell, stop, pass);
            if server_watch::gone(rc).is_none() {
                pause(rc).await;
            }
        }
    }
    if rc.cfg.slo.bisect {
        bisect(rc, prompts, rec).await;
    }
}

/// `--slo-search`: why the cell is skipped, when the search says so.
fn search_skip(rc: &RunCtx, rec: &Recorder, c: u32, x: u64) -> Option<String> {
    let spec = rc.cfg.slo.spec.as_ref().filter(|_| rc.cfg.slo.search)?;
    crate::slo_search::search_skip(spec, &rc.cfg.matrix.concurrency, rec.results(), c, x)
}

/// A cell `--slo-search` does not measure.
fn slo_skip_cell(
    live: &Live,
    c: u32,
    x: u64,
    mode: ldb_core::result::DecodeMode,
    why: String,
) -> CellResult {
    live.event(format!(
        "cell skipped C={c} ctx={} (SLO): {why}",
        format_context(x)
    ));
    CellResult::skipped(c, x, mode, CellStatus::SkippedSlo, why)
}

/// `--slo-bisect`: per context, measure the midpoint between the highest
/// passing and the lowest failing level until they are adjacent. Each new
/// level is measured `--repeat` times back to back (the next level depends
/// on its verdict, so its repeats cannot be spread over passes).
async fn bisect(rc: &RunCtx, prompts: &PromptPlan, rec: &mut Recorder) {
    let Some(spec) = rc.cfg.slo.spec.as_ref() else {
        return;
    };
    for &x in &rc.cfg.matrix.contexts {
        // Levels the bisection measured here: never one twice (§7.7).
        let mut tried: Vec<u32> = Vec::new();
        while let Some((pass, fail, mid)) =
            crate::slo_search::bisect_next(spec, rec.results(), x, &tried)
        {
            if rc.controls.stop.is_cancelled() || server_watch::gone(rc).is_some() {
                return;
            }
            tried.push(mid);
            rc.live.event(format!(
                "slo bisect ctx={}: C={pass} passes, C={fail} does not, measuring C={mid}",
                format_context(x)
            ));
            for repeat in 1..=rc.cfg.matrix.repeat.max(1) {
                if rc.controls.stop.is_cancelled() {
                    return;
                }
                let out = run_planned(rc, mid, x, prompts, false).await;
                let mut cell = out.cell;
                server_watch::after_cell(rc, &mut cell).await;
                let stop = stopped(rc, &cell);
                rec.decode_cell(cell, stop, repeat);
                pause(rc).await;
            }
            if !rec.measured(mid, x) {
                // Not measured (skipped by the user): the gap cannot close.
                rc.live.event(format!(
                    "slo bisect ctx={}: C={mid} was not measured; bisection stops",
                    format_context(x)
                ));
                break;
            }
        }
    }
}

/// One measured cell of the primary matrix, sustained or request-count.
async fn run_planned(
    rc: &RunCtx,
    c: u32,
    x: u64,
    prompts: &PromptPlan,
    record_prefill: bool,
) -> CellOutput {
    let reset = crate::prefix_run::before_cell(rc, prompts).await;
    let mut out = run_planned_cell(rc, c, x, prompts, record_prefill).await;
    crate::prefix_run::closed_loop_cell(rc, &mut out.cell, reset);
    out
}

/// [`run_planned`] without the prefix-cache steps around it.
async fn run_planned_cell(
    rc: &RunCtx,
    c: u32,
    x: u64,
    prompts: &PromptPlan,
    record_prefill: bool,
) -> CellOutput {
    let messages = prompts.messages(x, &format!("ctx{x}"));
    if rc.cfg.matrix.request_count > 0 {
        let spec = BurstSpec {
            concurrency: c,
            context: x,
            messages,
            requests: rc.cfg.matrix.request_count,
            warmup: rc.cfg.matrix.warmup_request_count,
            mode: MODE_REQUEST_COUNT,
            record_prefill,
        };
        run_burst_cell(rc, spec).await
    } else {
        let spec = CellSpec {
            concurrency: c,
            context: x,
            messages,
            duration: rc.cfg.matrix.duration,
            auto_stop: rc.cfg.matrix.auto_stop,
            record_prefill,
            probe: true,
        };
        measure_cell(rc, spec).await
    }
}

/// A cell cut short because the user stopped the run.
fn stopped(rc: &RunCtx, cell: &CellResult) -> bool {
    cell.ext.status == CellStatus::SkippedUser && rc.controls.stop.is_cancelled()
}

/// `--cell-pause-seconds` between cells.
async fn pause(rc: &RunCtx) {
    if rc.cfg.timing.cell_pause_seconds > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(rc.cfg.timing.cell_pause_seconds)).await;
    }
}

/// The Burst / E2E matrix after the sustained one (`--run-burst`), in plan
/// order with the plan's skips.
pub(crate) async fn burst_matrix(
    rc: &RunCtx,
    burst: &BurstConfig,
    plan: &RunPlan,
    prompts: &PromptPlan,
    rec: &mut Recorder,
) {
    rc.live.send(LiveEvent::PhaseChanged(Phase::Burst));
    rc.live.event("Phase 3: Burst / E2E decode request burst");
    for planned in plan.cells.iter().filter(|p| p.burst_carried.is_none()) {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let (c, x) = (planned.concurrency, planned.context);
        let (n, w) = burst_counts(
            c,
            burst.burst_request_count,
            burst.burst_warmup_request_count,
            burst.burst_requests_per_concurrency,
        );
        let mut cell = match (&planned.skip, server_watch::gone(rc)) {
            (Some(inf), _) => {
                let mut cell = skip_cell(&rc.live, c, x, inf);
                cell.benchmark_mode = MODE_BURST;
                cell
            }
            (None, Some(why)) => server_watch::gone_cell(c, x, MODE_BURST, &why),
            (None, None) => {
                let spec = BurstSpec {
                    concurrency: c,
                    context: x,
                    messages: prompts.messages(x, &format!("ctx{x}")),
                    requests: n,
                    warmup: w,
                    mode: MODE_BURST,
                    record_prefill: false,
                };
                let mut cell = run_burst_cell(rc, spec).await.cell;
                server_watch::after_cell(rc, &mut cell).await;
                cell
            }
        };
        cell.request_count_target = n;
        cell.warmup_request_count = w;
        let stop = stopped(rc, &cell);
        rec.burst_cell(cell, stop);
        if server_watch::gone(rc).is_none() {
            pause(rc).await;
        }
    }
}

/// A cell the plan skips (KV budget or model context), with its deficit.
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
    let mut cell = CellResult::skipped(
        c,
        x,
        ldb_core::result::DecodeMode::Duration,
        status,
        inf.reason(),
    );
    cell.ext.kv_deficit_tokens = inf.deficit();
    if let Infeasible::Kv { needed, .. } = inf {
        cell.ext.kv_required_tokens = *needed;
    }
    cell
}
