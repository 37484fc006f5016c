//! Standalone cold prefill (`--standalone-prefill`, `--prefill-only`).
//!
//! For each context of `--prefill-contexts`, `max_tokens=1` requests are timed
//! one after another. Each sample's prompt starts with its own 16-hex-digit
//! hash of (run, context, repetition), right after the chat template's header,
//! so no sample shares even its first cache block with another request and
//! every sample prefills the whole prompt. (The decode prompts start with the
//! run's common `[ldb <run>-` prefix instead; here that would let a 16-token
//! first block be shared.)
//! With `--shared-prefix-tokens` every sample opens with the run's warmed
//! prefix 0 instead, and the row measures the prefill of the rest
//! (`prefill_mode = warm_prefix`, see [`cold_messages`]).
//!
//! Sampling rule: keep sampling until `--prefill-duration` seconds have passed
//! since the context started **and** at least two samples succeeded (so the
//! median is never a single, possibly unlucky request). A context stops early
//! after two consecutive failed requests (e.g. the server rejects the length)
//! or when the user skips it, and after at most [`MAX_ATTEMPTS`] requests.
//!
//! Aggregation: medians over the successful samples of TTFT, prompt tokens and
//! client tok/s (prompt_tokens / TTFT, per sample); server values are medians
//! over the samples whose Prometheus validation was valid. Validity is the
//! bounded rule shared with the integrated scouts: between the two idle
//! snapshots around a sample the prefill count and the success count each grew
//! by one (0.5 ≤ Δ ≤ 1.5), so a concurrent request cannot be merged into it.
//!
//! `--prefill-metric`: `client` times the requests back to back without
//! Prometheus; `auto` brackets each sample with idle snapshots and keeps the
//! server value as validation; `prometheus` does the same and makes the server
//! median the headline when at least one sample was valid (else the client
//! value stays the headline and `method` says `client`). llama.cpp's own
//! per-request timings are used as validation whenever the server sends them.

use ldb_client::stream::StreamEnv;
use ldb_core::hardware::HardwareSummary;
use ldb_core::live::LiveEvent;
use ldb_core::prompt::{Message, messages, nonce};
use ldb_core::result::{PrefillEntry, PrefillMethod, ServerValidation, round};
use ldb_core::stats::median;
use ldb_core::tokens::{format_context, thousands};
use tokio_util::sync::CancellationToken;

use crate::config::PrefillMetric;
use crate::ctx::RunCtx;
use crate::prefill::{ProbeResult, validated_probe};
use crate::prompts::PromptPlan;

/// Upper bound on requests per context (a very fast server and a long duration).
pub const MAX_ATTEMPTS: u32 = 200;

/// Minimum successful samples per context.
pub const MIN_SAMPLES: usize = 2;

/// The row of a context that cannot be sent: longer than the prefill limit.
pub fn beyond_limit(ctx: u64, limit: u64, model_context: u64) -> PrefillEntry {
    let why = if model_context > 0 {
        format!(
            "context {ctx} exceeds the prefill limit {limit} (model context {model_context} − 64, at most 128k)"
        )
    } else {
        format!("context {ctx} exceeds the prefill limit {limit} (at most 128k)")
    };
    PrefillEntry {
        skipped: true,
        skip_reason: why,
        method: Some(PrefillMethod::Client),
        ..Default::default()
    }
}

/// The prompt of sample `r` at `ctx`: as long as the plan's, unique from its
/// second character on (`[` + 16 hex digits). With shared prefixes
/// (`--shared-prefix-tokens`) it opens with group 0's prefix, which the run
/// warmed, and the tag opens as the nonces do (`[ldb ` + 16 hex digits), so
/// exactly the counted shared tokens are cached and the rest is cold: the
/// row then measures the prefill of the rest (`prefill_mode = warm_prefix`,
/// as the scouts' rows).
pub fn cold_messages(plan: &PromptPlan, ctx: u64, r: u32) -> Vec<Message> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&plan.run_id, ctx, r).hash(&mut h);
    let chars = plan.by_ctx.get(&ctx).map_or(0, |p| p.padding_chars);
    // As long as the plan's nonce `[ldb <12-letter run>-ctx<ctx>]`, so the
    // prompt keeps its sized token count.
    let opening = if plan.shared.is_some() { "ldb " } else { "" };
    let tag = format!("[{opening}{:016x} {}]", h.finish(), ctx);
    let plain = nonce(&plan.run_id, &format!("ctx{ctx}"));
    let tag = if tag.len() < plain.len() {
        format!("{tag:<width$}", width = plain.len())
    } else {
        tag
    };
    match &plan.shared {
        Some(s) => s.wrap(0, messages(&tag, chars)),
        None => messages(&tag, chars),
    }
}

