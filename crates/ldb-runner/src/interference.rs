//! The prefill–decode interference probe (`--mixed-prefill-contexts`,
//! docs/methodology.md "Prefill–decode interference"): once a sustained
//! cell's window has closed, its C streams keep decoding through a quiet
//! stretch, then one fresh prompt of each length L is sent, one at a time,
//! each followed by a settle stretch. The streams' token arrivals around
//! each injection (`ldb_client::token_tail`) become its stall, rates and
//! stalled streams (`ldb_core::interference`); its TTFT is set against the
//! same length sent alone to the idle server, once per run.
//!
//! The window is closed before the first injection, so the cell's headline
//! numbers are those of an undisturbed window.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ldb_client::stream::StreamEnv;
use ldb_core::interference::{Injection, Interference, STALL_FACTOR, Times, inflation, measure};
use ldb_core::plan::ServerLimits;
use ldb_core::prompt::Message;
use ldb_core::result::round;
use ldb_core::tokens::format_context;
use tokio_util::sync::CancellationToken;

use crate::cell::CellSpec;
use crate::cell_window::WindowRecord;
use crate::ctx::RunCtx;
use crate::pool::StreamPool;
use crate::prompts::PromptPlan;

/// The quiet and settle stretches: this many of a stream's mean token gaps
/// in the window, so a slow server still shows a few tokens per stream in
/// each, bounded below and above.
const STRETCH_GAPS: f64 = 10.0;
const STRETCH_MIN_S: f64 = 0.5;
const STRETCH_MAX_S: f64 = 30.0;

/// What the probe keeps across cells: the sized prompts, the server's
/// limits and each length's solo TTFT (measured once, at the first cell).
#[derive(Default)]
pub(crate) struct ProbeState {
    prompts: Mutex<Option<PromptPlan>>,
    limits: Mutex<ServerLimits>,
    solo: Mutex<BTreeMap<u64, Result<f64, String>>>,
    /// Makes every injected prompt's nonce unique in the run.
    sent: AtomicU64,
}

/// Whether this run probes: the flag is given and the cell is measured by
/// this process alone (the CLI refuses it for every other mode).
pub(crate) fn wanted(rc: &RunCtx) -> bool {
    !rc.cfg.matrix.mixed_prefill_contexts.is_empty() && rc.executor.leader().is_none()
}

