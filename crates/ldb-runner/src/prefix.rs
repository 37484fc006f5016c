//! The run's prefix-cache bookkeeping: the settings (`--shared-prefix-tokens`,
//! `--prefix-groups`, `--reset-prefix-cache`, `--prefix-cache-block`), the
//! intended-cache model fed with every prompt the run sends, and the reset
//! outcome said once.
//!
//! The intended cache ([`ldb_core::prefix_cache::IntendedPrefixCache`]) sees
//! the prompts in send order at the engine's granularity
//! (`cache_granularity.rs`); a cell's intended hit rate is what it reused
//! over the requests the cell measured. It is cleared where the server's
//! cache is reset, whatever the server answered: a refused reset then shows
//! as achieved above intended, which is the truth of that run.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use ldb_core::prefix_cache::{CacheGranularity, IntendedPrefixCache, Segment, chained};
use ldb_core::prompt::Message;
use ldb_core::result::ResetStatus;

/// When the server's prefix cache is reset (`--reset-prefix-cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResetMode {
    /// Never (the default).
    #[default]
    Never,
    /// Once, before the first cell.
    BeforeRun,
    /// Before every cell.
    BeforeCell,
}

impl ResetMode {
    /// Parses the flag's value.
    pub fn parse(s: &str) -> Option<ResetMode> {
        match s {
            "never" => Some(ResetMode::Never),
            "before-run" => Some(ResetMode::BeforeRun),
            "before-cell" => Some(ResetMode::BeforeCell),
            _ => None,
        }
    }

    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ResetMode::Never => "never",
            ResetMode::BeforeRun => "before-run",
            ResetMode::BeforeCell => "before-cell",
        }
    }
}

/// The prefix-cache settings of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixCacheSettings {
    /// Tokens of the shared system prompt before each nonce (0: none).
    pub shared_prefix_tokens: u64,
    /// Distinct shared prefixes; requests of a rate cell take them in turn.
    pub prefix_groups: u32,
    /// When to reset the server's cache.
    pub reset: ResetMode,
    /// `--prefix-cache-block N`: the granularity, not discovered.
    pub block_override: Option<u32>,
}

impl PrefixCacheSettings {
    /// Number of prefix groups (at least 1).
    pub fn groups(&self) -> u32 {
        self.prefix_groups.max(1)
    }

    /// Whether prompts open with a shared prefix.
    pub fn shared(&self) -> bool {
        self.shared_prefix_tokens > 0
    }
}

#[derive(Debug, Default)]
struct Inner {
    granularity: Option<(CacheGranularity, &'static str)>,
    intended: Option<IntendedPrefixCache>,
    refusal_said: bool,
    run_reset: Option<ResetStatus>,
    shared_tokens: u64,
    prompt_tokens: BTreeMap<u64, u64>,
    warm_rounds: u64,
    cells: u64,
    last_scout: Option<(u64, Vec<Message>)>,
    shared_texts: Vec<String>,
}

/// A stable 64-bit id of a text (FNV-1a): the content id of a segment.
fn text_id(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The segments of a prompt of `prompt_tokens` tokens: its shared system
/// prompt (`shared_tokens` of them) when it opens with one, then the rest,
/// which opens with the uniqueness nonce and so is one segment.
pub fn segments_of(msgs: &[Message], shared_tokens: u64, prompt_tokens: u64) -> Vec<Segment> {
    let rest: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role != "system")
        .map(|m| m.content.as_str())
        .collect();
    match msgs.first().filter(|m| m.role == "system") {
        Some(sys) if shared_tokens > 0 => {
            let shared = shared_tokens.min(prompt_tokens);
            chained([
                (text_id(&[&sys.content]), shared),
                (text_id(&rest), prompt_tokens - shared),
            ])
        }
        _ => chained([(text_id(&rest), prompt_tokens)]),
    }
}

/// The run's prefix-cache state (one per run, in `RunCtx`).
#[derive(Debug, Default)]
pub struct PrefixState(Mutex<Inner>);

/// Totals of the intended cache at one point, to take a span's difference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntendedMark {
    prompt_tokens: u64,
    reused_tokens: u64,
}

impl IntendedMark {
    /// Reused ÷ prompt tokens of the prompts fed between `self` and `later`.
    pub fn rate_until(self, later: IntendedMark) -> Option<f64> {
        let p = later.prompt_tokens.saturating_sub(self.prompt_tokens);
        let r = later.reused_tokens.saturating_sub(self.reused_tokens);
        (p > 0).then(|| r as f64 / p as f64)
    }
}