struct Sample {
    probe: ProbeResult,
    validation: ServerValidation,
}

/// Profile one context and return its row.
pub async fn profile(rc: &RunCtx, env: &StreamEnv, plan: &PromptPlan, ctx: u64) -> PrefillEntry {
    let skip = rc.controls.new_skip();
    let metric = rc.cfg.prefill.prefill_metric;
    let word = if metric == PrefillMetric::Prometheus {
        "prometheus"
    } else {
        "client"
    };
    announce_start(rc, ctx, word);
    let hw_mark = rc.hw_mark();
    let (samples, first_error) = take_samples(rc, env, plan, ctx, &skip, word).await;
    let (hw, _) = rc.hw_since(hw_mark);
    let mut row = aggregate(ctx, &samples, metric == PrefillMetric::Prometheus);
    row.hardware_summary = hw;
    if plan.shared.is_some() && !samples.is_empty() {
        crate::prefix_run::warm_prefix_row(&mut row, rc.prefix.shared_tokens());
    }
    if samples.is_empty() {
        row.skipped = true;
        row.skip_reason = first_error.unwrap_or_else(|| {
            if rc.controls.stop.is_cancelled() {
                "run stopped by the user".into()
            } else {
                "skipped by the user".into()
            }
        });
    } else if let Ok(mut g) = rc.prefill_rate.lock() {
        *g = Some(row.client_tok_per_sec);
    }
    announce_end(rc, ctx, &row);
    row
}

/// The row appears on the dashboard with its estimated time.
fn announce_start(rc: &RunCtx, ctx: u64, word: &str) {
    rc.live.event(format!(
        "standalone prefill start ctx={} ({word}, {} s)",
        format_context(ctx),
        rc.cfg.prefill.prefill_duration
    ));
    let rate = rc.prefill_rate.lock().ok().and_then(|g| *g);
    let eta = rate.map(|r| (ctx as f64 / r).max(rc.cfg.prefill.prefill_duration));
    rc.live.send(LiveEvent::PrefillStarted {
        context: ctx,
        method: word.into(),
        eta,
    });
}

/// Cold samples until `--prefill-duration` has passed with at least
/// `MIN_SAMPLES` good ones, two failures in a row, a skip, or
/// `MAX_ATTEMPTS`. Returns the good samples and the first failure.
async fn take_samples(
    rc: &RunCtx,
    env: &StreamEnv,
    plan: &PromptPlan,
    ctx: u64,
    skip: &CancellationToken,
    word: &str,
) -> (Vec<Sample>, Option<String>) {
    let validate = rc.cfg.prefill.prefill_metric != PrefillMetric::Client;
    let t0 = rc.clock.now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut failures_in_row = 0;
    let mut first_error: Option<String> = None;
    for r in 0..MAX_ATTEMPTS {
        let enough =
            samples.len() >= MIN_SAMPLES && rc.clock.now() - t0 >= rc.cfg.prefill.prefill_duration;
        if skip.is_cancelled() || enough || failures_in_row >= 2 {
            break;
        }
        let msgs = cold_messages(plan, ctx, r);
        let (p, validation) = validated_probe(rc, env, &msgs, skip, validate).await;
        if let Some(e) = &p.error {
            if !e.is_skip() {
                failures_in_row += 1;
                first_error.get_or_insert_with(|| e.message.clone());
                rc.live.event(format!(
                    "standalone prefill sample failed ctx={}: {e}",
                    format_context(ctx)
                ));
            }
            continue;
        }
        failures_in_row = 0;
        show_sample(rc, ctx, word, &p, samples.len() + 1, rc.clock.now() - t0);
        samples.push(Sample {
            probe: p,
            validation,
        });
    }
    (samples, first_error)
}

