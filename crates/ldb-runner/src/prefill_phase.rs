//! The prefill phase: the JIT warmup request (which also catches a route or
//! key problem before any cell), prefill rows skipped by the plan, the
//! prefill warmup, scout-only rows and the standalone cold profile.

use ldb_client::stream::StreamEnv;
use ldb_core::failure::FailureKind;
use ldb_core::live::{LiveEvent, Phase};
use ldb_core::result::PrefillEntry;
use ldb_core::tokens::{format_context, thousands};

use crate::cell_io::drain;
use crate::ctx::RunCtx;
use crate::plan::{RunPlan, SkippedPrefill};
use crate::prefill::{entry, probe, validated_probe};
use crate::prompts::PromptPlan;
use crate::recorder::Recorder;
use crate::run::RunError;

/// Run the prefill phase. A fatal failure of the first request (every later
/// request would fail the same way) ends the run with the server's answer.
pub(crate) async fn prefill_phase(
    rc: &RunCtx,
    plan: &RunPlan,
    prompts: &PromptPlan,
    rec: &mut Recorder,
) -> Result<(), RunError> {
    let live = &rc.live;
    live.send(LiveEvent::PhaseChanged(Phase::Prefill));
    let env = probe_env(rc);
    live.event("decode warmup start");
    let jit_prompt = prompts.messages(0, "jit");
    // A server that answers 200 and then only keep-alive comments would hold
    // the warmup for the 30-minute first-token limit: bound it.
    let jit_env = StreamEnv {
        first_token_timeout: Some(rc.cfg.timing.warmup_limit()),
        ..env.clone()
    };
    let mut jit = probe(&jit_env, &rc.model, &jit_prompt, &rc.controls.stop).await;
    // Discovery reached the server, so a refused connection now means it
    // went away (or is restarting): wait for it as for a failed cell.
    if let Some(e) = jit
        .error
        .as_ref()
        .filter(|e| e.kind == FailureKind::Connect)
    {
        if !crate::server_watch::down_before_cells(rc, &e.to_string()).await {
            // gone (the cells are labelled with the reason) or stopped
            return Ok(());
        }
        jit = probe(&jit_env, &rc.model, &jit_prompt, &rc.controls.stop).await;
    }
    if let Some(e) = jit.error.as_ref().filter(|e| e.is_fatal()) {
        return Err(RunError::Preflight(e.to_string()));
    }
    if let Some(e) = jit
        .error
        .as_ref()
        .filter(|_| !rc.controls.stop.is_cancelled())
    {
        let why = format!("JIT warmup request: {e}; the run went on without a warmed server");
        live.event(format!("decode warmup failed: {why}"));
        rec.warmup_label(why);
    }
    let carried = |x: &u64| plan.prefill_carried.contains(x);
    for sk in plan.prefill_skipped.iter().filter(|s| !carried(&s.context)) {
        live.event(format!(
            "prefill skipped ctx={}: {}",
            format_context(sk.context),
            sk.reason
        ));
        rec.prefill_row(sk.context, skipped_prefill(sk));
    }
    if let Some(w) = plan.prefill_warmup {
        live.event(format!("prefill warmup start ctx={}", format_context(w)));
        let warm = prompts.messages(w, "warm-prefill");
        // Bounded like the JIT request and the decode warmup: with the plain
        // probe's 30-minute first-token limit, a server sending only
        // keep-alive comments held the run here (issue 35).
        let out = probe(&jit_env, &rc.model, &warm, &rc.controls.stop).await;
        match out.error.filter(|_| !rc.controls.stop.is_cancelled()) {
            Some(e) => {
                let ctx = format_context(w);
                let why = format!("prefill warmup request ctx={ctx}: {e}; the run went on");
                live.event(format!("prefill warmup failed: {why}"));
                rec.warmup_label(why);
            }
            None => live.event(format!("prefill warmup done ctx={}", format_context(w))),
        }
    }
    for &x in plan.scout_only.iter().filter(|x| !carried(x)) {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let row = scout_only(rc, &env, prompts, x).await;
        rec.prefill_row(x, row);
    }
    for &x in plan.standalone.iter().filter(|x| !carried(x)) {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let row = crate::standalone::profile(rc, &env, prompts, x).await;
        rec.prefill_row(x, row);
    }
    Ok(())
}

/// The stream environment of single probe requests (no window, no sink).
fn probe_env(rc: &RunCtx) -> StreamEnv {
    StreamEnv {
        cancel: rc.controls.stop.child_token(),
        first_token_timeout: Some(ldb_client::stream::FIRST_TOKEN_LIMIT),
        ..StreamEnv::new(rc.http.clone(), rc.clock)
    }
}

/// The row of a prefill context beyond the prompt limit.
fn skipped_prefill(sk: &SkippedPrefill) -> PrefillEntry {
    PrefillEntry {
        skipped: true,
        skip_reason: sk.reason.clone(),
        method: Some(sk.method),
        ..Default::default()
    }
}

/// One scout-only row: a single prefill request at `x`, validated by the
/// server's counters where it has them.
async fn scout_only(rc: &RunCtx, env: &StreamEnv, plan: &PromptPlan, x: u64) -> PrefillEntry {
    let live = &rc.live;
    let skip = rc.controls.new_skip();
    live.event(format!(
        "prefill scout-only start ctx={}",
        format_context(x)
    ));
    let rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    live.send(LiveEvent::PrefillStarted {
        context: x,
        method: "scout_only".into(),
        eta: rate.map(|r| x as f64 / r),
    });
    let msgs = plan.messages(x, &format!("ctx{x}"));
    let (p, validation) = validated_probe(rc, env, &msgs, &skip, true).await;
    let mut row = entry(
        ldb_core::result::PrefillMethod::ScoutOnly,
        x,
        &p,
        validation,
        rc.cfg.prefill.prefill_metric == crate::config::PrefillMetric::Prometheus,
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
    live.send(LiveEvent::PrefillFinished {
        context: x,
        method: None,
        tok_per_sec: Some(row.tok_per_sec),
        ttft: Some(row.ttft_seconds),
        skipped: row.skipped.then(|| row.skip_reason.clone()),
    });
    drain(rc).await;
    row
}
