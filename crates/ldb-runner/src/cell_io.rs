//! Requests a cell sends besides its streams: the scout that warms the
//! prefix cache (and may record the context's prefill row), SGLang's aborts
//! of the streams cut at the window's end, and the wait until the server has
//! drained before the next cell.

use std::time::Duration;

use ldb_client::stream::{StreamEnv, StreamOutcome};
use ldb_core::engine::Engine;
use ldb_core::failure::{FailureKind, RequestError};
use ldb_core::live::CellStage;
use ldb_core::readiness::auto_limit;
use ldb_core::result::PrefillEntry;
use ldb_core::tokens::format_context;
use tokio_util::sync::CancellationToken;

use crate::cell::{CellSpec, where_};
use crate::cell_view::set_stage;
use crate::cold::hit_cache;
use crate::config::WARMUP_LIMIT_S;
use crate::ctx::RunCtx;
use crate::prefill::{entry, probe, validated_probe};

/// What every sustained cell starts with, one process or sharded.
pub(crate) struct Opened {
    /// Cancelled when the user skips this cell (or the run stops).
    pub skip: CancellationToken,
    /// When the cell began, on the run's clock.
    pub cell_start: f64,
    /// The cell's place in the matrix, for the event log.
    pub at: String,
    /// The scout's outcome (nothing at context 0, which has no scout).
    pub scouted: Scouted,
}

/// Opens a cell: its skip token, the start event, and the scout.
pub(crate) async fn open_cell(rc: &RunCtx, spec: &mut CellSpec) -> Opened {
    let skip = rc.controls.new_skip();
    let cell_start = rc.clock.now();
    let at = where_(spec);
    rc.live.event(format!("cell start {at}"));
    set_stage(rc, spec, CellStage::Scout, 0.0);
    let scouted = if spec.context > 0 {
        let s = scout(rc, spec, &skip).await;
        crate::prefix_groups::warm_other_groups(rc, spec.context, &spec.messages, &skip).await;
        s
    } else {
        Scouted::default()
    };
    Opened {
        skip,
        cell_start,
        at,
        scouted,
    }
}

/// What the scout left behind.
#[derive(Debug, Default)]
pub(crate) struct Scouted {
    /// The context's prefill row, when this scout recorded one.
    pub prefill: Option<PrefillEntry>,
    /// Why the scout ended without a token at its limit (`scout_timeout`).
    pub timeout: Option<String>,
}

/// How long the scout waits for its token (methodology §6.1): like the
/// warmup, `--cell-warmup-timeout-seconds` when given; else the warmup's
/// fixed bound, raised for a long prompt to what the readiness limit of one
/// stream allows at the measured prefill speed (a 1M-token prompt on a slow
/// server may need more than the fixed bound to prefill). Without it a
/// server that answers 200 and then only keep-alive comments held the cell
/// for the 30-minute first-token limit.
pub(crate) fn scout_limit(rc: &RunCtx, context: u64) -> Duration {
    if rc.cfg.timing.cell_warmup_timeout > 0.0 {
        return rc.cfg.timing.warmup_limit();
    }
    let rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    Duration::from_secs_f64(WARMUP_LIMIT_S.max(auto_limit(1, context, rate)))
}

/// The scout's failure when it is the first-token limit running out (the
/// cell goes on; the event log and the cell say so).
fn ran_out(e: Option<&RequestError>) -> Option<String> {
    e.filter(|e| e.kind == FailureKind::Stalled)
        .map(|e| e.message.clone())
}