/// The latest sample on the dashboard's prefill row.
fn show_sample(rc: &RunCtx, ctx: u64, word: &str, p: &ProbeResult, ok: usize, elapsed: f64) {
    let tokens = p.prompt_tokens.unwrap_or(ctx) as f64;
    let tps = if p.ttft > 0.0 { tokens / p.ttft } else { 0.0 };
    let left = (rc.cfg.prefill.prefill_duration - elapsed).max(0.0);
    rc.live.send(LiveEvent::PrefillSampled {
        context: ctx,
        ttft: p.ttft,
        elapsed,
        eta: left,
        method: (tps > 0.0).then(|| format!("{word} ({ok} samples, last {tps:.0} tok/s)")),
    });
}

/// The finished (or skipped) row in the event log and on the dashboard.
fn announce_end(rc: &RunCtx, ctx: u64, row: &PrefillEntry) {
    if row.skipped {
        rc.live.event(format!(
            "standalone prefill skipped ctx={}: {}",
            format_context(ctx),
            row.skip_reason
        ));
    } else {
        rc.live.event(format!(
            "standalone prefill done ctx={} {} tok/s ({} samples, {})",
            format_context(ctx),
            thousands(row.tok_per_sec as u64),
            row.samples,
            row.method.map_or("", PrefillMethod::as_str)
        ));
    }
    rc.live.send(LiveEvent::PrefillFinished {
        context: ctx,
        method: Some(row.method.map_or("", PrefillMethod::as_str).into()),
        tok_per_sec: (!row.skipped).then_some(row.tok_per_sec),
        ttft: (!row.skipped).then_some(row.ttft_seconds),
        skipped: row.skipped.then(|| row.skip_reason.clone()),
    });
}

