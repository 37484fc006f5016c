//! Sizing prompts to their target token counts, and request bodies.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ldb_client::Http;
use ldb_client::discovery::{Discovery, TokenizeKind};
use ldb_core::api::{Api, RequestInput};
use ldb_core::prompt::{Message, SizeModel, messages, nonce, padding, tolerance, with_system};
use serde_json::{Value, json};

use crate::calibration_cache::{CacheEntry, CalibrationCache};

/// A prompt sized for one context.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedPrompt {
    /// Padding characters.
    pub padding_chars: usize,
    /// Prompt tokens as counted by the server (None when only estimated).
    pub tokens: Option<u64>,
}

/// How prompts were sized.
#[derive(Debug, Clone)]
pub struct PromptPlan {
    /// Per-run nonce prefix.
    pub run_id: String,
    /// Sized prompts by nominal context.
    pub by_ctx: BTreeMap<u64, SizedPrompt>,
    /// The fitted size model.
    pub model: SizeModel,
    /// `exact` or `estimate`.
    pub targeting: &'static str,
    /// Event lines.
    pub notes: Vec<String>,
    /// Shared prefixes before the nonce (`shared_prefix.rs`), if asked.
    pub shared: Option<crate::shared_prefix::SharedPrefixes>,
}

impl PromptPlan {
    /// Messages for `ctx` with a nonce tagged `tag` (behind the first shared
    /// prefix, when there are some).
    pub fn messages(&self, ctx: u64, tag: &str) -> Vec<Message> {
        self.messages_in_group(ctx, tag, 0)
    }
}

/// Knobs of a streamed request body.
#[derive(Debug, Clone)]
pub struct BodyOptions {
    /// The API the body is written for.
    pub api: Api,
    /// `max_tokens`.
    pub max_tokens: u64,
    /// Ask for usage on every chunk.
    pub continuous_usage: bool,
    /// Send `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Temperature, if any.
    pub temperature: Option<f64>,
    /// `tools` and `tool_choice` (`--tools`), if any: the one place a chat
    /// body gets them.
    pub tools: Option<std::sync::Arc<ldb_core::tools::ToolSet>>,
}

/// A streamed request body in the options' API.
pub fn stream_body(model: &str, msgs: &[Message], o: BodyOptions) -> Bytes {
    Bytes::from(serde_json::to_vec(&stream_json(model, msgs, o)).unwrap_or_default())
}

/// [`stream_body`] as a JSON value, for callers that add a key. Written by
/// [`Api::body`], the one place each API's body shape lives; tool
/// definitions go only to the chat API (the flags refuse them with another).
pub fn stream_json(model: &str, msgs: &[Message], o: BodyOptions) -> serde_json::Value {
    let mut body = o.api.body(&RequestInput {
        model,
        messages: msgs,
        max_tokens: Some(o.max_tokens),
        continuous_usage: o.continuous_usage,
        ignore_eos: o.ignore_eos,
        temperature: o.temperature,
        ..RequestInput::default()
    });
    if let Some(t) = o.tools.as_ref().filter(|_| o.api == Api::Chat) {
        t.add_to(&mut body);
    }
    body
}

/// A random 12-letter run id.
pub fn run_id() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..12)
        .map(|_| rng.random_range(b'a'..=b'z') as char)
        .collect()
}

struct Counter<'a> {
    http: &'a Http,
    model: &'a str,
    kind: TokenizeKind,
    content_overhead: f64,
    /// The first shared prefix, put before the sized prompts.
    prefix: Option<String>,
}

impl Counter<'_> {
    async fn count(&self, msgs: &[Message]) -> Option<u64> {
        match self.kind {
            TokenizeKind::Chat => {
                let body = json!({"model": self.model, "messages": msgs});
                let (status, v) = self
                    .http
                    .post_json("/tokenize", &body, Duration::from_secs(120))
                    .await
                    .ok()?;
                if status != 200 {
                    return None;
                }
                v.get("count").and_then(Value::as_u64)
            }
            TokenizeKind::Content => {
                let text: String = msgs
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let body = json!({"content": text});
                let (status, v) = self
                    .http
                    .post_json("/tokenize", &body, Duration::from_secs(120))
                    .await
                    .ok()?;
                if status != 200 {
                    return None;
                }
                let n = v.get("tokens").and_then(Value::as_array)?.len() as f64;
                Some((n + self.content_overhead).round().max(0.0) as u64)
            }
            TokenizeKind::None => real_prompt_tokens(self.http, self.model, msgs).await,
        }
    }
}

