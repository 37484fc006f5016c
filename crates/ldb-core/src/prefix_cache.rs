//! The intended prefix-cache hit rate: how many prompt tokens a prefix cache
//! of unlimited capacity would reuse, given the prompts the product built.
//!
//! The prompts are described as chains of *segments*: a segment is a run of
//! tokens whose content is fixed by its id, and two different segments differ
//! at their first token (the prompt builders guarantee this, e.g. every
//! unique part opens with a nonce). The id of a segment is chained with the
//! ids before it ([`chain`]), so the same content at another position is
//! another segment — exactly as engines hash a block together with its
//! prefix. Two prompts then share exactly the tokens of their common leading
//! segments, and the longest prefix a prompt shares with any earlier prompt
//! is a walk over the set of chained ids seen so far: memory grows with the
//! number of distinct segments, not with tokens.
//!
//! What a prompt may reuse follows the engine's granularity
//! ([`CacheGranularity`]): vLLM reuses full blocks only, SGLang's radix cache
//! rounds down to its page size (1 by default), and every engine computes at
//! least the last prompt token itself, so a prompt never reuses more than
//! `tokens - 1`. llama.cpp reuses token by token within one slot; counting it
//! as page size 1 over all earlier prompts is the best case (one slot per
//! conversation), which is what "intended" means.
//!
//! Two more facts recorded from real engines (`docs/methodology.md`,
//! "Which tokens a next request reuses"): every prompt opens with the chat
//! template's head (its default system prompt and the user turn's opening),
//! which every other prompt shares ([`IntendedPrefixCache::with_head`]); and
//! a finished request leaves its whole sequence cached, the generated tokens
//! too except the last (whose KV was never computed), so a conversation's
//! next turn reuses the reply as well ([`IntendedPrefixCache::insert`]).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// How finely an engine reuses cached prompt tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "unit", content = "tokens", rename_all = "snake_case")]
pub enum CacheGranularity {
    /// Whole blocks of this many tokens (vLLM `--block-size`, SGLang
    /// `--page-size`); a partly shared block is not reused.
    Block(u32),
}

impl CacheGranularity {
    /// Token-granular reuse (SGLang's default page size, llama.cpp).
    pub const TOKEN: CacheGranularity = CacheGranularity::Block(1);

    /// Tokens per reusable unit (at least 1).
    pub fn block_tokens(self) -> u64 {
        match self {
            CacheGranularity::Block(n) => u64::from(n.max(1)),
        }
    }

    /// The tokens reused when `shared` leading tokens match a cached prompt
    /// and the prompt has `prompt` tokens: whole units only, and never the
    /// last prompt token.
    pub fn reusable(self, shared: u64, prompt: u64) -> u64 {
        let cap = shared.min(prompt.saturating_sub(1));
        let unit = self.block_tokens();
        cap / unit * unit
    }
}

/// One segment of a prompt: its chained id and its length in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Chained id: [`chain`] of the previous segment's id and this content.
    pub id: u64,
    /// Tokens in this segment (a segment of 0 tokens is ignored).
    pub tokens: u64,
}

/// Chains a segment's content id onto the id of the segment before it (0 for
/// the first). A 64-bit mix (splitmix64's finaliser): stable across runs and
/// platforms, which the standard library's hasher does not promise.
pub fn chain(previous: u64, content: u64) -> u64 {
    let mut z = previous
        .rotate_left(29)
        .wrapping_add(content)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Builds the chained segments of a prompt from its content ids and lengths.
pub fn chained(parts: impl IntoIterator<Item = (u64, u64)>) -> Vec<Segment> {
    let mut prev = 0u64;
    parts
        .into_iter()
        .map(|(content, tokens)| {
            prev = chain(prev, content);
            Segment { id: prev, tokens }
        })
        .collect()
}

/// What one prompt reuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reuse {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Leading tokens shared with some earlier prompt.
    pub shared_tokens: u64,
    /// Tokens an unlimited cache at this granularity would serve.
    pub reused_tokens: u64,
}