/// Keep the sized prompts and the server's limits for the cells.
pub(crate) fn prepare(rc: &RunCtx, prompts: &PromptPlan, limits: ServerLimits) {
    if !wanted(rc) {
        return;
    }
    *lock(&rc.probe.prompts) = Some(prompts.clone());
    *lock(&rc.probe.limits) = limits;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh prompt of exactly `l` tokens (when sized), unique in the run.
fn fresh_prompt(rc: &RunCtx, l: u64, what: &str) -> Option<Vec<Message>> {
    let n = rc.probe.sent.fetch_add(1, Ordering::Relaxed);
    let plan = lock(&rc.probe.prompts);
    let plan = plan.as_ref()?;
    plan.by_ctx
        .contains_key(&l)
        .then(|| plan.messages(l, &format!("{what}{l}-{n}")))
}

/// Why `l` cannot be injected beside C streams of `ctx` tokens: beyond the
/// model's context, or the streams and the prompt need more KV than the
/// server has.
fn misfit(rc: &RunCtx, c: u32, ctx: u64, l: u64) -> Option<String> {
    let limits = *lock(&rc.probe.limits);
    if limits.model_context > 0 && l + 1 > limits.model_context {
        return Some(format!(
            "beyond the model's context ({} tokens)",
            limits.model_context
        ));
    }
    let need = u64::from(c) * (ctx + rc.cfg.matrix.max_tokens) + l + 1;
    (limits.kv_budget > 0 && need > limits.kv_budget).then(|| {
        format!(
            "the {c} streams and the prompt need {need} KV tokens, the budget is {}",
            limits.kv_budget
        )
    })
}

/// Send each length alone to the idle server once per run (the solo TTFT
/// the injections are set against). Call before the cell's streams start.
pub(crate) async fn solo_once(rc: &RunCtx, skip: &CancellationToken) {
    if !wanted(rc) {
        return;
    }
    for &l in &rc.cfg.matrix.mixed_prefill_contexts {
        if lock(&rc.probe.solo).contains_key(&l) || misfit(rc, 0, 0, l).is_some() {
            continue;
        }
        let Some(msgs) = fresh_prompt(rc, l, "mixed-solo") else {
            continue;
        };
        let p = send(rc, l, &msgs, skip).await;
        if skip.is_cancelled() {
            return;
        }
        rc.live.event(match &p {
            Ok(t) => format!("mixed prefill solo ctx={} ttft {t:.3} s", format_context(l)),
            Err(e) => format!("mixed prefill solo ctx={} failed: {e}", format_context(l)),
        });
        lock(&rc.probe.solo).insert(l, p);
    }
}

/// One `max_tokens=1` request; its TTFT, or why there is none.
async fn send(
    rc: &RunCtx,
    l: u64,
    msgs: &[Message],
    skip: &CancellationToken,
) -> Result<f64, String> {
    let env = StreamEnv {
        first_token_timeout: Some(crate::cell_io::scout_limit(rc, l)),
        ..StreamEnv::new(rc.http.clone(), rc.clock)
    };
    let p = crate::prefill::probe(&env, &rc.model, msgs, skip).await;
    match p.error {
        Some(e) => Err(e.to_string()),
        None => Ok(p.ttft),
    }
}

/// After the window: the quiet stretch and one injection per length, the
/// streams still decoding; then the streams are cancelled. `None` without
/// the flag, for a cell that does not probe (the hidden warmup) and when the
/// cell did not get as far as a window.
pub(crate) async fn after_window(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &mut StreamPool,
    win: &WindowRecord,
    aborted: bool,
) -> Option<Interference> {
    if !wanted(rc) {
        return None;
    }
    // The streams are still running (`confirm_read::edge_reads` left them).
    let out = if !spec.probe || aborted || skip.is_cancelled() || pool.fatal.is_some() {
        None
    } else {
        Some(run_probe(rc, spec, skip, pool, win).await)
    };
    pool.cancel();
    out
}

/// The stretches of one cell: ten of a stream's mean token gaps in the
/// window (C × window ÷ window tokens), within [0.5 s, 30 s].
fn stretch_s(c: u32, window_s: f64, window_tokens: u64) -> f64 {
    if window_tokens == 0 {
        return STRETCH_MIN_S;
    }
    let gap = f64::from(c) * window_s / window_tokens as f64;
    (STRETCH_GAPS * gap).clamp(STRETCH_MIN_S, STRETCH_MAX_S)
}

async fn run_probe(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &mut StreamPool,
    win: &WindowRecord,
) -> Interference {
    let tokens = pool.counters.window_tokens.load(Ordering::Relaxed);
    let stretch = stretch_s(spec.concurrency, win.end - win.start, tokens);
    pool.counters.tail.start();
    let mut next = rc.clock.now() + stretch;
    let mut injections = Vec::new();
    for &l in &rc.cfg.matrix.mixed_prefill_contexts {
        let inj = match misfit(rc, spec.concurrency, spec.context, l) {
            Some(why) => Injection::skipped(l, why),
            None if skip.is_cancelled() => Injection::skipped(l, "the cell was cut short"),
            None => {
                sleep_until(rc, next, skip).await;
                let inj = inject(rc, spec, skip, pool, l, stretch).await;
                next = rc.clock.now();
                inj
            }
        };
        if let Some(why) = &inj.skipped {
            rc.live.event(format!(
                "{}: mixed prefill ctx={} skipped: {why}",
                crate::cell::where_(spec),
                format_context(l)
            ));
        }
        injections.push(inj);
        pool.collect();
    }
    Interference {
        quiet_s: round(stretch, 3),
        settle_s: round(stretch, 3),
        stall_factor: STALL_FACTOR,
        injections,
    }
}

/// One injection of `l` tokens: send it, wait for its first token and the
/// settle stretch, read the streams' arrivals around it.
async fn inject(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &StreamPool,
    l: u64,
    stretch: f64,
) -> Injection {
    let Some(msgs) = fresh_prompt(rc, l, "mixed") else {
        return Injection::skipped(l, "no prompt of this length was sized");
    };
    let at = rc.clock.now();
    let ttft = match send(rc, l, &msgs, skip).await {
        Ok(t) => t,
        Err(e) => return Injection::skipped(l, format!("the injected request failed: {e}")),
    };
    let first = at + ttft;
    sleep_until(rc, first + stretch, skip).await;
    if skip.is_cancelled() {
        return Injection::skipped(l, "the cell was cut short");
    }
    let times = Times {
        before: at - stretch,
        inject: at,
        first,
        after: first + stretch,
    };
    let solo = lock(&rc.probe.solo).get(&l).and_then(|r| r.clone().ok());
    let mut inj = measure(&pool.counters.tail.snapshot(), times, STALL_FACTOR);
    inj.prompt_tokens = l;
    inj.injected_at_unix = Some(round(rc.clock.unix(at), 3));
    inj.ttft_s = Some(round(ttft, 4));
    inj.solo_ttft_s = solo.map(|s| round(s, 4));
    inj.ttft_inflation = inflation(Some(ttft), solo);
    rc.live.event(format!(
        "{}: mixed prefill ctx={} ttft {ttft:.3} s, stall {:.3} s, {}/{} streams stalled",
        crate::cell::where_(spec),
        format_context(l),
        inj.stall_max_s.unwrap_or(0.0),
        inj.streams_stalled,
        inj.streams
    ));
    inj
}

/// Sleep until run-clock time `t` (at once when past), or a skip.
async fn sleep_until(rc: &RunCtx, t: f64, skip: &CancellationToken) {
    let wait = t - rc.clock.now();
    if wait <= 0.0 {
        return;
    }
    tokio::select! {
        _ = skip.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretches_are_ten_gaps_within_bounds() {
        // 4 streams, 10 s, 400 tokens: a gap of 0.1 s → 1 s.
        assert!((stretch_s(4, 10.0, 400) - 1.0).abs() < 1e-9);
        // 0.01 s gaps → 0.1 s, raised to the minimum.
        assert_eq!(stretch_s(4, 10.0, 4000), STRETCH_MIN_S);
        // 0.5 s gaps → 5 s.
        assert!((stretch_s(1, 10.0, 20) - 5.0).abs() < 1e-9);
        assert_eq!(stretch_s(1, 10.0, 1), STRETCH_MAX_S);
        assert_eq!(stretch_s(64, 10.0, 1_000_000), STRETCH_MIN_S);
        assert_eq!(stretch_s(4, 10.0, 0), STRETCH_MIN_S);
    }
}