impl Counter<'_> {
    /// The token ids of a prompt, where `/tokenize` returns them (the
    /// content route has no chat template: its framing is not in them).
    async fn token_ids(&self, msgs: &[Message]) -> Option<Vec<u64>> {
        let body = match self.kind {
            TokenizeKind::Chat => json!({"model": self.model, "messages": msgs}),
            TokenizeKind::Content => {
                let text: Vec<&str> = msgs.iter().map(|m| m.content.as_str()).collect();
                json!({"content": text.join("\n")})
            }
            TokenizeKind::None => return None,
        };
        let (status, v) = self
            .http
            .post_json("/tokenize", &body, Duration::from_secs(120))
            .await
            .ok()?;
        if status != 200 {
            return None;
        }
        v.get("tokens")?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect()
    }

    async fn count_owned(&self, msgs: Vec<Message>) -> Option<u64> {
        self.count(&msgs).await
    }

    /// `msgs` behind the shared prefix, if any.
    fn framed(&self, msgs: Vec<Message>) -> Vec<Message> {
        match &self.prefix {
            Some(p) => with_system(p, msgs),
            None => msgs,
        }
    }
}

/// Most tokenizer calls spent on one context.
const MAX_PROBES: usize = 20;

/// Padding that gives exactly `target` prompt tokens by the server's count,
/// or the closest count found. Secant steps get within a few tokens; then
/// a bisection between a count below and one above the target pins it (one
/// more padding character adds at most about one token). Returns the padding
/// and the count measured for that very padding.
async fn fit_exact<F, Fut>(
    count: F,
    model: &SizeModel,
    start: usize,
    target: u64,
) -> Option<(usize, u64)>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Option<u64>>,
{
    let mut probes = 0;
    let mut best: Option<(usize, u64)> = None;
    let mut below: Option<(usize, u64)> = None;
    let mut above: Option<(usize, u64)> = None;
    let mut chars = start;
    while probes < MAX_PROBES {
        let Some(n) = count(chars).await else {
            break;
        };
        probes += 1;
        if best.is_none_or(|(_, b)| n.abs_diff(target) < b.abs_diff(target)) {
            best = Some((chars, n));
        }
        if n == target {
            break;
        }
        if n < target && below.is_none_or(|(c, _)| chars > c) {
            below = Some((chars, n));
        }
        if n > target && above.is_none_or(|(c, _)| chars < c) {
            above = Some((chars, n));
        }
        chars = match (below, above) {
            (Some((lo, _)), Some((hi, _))) if hi > lo + 1 => lo + (hi - lo) / 2,
            // Adjacent paddings straddle the target: it cannot be hit exactly.
            (Some(_), Some(_)) => break,
            _ if n.abs_diff(target) > tolerance(target) => model.refine(chars, n, target),
            // Close: step by the error, at least one character, to bracket it.
            _ if n < target => chars + (model.refine(chars, n, target) - chars).max(1),
            _ => chars - (chars - model.refine(chars, n, target)).max(1).min(chars),
        };
    }
    best
}

/// Prompt tokens of a real `max_tokens=1` request (usage), for servers with no tokenizer route.
pub async fn real_prompt_tokens(http: &Http, model: &str, msgs: &[Message]) -> Option<u64> {
    let body = json!({"model": model, "messages": msgs, "max_tokens": 1, "stream": false});
    let (status, v) = http
        .post_json("/v1/chat/completions", &body, Duration::from_secs(600))
        .await
        .ok()?;
    if status != 200 {
        return None;
    }
    v.pointer("/usage/prompt_tokens").and_then(Value::as_u64)
}