/// An unlimited-capacity prefix cache fed with prompts in send order.
#[derive(Debug, Clone)]
pub struct IntendedPrefixCache {
    granularity: CacheGranularity,
    seen: HashSet<u64>,
    /// Leading tokens every prompt has in common (the template's head).
    head: u64,
    /// Whether anything is cached (since the start or the last clear).
    warm: bool,
    prompt_tokens: u64,
    reused_tokens: u64,
    prompts: u64,
}

impl IntendedPrefixCache {
    /// An empty cache (as after a reset).
    pub fn new(granularity: CacheGranularity) -> Self {
        Self {
            granularity,
            seen: HashSet::new(),
            head: 0,
            warm: false,
            prompt_tokens: 0,
            reused_tokens: 0,
            prompts: 0,
        }
    }

    /// Every prompt fed opens with the same `head` tokens (the chat
    /// template's opening, measured by the runner), so any prompt after the
    /// first shares at least those, whatever its segments say.
    pub fn with_head(mut self, head: u64) -> Self {
        self.head = head;
        self
    }

    /// The template head counted as shared.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The granularity this cache counts in.
    pub fn granularity(&self) -> CacheGranularity {
        self.granularity
    }

    /// Feeds one prompt (its segments in order) and returns what it reuses
    /// from the prompts fed before it; the prompt is then cached too.
    pub fn admit(&mut self, segments: &[Segment]) -> Reuse {
        let prompt: u64 = segments.iter().map(|s| s.tokens).sum();
        let mut shared = 0u64;
        let mut matching = true;
        for seg in segments.iter().filter(|s| s.tokens > 0) {
            if matching && self.seen.contains(&seg.id) {
                shared += seg.tokens;
            } else {
                matching = false;
                self.seen.insert(seg.id);
            }
        }
        if self.warm {
            shared = shared.max(self.head.min(prompt));
        }
        self.warm = true;
        let reuse = Reuse {
            prompt_tokens: prompt,
            shared_tokens: shared,
            reused_tokens: self.granularity.reusable(shared, prompt),
        };
        self.prompt_tokens += reuse.prompt_tokens;
        self.reused_tokens += reuse.reused_tokens;
        self.prompts += 1;
        reuse
    }

    /// Caches a sequence without counting it as a prompt: a finished
    /// request's prompt followed by the part of its reply the engine keeps
    /// (see [`crate::replay::session::ConversationSegments::reply`]).
    pub fn insert(&mut self, segments: &[Segment]) {
        for seg in segments.iter().filter(|s| s.tokens > 0) {
            self.seen.insert(seg.id);
        }
        self.warm = true;
    }

    /// Forgets every cached prompt (a `--reset-prefix-cache` point); the
    /// totals so far are kept.
    pub fn clear(&mut self) {
        self.seen.clear();
        self.warm = false;
    }

    /// Prompt tokens fed so far.
    pub fn prompt_tokens(&self) -> u64 {
        self.prompt_tokens
    }

    /// Tokens an unlimited cache would have served so far.
    pub fn reused_tokens(&self) -> u64 {
        self.reused_tokens
    }

    /// Prompts fed so far.
    pub fn prompts(&self) -> u64 {
        self.prompts
    }

