//! The prefix-cache steps of a run: at startup the granularity, the
//! prompts' sizes for the intended model, the reset before the run and the
//! warm-up of the shared prefixes; before each cell its reset; around each
//! measured span the intended and achieved hit rates.

use bytes::Bytes;
use ldb_client::discovery::Discovery;
use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::prompt::Message;
use ldb_core::result::{PrefixCacheCell, ResetStatus, RunPrefixCache};
use ldb_core::window::WindowBounds;

use crate::cache_granularity::discover_cache_granularity;
use crate::cache_reset::{reset_before_cell, reset_before_run};
use crate::ctx::RunCtx;
use crate::prefix::{IntendedMark, ResetMode};
use crate::prefix_achieved::{RequestCache, achieved};
use crate::prompts::{BodyOptions, PromptPlan, stream_body};
use crate::shared_prefix::warm_shared_prefixes;

/// Startup: granularity, prompt sizes, the reset before the run, the
/// shared prefixes warmed. Returns the run's `prefix_cache` metadata.
pub(crate) async fn start_prefix_cache(
    rc: &RunCtx,
    disc: &Discovery,
    prompts: &PromptPlan,
) -> RunPrefixCache {
    discover_cache_granularity(rc, &disc.engine_version).await;
    let shared = prompts.shared.as_ref();
    // Context 0 too: the warm-up requests of the shared prefixes are bare.
    let by_ctx = prompts
        .by_ctx
        .keys()
        .chain(std::iter::once(&0))
        .map(|&c| (c, prompts.prompt_tokens(c)))
        .collect();
    rc.prefix
        .set_prompts(shared.map_or(0, |s| s.tokens()), by_ctx);
    rc.prefix
        .set_shared_texts(shared.map_or_else(Vec::new, |s| s.texts.clone()));
    reset_before_run(rc).await;
    warm_shared_prefixes(rc, prompts, 0, 0..u32::MAX).await;
    let s = rc.cfg.prefix_cache;
    let (g, source) = rc
        .prefix
        .granularity()
        .map_or((None, ""), |(g, s)| (Some(g), s));
    RunPrefixCache {
        granularity: g,
        granularity_source: source.into(),
        shared_prefix_tokens: s.shared_prefix_tokens,
        shared_prefix_tokens_counted: shared.and_then(|s| s.counted),
        prefix_groups: if s.shared() { s.groups() } else { 0 },
        reset_mode: s.reset.as_str().into(),
        reset: rc.prefix.run_reset(),
    }
}

/// Before a cell: the `before-cell` reset (then the shared prefixes are
/// warmed again, so the cell's first request after the reset is a cold
/// warm-up). Returns what the cell records.
pub(crate) async fn before_cell(rc: &RunCtx, prompts: &PromptPlan) -> Option<ResetStatus> {
    let first = rc.prefix.next_cell();
    let status = reset_before_cell(rc, first).await;
    if status.is_some() && !first && rc.cfg.prefix_cache.reset == ResetMode::BeforeCell {
        let round = rc.prefix.mark_round();
        let before = span_start(rc).await;
        warm_shared_prefixes(rc, prompts, round, 0..1).await;
        if status == Some(ResetStatus::Done) {
            check_reset(rc, before).await;
        }
        warm_shared_prefixes(rc, prompts, round, 1..u32::MAX).await;
    }
    status
}

/// After a reset the first warm-up request is the first request: where the
/// server counts its cache hits, say whether it found anything cached (a
/// reset that did not empty the cache shows here).
async fn check_reset(rc: &RunCtx, before: SpanStart) {
    let (Some(a), Some(b)) = (before.scrape, rc.scraper.scrape_once().await) else {
        return;
    };
    // (per replica over --metrics-url: a replica's late hits series counts from 0)
    if let Some(c) = crate::prefix_achieved::counted_between(&a, &b) {
        let hits = c.hits;
        rc.live.event(if hits == 0.0 {
            "prefix cache reset checked: the first request after it found 0 cached tokens"
                .to_string()
        } else {
            format!("prefix cache reset did not empty the cache: {hits:.0} tokens were served from it right after")
        });
    }
}