/// The scout: one `max_tokens=1` request with the cell's prompt, so the
/// streams find its prefix cached; for the first cell of a context it is
/// measured and becomes the integrated prefill row. A measured scout whose
/// prompt went out before gets a fresh one, written into `spec` for the
/// cell's streams (see `cold.rs`). Bounded by [`scout_limit`].
pub(crate) async fn scout(rc: &RunCtx, spec: &mut CellSpec, skip: &CancellationToken) -> Scouted {
    let ctx = spec.context;
    let env = StreamEnv {
        cancel: skip.clone(),
        first_token_timeout: Some(scout_limit(rc, ctx)),
        ..StreamEnv::new(rc.http.clone(), rc.clock)
    };
    if !spec.record_prefill {
        rc.sent_prompts.mark(&spec.messages);
        rc.prefix.admit_scout(ctx, &spec.messages);
        let p = probe(&env, &rc.model, &spec.messages, skip).await;
        let timeout = ran_out(p.error.as_ref());
        if let Some(why) = &timeout {
            rc.live.event(format!(
                "scout ctx={} got no token: {why}; the cell goes on",
                format_context(ctx)
            ));
        }
        return Scouted {
            prefill: None,
            timeout,
        };
    }
    if let Some(fresh) = rc.sent_prompts.cold(&spec.messages) {
        rc.live.event(format!(
            "integrated prefill ctx={}: its prompt was sent before (a failed scout, a \
             re-measured cell or an earlier pass); measuring a fresh one",
            format_context(ctx)
        ));
        spec.messages = fresh;
    }
    rc.sent_prompts.mark(&spec.messages);
    rc.prefix.admit_scout(ctx, &spec.messages);
    rc.live.event(format!(
        "integrated prefill start ctx={}",
        format_context(ctx)
    ));
    let (p, validation) = validated_probe(rc, &env, &spec.messages, skip, true).await;
    if let Some(e) = &p.error {
        rc.live.event(format!(
            "integrated prefill failed ctx={}: {e}",
            format_context(ctx)
        ));
        return Scouted {
            prefill: None,
            timeout: ran_out(Some(e)),
        };
    }
    Scouted {
        prefill: measured_row(rc, ctx, &p, validation),
        timeout: None,
    }
}

/// The integrated prefill row of a scout that answered, unless the server
/// served its prompt from the prefix cache.
fn measured_row(
    rc: &RunCtx,
    ctx: u64,
    p: &crate::prefill::ProbeResult,
    validation: ldb_core::result::ServerValidation,
) -> Option<PrefillEntry> {
    let cached = p.cached_tokens.unwrap_or(0).max(validation.cached_tokens);
    let prompt = p.prompt_tokens.unwrap_or(ctx);
    // Behind a shared prefix only the rest should be cold (warm_prefix).
    let shared = rc.prefix.shared_tokens();
    if hit_cache(prompt.saturating_sub(shared), cached.saturating_sub(shared)) {
        rc.live.event(format!(
            "integrated prefill ctx={} not recorded: the server served {cached} of its \
             {prompt} prompt tokens from its prefix cache",
            format_context(ctx)
        ));
        return None;
    }
    let use_server = rc.cfg.prefill.prefill_metric == crate::config::PrefillMetric::Prometheus;
    let mut row = entry(
        ldb_core::result::PrefillMethod::IntegratedScout,
        ctx,
        p,
        validation,
        use_server,
    );
    if shared > 0 {
        crate::prefix_run::warm_prefix_row(&mut row, shared);
    }
    if row.tok_per_sec > 0.0
        && let Ok(mut g) = rc.prefill_rate.lock()
    {
        *g = Some(row.tok_per_sec);
    }
    rc.live.event(format!(
        "integrated prefill done ctx={} {} tok/s",
        format_context(ctx),
        ldb_core::tokens::thousands(row.tok_per_sec as u64)
    ));
    Some(row)
}

/// SGLang keeps generating for a dropped connection: abort the cut streams by id.
pub(crate) async fn abort_sglang(rc: &RunCtx, outcomes: &[StreamOutcome]) {
    if rc.engine != Engine::Sglang {
        return;
    }
    for o in outcomes.iter().filter(|o| o.cancelled) {
        if let Some(rid) = &o.request_id {
            let body = serde_json::json!({"rid": rid});
            let _ = rc
                .http
                .post_json("/abort_request", &body, Duration::from_secs(5))
                .await;
        }
    }
}

/// Wait until the server runs and queues nothing (bounded), so cells do not overlap.
pub async fn drain(rc: &RunCtx) {
    if !rc.metrics {
        tokio::time::sleep(Duration::from_millis(500)).await;
        return;
    }
    let t0 = rc.clock.now();
    while rc.clock.now() - t0 < 60.0 {
        match rc
            .scraper
            .fresh_after(rc.clock.now(), Duration::from_secs(6))
            .await
        {
            Some(s)
                if s.snap.running.unwrap_or(0.0) <= 0.0 && s.snap.waiting.unwrap_or(0.0) <= 0.0 =>
            {
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
    rc.live
        .event("server did not drain within 60 s; continuing");
}
