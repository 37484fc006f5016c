//! Prefill samples: a `max_tokens=1` request timed to its first token, with
//! server-side validation from Prometheus counters or llama.cpp timings.

use ldb_core::failure::{FailureKind, RequestError};
use std::sync::Arc;
use std::time::Duration;

use ldb_client::scrape::{Scrape, Scraper};
use ldb_client::stream::{CellCounters, SharedWindow, StreamEnv, run_stream};
use ldb_core::engine::{Engine, ServerSnapshot};
use ldb_core::hardware::HardwareSummary;
use ldb_core::prompt::Message;
use ldb_core::result::{PrefillEntry, PrefillMethod, ServerValidation, round};
use tokio_util::sync::CancellationToken;

use crate::prompts::{BodyOptions, stream_body};

/// One timed prefill request.
#[derive(Debug, Clone, Default)]
pub struct ProbeResult {
    /// Seconds from send to the first token (or to the finish, if no text came).
    pub ttft: f64,
    /// Prompt tokens from usage.
    pub prompt_tokens: Option<u64>,
    /// Cached prompt tokens, if reported.
    pub cached_tokens: Option<u64>,
    /// llama.cpp timings of the request.
    pub timings: Option<ldb_core::chunk::Timings>,
    /// Failure, if any.
    pub error: Option<RequestError>,
    /// No chunk carried a token, so `ttft` was taken at the end of the stream.
    pub ttft_at_stream_end: bool,
}

/// Send one `max_tokens=1` streaming request and time it.
pub async fn probe(
    env_base: &StreamEnv,
    model: &str,
    msgs: &[Message],
    cancel: &CancellationToken,
) -> ProbeResult {
    let env = StreamEnv {
        window: Arc::new(SharedWindow::default()),
        counters: Arc::new(CellCounters::default()),
        cancel: cancel.child_token(),
        text_sink: None,
        texts: None,
        ..env_base.clone()
    };
    let body = stream_body(
        model,
        msgs,
        BodyOptions {
            api: env.http.api(),
            max_tokens: 1,
            continuous_usage: false,
            ignore_eos: false,
            temperature: None,
            tools: None,
        },
    );
    let out = run_stream(&env, body).await;
    let sample = out.track.to_sample(out.track.start(), Default::default());
    let mut r = ProbeResult {
        ttft: sample.ttft,
        prompt_tokens: (sample.input_tokens > 0).then_some(sample.input_tokens),
        cached_tokens: out.cached_tokens,
        timings: out.timings,
        error: out.track.error().cloned(),
        ttft_at_stream_end: false,
    };
    if out.cancelled {
        r.error = Some(RequestError::new(FailureKind::Skipped, "skipped"));
    } else if r.error.is_none() && !out.track.has_first_token() {
        if let Some(end) = sample.end_s.or(Some(env.clock.now() - out.track.start())) {
            r.ttft = end.max(0.0);
            r.ttft_at_stream_end = true;
        }
        if r.ttft <= 0.0 {
            r.error = Some(RequestError::new(
                FailureKind::NoFirstToken,
                "no first token",
            ));
        }
    }
    r
}

/// Wait until the server reports nothing running or waiting for ≥ 1 s (max `limit`).
pub async fn wait_idle(
    scraper: &Scraper,
    clock_now: impl Fn() -> f64,
    limit: Duration,
) -> Option<Arc<Scrape>> {
    let deadline = clock_now() + limit.as_secs_f64();
    let mut idle_since: Option<f64> = None;
    let mut last = None;
    while clock_now() < deadline {
        let s = scraper
            .fresh_after(clock_now(), Duration::from_secs(6))
            .await;
        if let Some(s) = s {
            let idle = s.snap.running.unwrap_or(0.0) <= 0.0 && s.snap.waiting.unwrap_or(0.0) <= 0.0;
            if idle {
                let since = *idle_since.get_or_insert(s.t);
                if s.t - since >= 1.0 {
                    return Some(s);
                }
            } else {
                idle_since = None;
            }
            last = Some(s);
        } else {
            return last;
        }
    }
    last
}

fn d(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => b - a,
        _ => 0.0,
    }
}

/// Server validation from two idle snapshots around one prefill request.
pub fn validate(
    engine: Engine,
    before: &ServerSnapshot,
    after: &ServerSnapshot,
    usage_prompt: Option<u64>,
    cached: Option<u64>,
) -> ServerValidation {
    let count = d(before.prefill_time_count, after.prefill_time_count);
    let success = d(before.request_success, after.request_success);
    let secs = d(before.prefill_time_sum, after.prefill_time_sum);
    let kv = d(before.prefill_kv_computed, after.prefill_kv_computed);
    let local = d(before.prompt_local_compute, after.prompt_local_compute);
    let total = d(before.prompt_tokens, after.prompt_tokens);
    let (tokens, source) = match engine {
        Engine::Vllm if kv > 0.0 => (kv, "kv_computed"),
        Engine::Vllm if local > 0.0 => (local, "local_compute"),
        _ => (total, "request_total"),
    };
    let mut v = ServerValidation {
        request_prompt_tokens: total.max(0.0).round() as u64,
        cached_tokens: cached.unwrap_or_else(|| {
            d(before.prompt_cached, after.prompt_cached)
                .max(0.0)
                .round() as u64
        }),
        token_source: source.into(),
        ..ServerValidation::default()
    };
    let in_range = |x: f64| (0.5..=1.5).contains(&x);
    let mut problems = Vec::new();
    if !in_range(count) {
        problems.push(format!("prefill_count_delta={count}"));
    }
    if !in_range(success) {
        problems.push(format!("request_success_delta={success}"));
    }
    if tokens <= 0.0 {
        problems.push(format!("token_delta={tokens}"));
    }
    if secs <= 0.0 {
        problems.push(format!("prefill_seconds_delta={secs:.4}"));
    }
    if source == "request_total"
        && let Some(u) = usage_prompt
        && (tokens - u as f64).abs() > 1.0
    {
        problems.push(format!("server_tokens={tokens} usage_prompt_tokens={u}"));
    }
    if problems.is_empty() {
        v.method = format!("prometheus:{source}");
        v.tok_per_sec = (tokens / secs).round();
        v.prefill_seconds = round(secs, 3);
        v.prompt_tokens = tokens.round() as u64;
        v.samples = 1;
    } else {
        v.invalid_reason = problems.join(", ");
    }
    v
}