    /// Reused ÷ prompt tokens, as engines count their hit rate (tokens, not
    /// requests); `None` before any prompt token.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.reused_tokens as f64 / self.prompt_tokens as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(parts: &[(u64, u64)]) -> Vec<Segment> {
        chained(parts.iter().copied())
    }

    #[test]
    fn first_prompt_reuses_nothing_and_a_repeat_all_but_the_last_token() {
        let mut c = IntendedPrefixCache::new(CacheGranularity::TOKEN);
        let p = prompt(&[(1, 100), (2, 50)]);
        assert_eq!(c.admit(&p).reused_tokens, 0);
        let again = c.admit(&p);
        assert_eq!(again.shared_tokens, 150);
        assert_eq!(again.reused_tokens, 149);
        assert_eq!(c.prompt_tokens(), 300);
        assert_eq!(c.hit_rate(), Some(149.0 / 300.0));
    }

    #[test]
    fn shared_leading_segments_only_and_blocks_round_down() {
        let mut c = IntendedPrefixCache::new(CacheGranularity::Block(128));
        c.admit(&prompt(&[(7, 512), (8, 512), (9, 300)]));
        // shares the first two 512-token blocks, differs after
        let r = c.admit(&prompt(&[(7, 512), (8, 512), (10, 300)]));
        assert_eq!(r.shared_tokens, 1024);
        assert_eq!(r.reused_tokens, 1024);
        // shares 300 tokens: 2 whole blocks of 128
        let mut c = IntendedPrefixCache::new(CacheGranularity::Block(128));
        c.admit(&prompt(&[(1, 300), (2, 10)]));
        assert_eq!(c.admit(&prompt(&[(1, 300), (3, 10)])).reused_tokens, 256);
    }

    #[test]
    fn same_content_at_another_position_is_not_shared() {
        let mut c = IntendedPrefixCache::new(CacheGranularity::TOKEN);
        c.admit(&prompt(&[(1, 10), (2, 10)]));
        let r = c.admit(&prompt(&[(2, 10), (1, 10)]));
        assert_eq!(r.shared_tokens, 0);
        // a match stops at the first difference even if later ids recur
        let r = c.admit(&prompt(&[(1, 10), (5, 10), (2, 10)]));
        assert_eq!(r.shared_tokens, 10);
    }

    #[test]
    fn clear_forgets_prompts_but_keeps_totals() {
        let mut c = IntendedPrefixCache::new(CacheGranularity::TOKEN);
        let p = prompt(&[(1, 10)]);
        c.admit(&p);
        c.clear();
        assert_eq!(c.admit(&p).reused_tokens, 0);
        assert_eq!(c.prompts(), 2);
        assert_eq!(c.hit_rate(), Some(0.0));
    }

    #[test]
    fn the_template_head_is_shared_by_every_prompt_after_the_first() {
        // Issue 35, defect 3: BurstGPT-sized prompts of 100 tokens, a
        // 24-token template head, SGLang's page size 1: every prompt but
        // the first reuses the head (23.8 %), none on 128-token blocks.
        let mut token = IntendedPrefixCache::new(CacheGranularity::TOKEN).with_head(24);
        let mut block = IntendedPrefixCache::new(CacheGranularity::Block(128)).with_head(24);
        for i in 0..100 {
            token.admit(&prompt(&[(i, 100)]));
            block.admit(&prompt(&[(i, 100)]));
        }
        let rate = token.hit_rate().unwrap();
        assert!((rate - 0.24 * 99.0 / 100.0).abs() < 1e-9, "{rate}");
        assert_eq!(block.hit_rate(), Some(0.0));
        // after a reset the next prompt is cold again
        token.clear();
        assert_eq!(token.admit(&prompt(&[(500, 100)])).reused_tokens, 0);
        assert_eq!(token.admit(&prompt(&[(501, 100)])).reused_tokens, 24);
    }

    #[test]
    fn an_inserted_sequence_is_reused_but_not_counted() {
        let mut c = IntendedPrefixCache::new(CacheGranularity::TOKEN);
        let reply = prompt(&[(1, 100), (2, 255)]);
        c.admit(&reply[..1]);
        c.insert(&reply);
        assert_eq!(c.prompts(), 1);
        assert_eq!(c.prompt_tokens(), 100);
        let next = prompt(&[(1, 100), (2, 255), (3, 210)]);
        assert_eq!(c.admit(&next).reused_tokens, 355);
    }

    #[test]
    fn granularity_serialises_with_its_unit() {
        let j = serde_json::to_string(&CacheGranularity::Block(16)).unwrap();
        assert_eq!(j, r#"{"unit":"block","tokens":16}"#);
    }
}