impl PrefixState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the granularity and where it came from (once, at startup).
    pub(crate) fn set_granularity(&self, g: CacheGranularity, source: &'static str) {
        let mut i = self.lock();
        i.granularity = Some((g, source));
        i.intended = Some(IntendedPrefixCache::new(g));
    }

    /// The granularity and its source, when set.
    pub(crate) fn granularity(&self) -> Option<(CacheGranularity, &'static str)> {
        self.lock().granularity
    }

    /// Feeds one sent prompt to the intended cache.
    pub(crate) fn admit(&self, segments: &[Segment]) {
        let mut i = self.lock();
        let g = i.granularity.map_or(CacheGranularity::TOKEN, |(g, _)| g);
        i.intended
            .get_or_insert_with(|| IntendedPrefixCache::new(g))
            .admit(segments);
    }

    /// Sets the shared prefix's tokens and each context's prompt tokens
    /// (after the prompts were sized).
    pub(crate) fn set_prompts(&self, shared_tokens: u64, by_ctx: BTreeMap<u64, u64>) {
        let mut i = self.lock();
        i.shared_tokens = shared_tokens;
        i.prompt_tokens = by_ctx;
    }

    /// Counts a cell; true for the run's first.
    pub(crate) fn next_cell(&self) -> bool {
        let mut i = self.lock();
        i.cells += 1;
        i.cells == 1
    }

    /// Feeds a scout's prompt, kept as the prompt of its cell's streams.
    pub(crate) fn admit_scout(&self, ctx: u64, msgs: &[Message]) {
        self.admit_messages(ctx, msgs);
        self.lock().last_scout = Some((ctx, msgs.to_vec()));
    }

    /// The intended hit rate of a closed-loop cell of `streams` streams,
    /// stream s sending the last scout's prompt behind prefix group
    /// s mod G (`prefix_groups.rs`): what one more request of each stream
    /// reuses (fed as such).
    pub(crate) fn repeat_last_scout(&self, streams: u32) -> Option<f64> {
        let (ctx, msgs) = self.lock().last_scout.take()?;
        let variants = self.group_variants(&msgs);
        let m = self.mark();
        for s in 0..streams.max(1) as usize {
            self.admit_messages(ctx, &variants[s % variants.len()]);
        }
        m.rate_until(self.mark())
    }

    /// Keeps the run's shared-prefix texts (one per group), for the cells
    /// that spread their streams over them.
    pub(crate) fn set_shared_texts(&self, texts: Vec<String>) {
        self.lock().shared_texts = texts;
    }

    /// The shared-prefix texts (empty without shared prefixes).
    pub(crate) fn shared_texts(&self) -> Vec<String> {
        self.lock().shared_texts.clone()
    }

    /// The next warm-up round's number (each gets fresh nonces).
    pub(crate) fn mark_round(&self) -> u64 {
        let mut i = self.lock();
        i.warm_rounds += 1;
        i.warm_rounds
    }

    /// Tokens of the shared prefix (0 without one).
    pub(crate) fn shared_tokens(&self) -> u64 {
        self.lock().shared_tokens
    }

    /// Feeds one prompt sent at context `ctx` to the intended cache.
    pub(crate) fn admit_messages(&self, ctx: u64, msgs: &[Message]) {
        let (shared, tokens) = {
            let i = self.lock();
            let t = i.prompt_tokens.get(&ctx).copied().unwrap_or(ctx);
            (i.shared_tokens, t)
        };
        self.admit(&segments_of(msgs, shared, tokens));
    }

    /// The intended cache's totals now.
    pub(crate) fn mark(&self) -> IntendedMark {
        let i = self.lock();
        i.intended
            .as_ref()
            .map_or_else(IntendedMark::default, |c| IntendedMark {
                prompt_tokens: c.prompt_tokens(),
                reused_tokens: c.reused_tokens(),
            })
    }

    /// The server's cache was reset (or a reset was tried): the intended
    /// cache forgets every prompt.
    pub(crate) fn clear(&self) {
        if let Some(c) = self.lock().intended.as_mut() {
            c.clear();
        }
    }

    /// True the first time only: a refusal is said once per run.
    pub(crate) fn first_refusal(&self) -> bool {
        !std::mem::replace(&mut self.lock().refusal_said, true)
    }

    /// Records the outcome of the reset before the run.
    pub(crate) fn set_run_reset(&self, s: ResetStatus) {
        self.lock().run_reset = Some(s);
    }

    /// The reset before the run, if one was tried.
    pub(crate) fn run_reset(&self) -> Option<ResetStatus> {
        self.lock().run_reset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::prefix_cache::chained;

    #[test]
    fn a_span_counts_only_its_own_prompts_and_a_clear_makes_them_cold() {
        let st = PrefixState::default();
        st.set_granularity(CacheGranularity::Block(4), "flag");
        let p = chained([(1, 16), (2, 8)]);
        st.admit(&p);
        let a = st.mark();
        st.admit(&p);
        // 23 of 24 tokens shared at most, 20 in whole blocks of 4.
        assert_eq!(a.rate_until(st.mark()), Some(20.0 / 24.0));
        st.clear();
        let b = st.mark();
        st.admit(&p);
        assert_eq!(b.rate_until(st.mark()), Some(0.0));
        assert_eq!(b.rate_until(b), None);
        assert!(st.first_refusal());
        assert!(!st.first_refusal());
    }

    #[test]
    fn prompts_with_one_system_prefix_share_it_and_nothing_after() {
        use ldb_core::prompt::{messages, nonce, shared_prefix, with_system};
        let st = PrefixState::default();
        st.set_granularity(CacheGranularity::TOKEN, "flag");
        st.set_prompts(100, BTreeMap::from([(1000, 1000)]));
        let p = |g, tag: &str| {
            with_system(
                &shared_prefix("r", g, 400),
                messages(&nonce("r", tag), 3000),
            )
        };
        st.admit_messages(1000, &p(0, "a"));
        let m = st.mark();
        st.admit_messages(1000, &p(0, "b"));
        st.admit_messages(1000, &p(1, "c"));
        st.admit_messages(1000, &p(1, "d"));
        // two of the three reuse their group's 100 tokens
        assert_eq!(m.rate_until(st.mark()), Some(200.0 / 3000.0));
        let same = st.mark();
        st.admit_messages(1000, &p(1, "d"));
        assert_eq!(same.rate_until(st.mark()), Some(999.0 / 1000.0));
    }

    #[test]
    fn reset_modes_read_back() {
        for m in [
            ResetMode::Never,
            ResetMode::BeforeRun,
            ResetMode::BeforeCell,
        ] {
            assert_eq!(ResetMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(ResetMode::parse("always"), None);
    }
}