/// Validation from llama.cpp's own per-request timings.
pub fn validate_timings(t: &ldb_core::chunk::Timings) -> ServerValidation {
    let mut v = ServerValidation {
        token_source: "llamacpp_timings".into(),
        cached_tokens: t.cache_n as u64,
        ..Default::default()
    };
    if t.prompt_n > 0.0 && t.prompt_ms > 0.0 {
        v.method = "llamacpp:timings".into();
        v.prompt_tokens = t.prompt_n as u64;
        v.request_prompt_tokens = (t.prompt_n + t.cache_n) as u64;
        v.prefill_seconds = round(t.prompt_ms / 1000.0, 3);
        v.tok_per_sec = (t.prompt_n / (t.prompt_ms / 1000.0)).round();
        v.samples = 1;
    } else {
        v.invalid_reason = format!("timings prompt_n={} prompt_ms={}", t.prompt_n, t.prompt_ms);
    }
    v
}

/// One prefill sample with its server-side check: wait for an idle server
/// and snapshot its prefill counters, send the probe, wait for idle again and
/// diff (vLLM, SGLang; only when `use_counters`); llama.cpp's own `timings`
/// otherwise. The validation is empty when the probe failed or the server
/// offers neither.
pub async fn validated_probe(
    rc: &crate::ctx::RunCtx,
    env: &StreamEnv,
    msgs: &[Message],
    cancel: &CancellationToken,
    use_counters: bool,
) -> (ProbeResult, ServerValidation) {
    let now = || rc.clock.now();
    let idle_limit = Duration::from_secs(120);
    let prom = use_counters && rc.metrics && matches!(rc.engine, Engine::Vllm | Engine::Sglang);
    let before = if prom && wait_idle(&rc.scraper, now, idle_limit).await.is_some() {
        rc.scraper.scrape_once().await
    } else {
        None
    };
    let measuring = rc.scraper.measuring();
    let p = probe(env, &rc.model, msgs, cancel).await;
    // Back to the quick pace: the idle wait below wants fresh gauges.
    drop(measuring);
    let validation = match (&before, &p.timings) {
        _ if p.error.is_some() => ServerValidation::default(),
        (Some(b), _) => {
            wait_idle(&rc.scraper, now, idle_limit).await;
            match rc.scraper.scrape_once().await {
                Some(a) => validate(
                    rc.engine,
                    &b.snap,
                    &a.snap,
                    p.prompt_tokens,
                    p.cached_tokens,
                ),
                None => ServerValidation {
                    invalid_reason: "no /metrics answer after the sample".into(),
                    ..Default::default()
                },
            }
        }
        (None, Some(t)) => validate_timings(t),
        (None, None) => ServerValidation::default(),
    };
    (p, validation)
}

/// A prefill row from a probe.
pub fn entry(
    method: PrefillMethod,
    ctx: u64,
    p: &ProbeResult,
    validation: ServerValidation,
    use_server: bool,
) -> PrefillEntry {
    let tokens = p.prompt_tokens.unwrap_or(ctx);
    let client_tps = if p.ttft > 0.0 {
        (tokens as f64 / p.ttft).round()
    } else {
        0.0
    };
    let server_ok = validation.samples > 0;
    let (headline, secs, method) = if use_server && server_ok {
        (
            validation.tok_per_sec,
            validation.prefill_seconds,
            PrefillMethod::Prometheus,
        )
    } else {
        (client_tps, round(p.ttft, 3), method)
    };
    PrefillEntry {
        ttft_seconds: round(p.ttft, 3),
        prefill_seconds: secs,
        tok_per_sec: headline,
        client_ttft_seconds: round(p.ttft, 3),
        client_tok_per_sec: client_tps,
        prompt_tokens: tokens,
        samples: 1,
        method: Some(method),
        server_validation: validation,
        hardware_summary: HardwareSummary::default(),
        skipped: false,
        skip_reason: String::new(),
        label: if p.ttft_at_stream_end {
            "client prompt_tokens / time to the end of the stream (no chunk carried a token; \
             includes queueing, HTTP and the first decode step)"
        } else {
            "client prompt_tokens / TTFT (includes queueing, HTTP and the first decode step)"
        }
        .into(),
        prefill_mode: String::new(),
    }
}