/// Size every context in `contexts` (0 needs no padding); `count_each`
/// counts each context's prompt where the server can (exact targeting),
/// else the calibration fit alone sizes them (estimate). With
/// `shared_prefix = (tokens, groups)`, prompts open with shared prefixes
/// and each context's size includes one.
pub async fn size_prompts(
    http: &Http,
    disc: &Discovery,
    contexts: &[u64],
    calibration_context: u64,
    cache: Option<&Path>,
    count_each: bool,
    shared_prefix: (u64, u32),
) -> PromptPlan {
    let run_id = run_id();
    let mut notes = Vec::new();
    let mut counter = Counter {
        http,
        model: &disc.model,
        kind: disc.tokenize,
        content_overhead: 0.0,
        prefix: None,
    };
    let max_ctx = contexts.iter().copied().max().unwrap_or(0);
    let cal_ctx = calibration_context.min(max_ctx.max(1024)).max(1024);
    if counter.kind == TokenizeKind::Content {
        // llama.cpp tokenizes text without the chat template: measure the
        // template's share once with a real request.
        let m = messages(&nonce(&run_id, "cal"), CAL_SMALL);
        let real = real_prompt_tokens(http, &disc.model, &m).await;
        let text = counter.count(&m).await;
        match (real, text) {
            (Some(r), Some(t)) => counter.content_overhead = r as f64 - t as f64,
            _ => counter.kind = TokenizeKind::None,
        }
    }
    let model = calibrate(&counter, disc, &run_id, cal_ctx, cache, &mut notes).await;
    let exact = count_each && model.is_some() && counter.kind != TokenizeKind::None;
    let model = model.unwrap_or(SizeModel {
        chars_per_token: 4.0,
        overhead_tokens: 0.0,
    });
    let shared = match shared_prefix {
        (0, _) => None,
        (tokens, groups) => {
            let mut s = crate::shared_prefix::SharedPrefixes::new(
                &run_id,
                tokens,
                groups,
                model.chars_per_token,
            );
            s.counted = count_shared(&counter, &s.texts[0]).await;
            notes.push(format!(
                "shared prefixes: {} of {} tokens ({})",
                s.texts.len(),
                s.tokens(),
                if s.counted.is_some() {
                    "counted"
                } else {
                    "estimated"
                }
            ));
            counter.prefix = Some(s.texts[0].clone());
            Some(s)
        }
    };
    // Sized prompts carry the prefix: its tokens are framing.
    let sizing = SizeModel {
        overhead_tokens: model.overhead_tokens + shared.as_ref().map_or(0.0, |s| s.tokens() as f64),
        ..model
    };
    let mut by_ctx = BTreeMap::new();
    for &ctx in contexts {
        let sized = size_one(&counter, disc, &run_id, &sizing, exact, ctx).await;
        if ctx > 0 {
            notes.push(sized_note(ctx, &sized));
        }
        by_ctx.insert(ctx, sized);
    }
    PromptPlan {
        run_id,
        by_ctx,
        model,
        targeting: if exact { "exact" } else { "estimate" },
        notes,
        shared,
    }
}

/// Tokens the prompts behind one shared prefix have in common, by the
/// server's tokenizer: the common leading token ids of two prompts whose
/// nonces differ at their first character, as the nonces of rate requests
/// do (`prefix_run::rate_request`). So the chat template's framing around
/// the prefix and the nonce's opening count as shared, as the engine sees
/// them. `None` when the server does not return token ids.
async fn count_shared(counter: &Counter<'_>, text: &str) -> Option<u64> {
    let probe = |code: &str| with_system(text, messages(&format!("[ldb {code} shared]"), 0));
    let a = counter.token_ids(&probe("a")).await?;
    let b = counter.token_ids(&probe("b")).await?;
    Some(a.iter().zip(&b).take_while(|(x, y)| x == y).count() as u64)
}

/// Padding characters of the small calibration probe.
const CAL_SMALL: usize = 2000;

/// The chars-per-token model: from the calibration cache when the server
/// cannot count tokens, else from a two-point probe (cached on success).
async fn calibrate(
    counter: &Counter<'_>,
    disc: &Discovery,
    run_id: &str,
    cal_ctx: u64,
    cache: Option<&Path>,
    notes: &mut Vec<String>,
) -> Option<SizeModel> {
    let cache_key = format!("{}:{}:{}", disc.engine.as_str(), disc.model, template_id());
    if counter.kind == TokenizeKind::None
        && let Some(m) = cache.and_then(|p| read_cache(p, &cache_key))
    {
        notes.push(format!(
            "calibrated: {:.2} chars/token, overhead {:.0} tokens (cached)",
            m.chars_per_token, m.overhead_tokens
        ));
        return Some(m);
    }
    let big = (cal_ctx as usize) * 4;
    let a = counter
        .count(&messages(&nonce(run_id, "cal"), CAL_SMALL))
        .await;
    let b = counter.count(&messages(&nonce(run_id, "cal"), big)).await;
    let model = match (a, b) {
        (Some(a), Some(b)) => SizeModel::fit((CAL_SMALL, a), (big, b)),
        _ => None,
    };
    match model {
        Some(m) => {
            notes.push(format!(
                "calibrated: {:.2} chars/token, overhead {:.0} tokens (two-point probe)",
                m.chars_per_token, m.overhead_tokens
            ));
            if counter.kind == TokenizeKind::None
                && let Some(p) = cache
            {
                write_cache(p, &cache_key, &m);
            }
        }
        None => notes
            .push("calibration failed; assuming 4 chars/token (prompt sizes are estimates)".into()),
    }
    model
}