/// Medians over successful samples; server medians over valid validations.
fn aggregate(ctx: u64, samples: &[Sample], server_headline: bool) -> PrefillEntry {
    let ttft = median(samples.iter().map(|s| s.probe.ttft));
    let tokens = median(
        samples
            .iter()
            .map(|s| s.probe.prompt_tokens.unwrap_or(ctx) as f64),
    );
    let client_tps = median(
        samples
            .iter()
            .filter(|s| s.probe.ttft > 0.0)
            .map(|s| s.probe.prompt_tokens.unwrap_or(ctx) as f64 / s.probe.ttft),
    );
    let valid: Vec<&ServerValidation> = samples
        .iter()
        .map(|s| &s.validation)
        .filter(|v| v.samples > 0)
        .collect();
    let mut sv = ServerValidation {
        cached_tokens: samples
            .iter()
            .map(|s| {
                s.probe
                    .cached_tokens
                    .unwrap_or(0)
                    .max(s.validation.cached_tokens)
            })
            .max()
            .unwrap_or(0),
        invalid_reason: samples
            .iter()
            .map(|s| s.validation.invalid_reason.as_str())
            .find(|r| !r.is_empty())
            .unwrap_or_default()
            .to_string(),
        ..Default::default()
    };
    if let Some(first) = valid.first() {
        sv.method = first.method.clone();
        sv.token_source = first.token_source.clone();
        sv.tok_per_sec = median(valid.iter().map(|v| v.tok_per_sec)).round();
        sv.prefill_seconds = round(median(valid.iter().map(|v| v.prefill_seconds)), 3);
        sv.prompt_tokens = median(valid.iter().map(|v| v.prompt_tokens as f64)).round() as u64;
        sv.request_prompt_tokens =
            median(valid.iter().map(|v| v.request_prompt_tokens as f64)).round() as u64;
        sv.samples = valid.len() as u64;
    } else if let Some(s) = samples
        .iter()
        .find(|s| !s.validation.token_source.is_empty())
    {
        sv.token_source = s.validation.token_source.clone();
        sv.request_prompt_tokens = s.validation.request_prompt_tokens;
    }
    let use_server = server_headline && sv.samples > 0;
    let (headline, secs, method, label) = if use_server {
        (
            sv.tok_per_sec,
            sv.prefill_seconds,
            PrefillMethod::Prometheus,
            "server prefill counters: computed prompt tokens / prefill seconds (median over valid samples)",
        )
    } else {
        (
            client_tps.round(),
            round(ttft, 3),
            PrefillMethod::Client,
            "client prompt_tokens / TTFT, median over cold samples (includes queueing, HTTP and the first decode step)",
        )
    };
    PrefillEntry {
        ttft_seconds: round(ttft, 3),
        prefill_seconds: secs,
        tok_per_sec: headline,
        client_ttft_seconds: round(ttft, 3),
        client_tok_per_sec: client_tps.round(),
        prompt_tokens: tokens.round() as u64,
        samples: samples.len() as u64,
        method: Some(method),
        server_validation: sv,
        hardware_summary: HardwareSummary::default(),
        skipped: false,
        skip_reason: String::new(),
        label: label.into(),
        prefill_mode: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ttft: f64, tokens: u64, server: Option<f64>) -> Sample {
        Sample {
            probe: ProbeResult {
                ttft,
                prompt_tokens: Some(tokens),
                ..Default::default()
            },
            validation: match server {
                Some(t) => ServerValidation {
                    method: "prometheus:kv_computed".into(),
                    tok_per_sec: t,
                    prefill_seconds: tokens as f64 / t,
                    prompt_tokens: tokens,
                    request_prompt_tokens: tokens,
                    token_source: "kv_computed".into(),
                    samples: 1,
                    ..Default::default()
                },
                None => ServerValidation {
                    invalid_reason: "prefill_count_delta=2".into(),
                    token_source: "kv_computed".into(),
                    ..Default::default()
                },
            },
        }
    }

    #[test]
    fn medians_and_the_server_headline() {
        let samples = [
            s(1.0, 1000, Some(1100.0)),
            s(2.0, 1000, None),
            s(0.5, 1000, Some(2100.0)),
        ];
        let row = aggregate(1024, &samples, false);
        assert_eq!(row.method, Some(PrefillMethod::Client));
        assert_eq!(row.ttft_seconds, 1.0);
        assert_eq!(row.tok_per_sec, 1000.0);
        assert_eq!(row.samples, 3);
        assert_eq!(row.server_validation.samples, 2);
        assert_eq!(row.server_validation.tok_per_sec, 1600.0);
        assert_eq!(
            row.server_validation.invalid_reason,
            "prefill_count_delta=2"
        );
        let row = aggregate(1024, &samples, true);
        assert_eq!(row.method, Some(PrefillMethod::Prometheus));
        assert_eq!(row.tok_per_sec, 1600.0);
        assert_eq!(row.client_tok_per_sec, 1000.0);
        // No valid server sample: the client value stays the headline.
        let row = aggregate(1024, &[s(1.0, 1000, None), s(1.0, 1000, None)], true);
        assert_eq!(row.method, Some(PrefillMethod::Client));
        assert_eq!(row.tok_per_sec, 1000.0);
    }

    #[test]
    fn cold_prompts_differ_after_the_bracket_and_keep_their_size() {
        let plan = PromptPlan {
            run_id: "abcdefghijkl".into(),
            by_ctx: [(
                4096,
                crate::prompts::SizedPrompt {
                    padding_chars: 1000,
                    tokens: None,
                },
            )]
            .into(),
            model: ldb_core::prompt::SizeModel {
                chars_per_token: 4.0,
                overhead_tokens: 0.0,
            },
            targeting: "exact",
            notes: vec![],
            shared: None,
        };
        let a = cold_messages(&plan, 4096, 0);
        let b = cold_messages(&plan, 4096, 1);
        let sized = plan.messages(4096, "ctx4096");
        assert_eq!(a[0].content.len(), sized[0].content.len());
        assert_eq!(b[0].content.len(), sized[0].content.len());
        // The 16 hex digits right after the opening bracket differ.
        assert_ne!(a[0].content[1..17], b[0].content[1..17]);
    }

    #[test]
    fn beyond_limit_is_a_skip_with_the_reason() {
        let r = beyond_limit(131072, 65472, 65536);
        assert!(r.skipped);
        assert!(r.skip_reason.contains("65472"), "{}", r.skip_reason);
    }
}