/// The prompt of request `i` of rate cell `cell` at context `ctx` when the
/// run has shared prefixes: behind prefix `i mod G`, its own nonce, which
/// differs from its neighbours' at its first character (`[ldb <code> …`,
/// see [`request_code`]), so requests share the prefix and nothing after
/// it. `None` without shared prefixes (every request sends the cell's
/// prompt).
pub(crate) fn rate_request(
    prompts: &PromptPlan,
    ctx: u64,
    cell: u64,
    i: usize,
) -> Option<Vec<Message>> {
    let shared = prompts.shared.as_ref()?;
    let groups = shared.texts.len().max(1);
    let tag = format!("{} {}-rate{ctx}-c{cell}", request_code(i), prompts.run_id);
    let msgs = prompts.messages_in_group(ctx, "", (i % groups) as u32);
    let nonce = ldb_core::prompt::nonce(&prompts.run_id, "");
    Some(
        msgs.into_iter()
            .map(|mut m| {
                if m.role != "system" && m.content.starts_with(&nonce) {
                    m.content = m.content.replacen(&nonce, &format!("[ldb {tag}]"), 1);
                }
                m
            })
            .collect(),
    )
}

/// Request `i` as letters, least significant first (`a`, `b`, … `z`, `ab`,
/// …): consecutive requests differ at the first letter; digits would not
/// (tokenizers that split digits share the leading ones).
pub(crate) fn request_code(i: usize) -> String {
    let mut n = i;
    let mut out = String::new();
    loop {
        out.push((b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return out;
        }
    }
}

/// The bodies of a rate cell's requests: the cell's prompt for all, or
/// with shared prefixes each request's own ([`rate_request`]); each is fed
/// to the intended cache as it is built, which is when it is sent.
pub(crate) struct RateBodies<'a> {
    rc: &'a RunCtx,
    prompts: &'a PromptPlan,
    cell: (u64, u64),
    messages: &'a [Message],
    same: Bytes,
    options: BodyOptions,
}

impl<'a> RateBodies<'a> {
    /// For the cell at context `cell.0` with index `cell.1`, whose prompt
    /// is `messages`.
    pub(crate) fn new(
        rc: &'a RunCtx,
        prompts: &'a PromptPlan,
        cell: (u64, u64),
        messages: &'a [Message],
    ) -> Self {
        let options = BodyOptions {
            api: rc.cfg.target.api,
            max_tokens: rc.cfg.matrix.max_tokens,
            continuous_usage: false,
            ignore_eos: !rc.cfg.matrix.respect_eos,
            temperature: rc.cfg.matrix.temperature,
            tools: rc.cfg.matrix.tools.clone(),
        };
        RateBodies {
            rc,
            prompts,
            cell,
            messages,
            same: stream_body(&rc.model, messages, options.clone()),
            options,
        }
    }

    /// The body of request `i`.
    pub(crate) fn body(&self, i: usize) -> Bytes {
        let own = rate_request(self.prompts, self.cell.0, self.cell.1, i);
        let msgs = own.as_deref().unwrap_or(self.messages);
        self.rc.prefix.admit_messages(self.cell.0, msgs);
        match &own {
            Some(m) => stream_body(&self.rc.model, m, self.options.clone()),
            None => self.same.clone(),
        }
    }
}

/// Closes a rate cell's span over its requests' outcomes.
pub(crate) async fn rate_span_end(
    rc: &RunCtx,
    start: SpanStart,
    outs: &[(usize, f64, StreamOutcome)],
    window: WindowBounds,
) -> (Option<f64>, PrefixCacheCell) {
    let requests: Vec<RequestCache> = outs
        .iter()
        .map(|(_, _, o)| RequestCache::of(o, o.track.to_sample(0.0, window).input_tokens))
        .collect();
    span_end(rc, start, &requests).await
}