/// The prompt of one context: padding sized by the model, then fitted
/// exactly when the server counts tokens.
async fn size_one(
    counter: &Counter<'_>,
    disc: &Discovery,
    run_id: &str,
    model: &SizeModel,
    exact: bool,
    ctx: u64,
) -> SizedPrompt {
    let tag = format!("ctx{ctx}");
    if ctx == 0 {
        let m = counter.framed(messages(&nonce(run_id, &tag), 0));
        let tokens = if !exact {
            None
        } else if counter.kind == TokenizeKind::Content {
            // The template overhead was measured on the three-message shape
            // of padded prompts; the bare prompt is one message, with less
            // framing (SmolLM2: 9 tokens less). Count it for real.
            real_prompt_tokens(counter.http, &disc.model, &m).await
        } else {
            counter.count(&m).await
        };
        return SizedPrompt {
            padding_chars: 0,
            tokens,
        };
    }
    let mut chars = model.chars_for(ctx);
    let mut tokens = None;
    if exact {
        let count =
            |c: usize| counter.count_owned(counter.framed(messages(&nonce(run_id, &tag), c)));
        if let Some((c, n)) = fit_exact(count, model, chars, ctx).await {
            (chars, tokens) = (c, Some(n));
        }
    }
    SizedPrompt {
        padding_chars: chars,
        tokens,
    }
}

/// The startup line of one sized context.
fn sized_note(ctx: u64, p: &SizedPrompt) -> String {
    let at = ldb_core::tokens::format_context(ctx);
    match p.tokens {
        Some(t) => format!("context {at}: {} chars, {t} tokens", p.padding_chars),
        None => format!(
            "context {at}: {} chars (~{ctx} tokens, estimated)",
            p.padding_chars
        ),
    }
}

fn template_id() -> String {
    // Changes whenever the padding or the prompt text changes.
    let text = format!("{}{}", padding(4096), ldb_core::prompt::GENERATION_PROMPT);
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")[..12].to_string()
}

fn read_cache(path: &Path, key: &str) -> Option<SizeModel> {
    CalibrationCache::read(path).model(key)
}

fn write_cache(path: &Path, key: &str, m: &SizeModel) {
    let mut cache = CalibrationCache::read(path);
    cache.set(
        key,
        &CacheEntry {
            chars_per_token: m.chars_per_token,
            overhead_tokens: m.overhead_tokens,
            updated_at: chrono::Local::now().to_rfc3339(),
        },
    );
    cache.write(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> SizeModel {
        SizeModel {
            chars_per_token: 4.0,
            overhead_tokens: 40.0,
        }
    }

    #[tokio::test]
    async fn sizes_hit_the_target_exactly_when_a_padding_can() {
        // A tokenizer a little off the model: 4.37 chars per token, 43 tokens
        // of framing.
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let count = |c: usize| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move { Some(43 + (c as f64 / 4.37).floor() as u64) }
        };
        for target in [1024u64, 8192, 131_072] {
            let start = model().chars_for(target);
            let (chars, n) = fit_exact(count, &model(), start, target)
                .await
                .expect("fit");
            assert_eq!(n, target, "target {target}");
            assert_eq!(43 + (chars as f64 / 4.37).floor() as u64, n);
        }
        assert!(calls.into_inner() <= 3 * MAX_PROBES);
    }

    #[tokio::test]
    async fn an_unreachable_count_gives_the_closest_with_its_own_padding() {
        // Every character adds two tokens: odd targets cannot be hit.
        let count = |c: usize| async move { Some(10 + 2 * c as u64) };
        let (chars, n) = fit_exact(count, &model(), 100, 1001).await.expect("fit");
        assert_eq!(n.abs_diff(1001), 1);
        assert_eq!(
            n,
            10 + 2 * chars as u64,
            "the count belongs to the padding returned"
        );
        // A tokenizer that stops answering keeps the best so far.
        let flaky = |c: usize| async move { (c < 4000).then_some(10 + c as u64 / 4) };
        let r = fit_exact(flaky, &model(), 3960, 1024).await;
        assert!(r.is_some_and(|(c, n)| n == 10 + c as u64 / 4));
    }
}