/// Where a measured span starts: the intended cache's totals and the
/// server's counters.
pub(crate) struct SpanStart {
    mark: IntendedMark,
    scrape: Option<Scrape>,
}

/// Opens a measured span (before its first request is sent).
pub(crate) async fn span_start(rc: &RunCtx) -> SpanStart {
    SpanStart {
        mark: rc.prefix.mark(),
        scrape: if rc.metrics {
            rc.scraper.scrape_once().await
        } else {
            None
        },
    }
}

/// Closes a measured span (after its last request ended): the achieved hit
/// rate (server counters over the span, else what the requests reported)
/// and the cell's prefix-cache keys.
pub(crate) async fn span_end(
    rc: &RunCtx,
    start: SpanStart,
    requests: &[RequestCache],
) -> (Option<f64>, PrefixCacheCell) {
    let end = match start.scrape {
        Some(_) => rc.scraper.scrape_once().await,
        None => None,
    };
    let achieved = achieved(rc.engine, (start.scrape.as_ref(), end.as_ref()), requests);
    let intended = start.mark.rate_until(rc.prefix.mark());
    (
        achieved.as_ref().map(|a| a.rate),
        PrefixCacheCell {
            prefix_cache_intended: intended,
            prefix_cache_granularity: intended.map(|_| rc.cache_granularity()),
            server_prefix_cache_source: achieved.as_ref().map_or("", |a| a.source).into(),
            server_prefix_cache_basis: achieved.map(|a| a.basis).unwrap_or_default(),
            prefix_cache_reset: None,
        },
    )
}

/// A closed-loop cell's prefix-cache keys, after it ran: intended from its
/// streams' prompt (the scout's), the source of the achieved rate the cell
/// read from the server's counters.
pub(crate) fn closed_loop_cell(
    rc: &RunCtx,
    cell: &mut ldb_core::result::CellResult,
    reset: Option<ResetStatus>,
) {
    let intended = rc.prefix.repeat_last_scout(cell.concurrency);
    let p = &mut cell.ext.prefix_cache;
    p.prefix_cache_intended = intended;
    p.prefix_cache_granularity = intended.map(|_| rc.cache_granularity());
    p.prefix_cache_reset = reset;
    if cell.ext.server_prefix_cache_hit_rate.is_some() {
        p.server_prefix_cache_source = match rc.engine {
            ldb_core::engine::Engine::Vllm => "vllm_counters",
            ldb_core::engine::Engine::Sglang => "sglang_counters",
            _ => "server_counters",
        }
        .into();
    }
}

/// A scout behind a cached shared prefix of `shared` tokens measures the
/// prefill of the rest: the row counts those tokens only and says so.
pub(crate) fn warm_prefix_row(row: &mut ldb_core::result::PrefillEntry, shared: u64) {
    row.prompt_tokens = row.prompt_tokens.saturating_sub(shared);
    let client = if row.client_ttft_seconds > 0.0 {
        (row.prompt_tokens as f64 / row.client_ttft_seconds).round()
    } else {
        0.0
    };
    if row.method != Some(ldb_core::result::PrefillMethod::Prometheus) {
        row.tok_per_sec = client;
    }
    row.client_tok_per_sec = client;
    row.prefill_mode = "warm_prefix".into();
    row.label = format!(
        "{} (prompt_tokens count the part after the {shared}-token shared prefix)",
        row.label
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_codes_differ_at_once_between_neighbours() {
        assert_eq!(request_code(0), "a");
        assert_eq!(request_code(25), "z");
        assert_eq!(request_code(26), "ab");
        for i in 0..2000 {
            assert_ne!(request_code(i)[..1], request_code(i + 1)[..1]);
        }
    }
}
