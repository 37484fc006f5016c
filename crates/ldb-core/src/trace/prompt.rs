//! Prompt text for token-counted trace requests, and the segments that say
//! what it shares (`crate::prefix_cache`).
//!
//! The text is a run of *words*, each a space and three lowercase letters
//! (`" the"`, `" sky"`): one token in the BPE vocabularies of the common model
//! families (a pre-tokenizer splits before each space-led word, so counts
//! add up across word joins), and one token in the simulator with 4
//! characters per token. A prompt of n tokens is therefore n words minus the
//! chat template's tokens, whatever the split into blocks; the runner checks
//! that promise against the server's tokenizer on a sample of prompts. The
//! template's tokens before the text are taken from the first block, those
//! after it (the assistant turn's opening) from the last, so every block
//! boundary falls at the token the trace puts it (a block-granular cache,
//! vLLM's, then reuses exactly the blocks the trace shares).
//!
//! A Mooncake block (one `hash_ids` entry) has fixed text: its first word is
//! picked by its id (so blocks whose ids differ by less than the word list's
//! length differ at their first token), the rest by a generator seeded with
//! the id and the run's salt (so two runs share nothing). Block texts are
//! cached per id from the second time the id is seen, in two generations
//! (bounded memory: a lookup that misses the newer generation promotes from
//! the older; when the newer fills, the older is dropped), and regenerated
//! from the seed when evicted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::MOONCAKE_BLOCK_TOKENS;
use super::corpus::TextSource;
use crate::prefix_cache::{Segment, chain, chained};

/// Words of one token each (a space and three letters, 4 bytes).
pub const WORDS: [&str; 128] = [
    " the", " and", " for", " are", " but", " not", " you", " all", " any", " can", " had", " her",
    " was", " one", " our", " out", " day", " get", " has", " him", " his", " how", " man", " new",
    " now", " old", " see", " two", " way", " who", " did", " its", " let", " put", " say", " she",
    " too", " use", " act", " add", " age", " ago", " air", " arm", " art", " ask", " bad", " bag",
    " bar", " bed", " big", " bit", " box", " bus", " buy", " car", " cat", " cup", " cut", " dog",
    " dry", " due", " ear", " eat", " egg", " end", " eye", " far", " few", " fit", " fly", " fun",
    " gas", " hat", " hit", " hot", " ice", " job", " key", " kid", " law", " lay", " leg", " lie",
    " lot", " low", " map", " mix", " net", " nor", " oil", " pay", " pen", " per", " pet", " pot",
    " ran", " raw", " red", " row", " run", " sad", " sat", " sea", " set", " sit", " six", " sky",
    " son", " sun", " tax", " tea", " ten", " tie", " tip", " top", " toy", " try", " van", " war",
    " web", " wet", " win", " yes", " yet", " sum", " tin", " fan",
];

/// Bytes per word.
pub const WORD_BYTES: usize = 4;

/// Block texts kept per cache generation (2 KiB each: at most 16 MiB).
pub const DEFAULT_CACHE_BLOCKS: usize = 4096;

/// Content ids of unique (unshared) prompt parts live above this bit, away
/// from trace hash ids.
const UNIQUE_BIT: u64 = 1 << 63;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `words` words of the text keyed `key`, appended to `out`.
pub fn block_words(key: u64, salt: u64, words: usize, out: &mut String) {
    if words == 0 {
        return;
    }
    out.reserve(words * WORD_BYTES);
    let first = key.wrapping_add(salt) % WORDS.len() as u64;
    out.push_str(WORDS[first as usize]);
    let mut state = chain(salt, key);
    let mut bits = 0u64;
    let mut left = 0u32;
    for _ in 1..words {
        if left == 0 {
            bits = splitmix(&mut state);
            left = 9; // 9 × 7 bits from each 64-bit draw
        }
        out.push_str(WORDS[(bits & 127) as usize]);
        bits >>= 7;
        left -= 1;
    }
}

/// One prompt built for a trace request.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltPrompt {
    /// The user message's text.
    pub text: String,
    /// What it shares, for the intended hit rate (tokens as the trace counts
    /// them, template included).
    pub segments: Vec<Segment>,
}

/// Builds trace prompts; one per run (its salt makes the run's text its own).
#[derive(Debug)]
pub struct PromptBuilder {
    salt: u64,
    source: TextSource,
    template_tokens: u64,
    /// Of `template_tokens`, those after the text.
    trailing_tokens: u64,
    cap: usize,
    hot: HashMap<u64, Arc<str>>,
    cold: HashMap<u64, Arc<str>>,
    seen_hot: HashSet<u64>,
    seen_cold: HashSet<u64>,
    built_blocks: u64,
}

impl PromptBuilder {
    /// A builder whose prompts are sent with `template_tokens` chat-template
    /// tokens around the text (the trace's lengths include them).
    pub fn new(salt: u64, template_tokens: u64) -> Self {
        Self::with_cache(salt, template_tokens, DEFAULT_CACHE_BLOCKS)
    }

    /// The same with `cap` block texts per cache generation.
    pub fn with_cache(salt: u64, template_tokens: u64, cap: usize) -> Self {
        Self {
            salt,
            source: TextSource::Words,
            template_tokens,
            trailing_tokens: 0,
            cap: cap.max(1),
            hot: HashMap::new(),
            cold: HashMap::new(),
            seen_hot: HashSet::new(),
            seen_cold: HashSet::new(),
            built_blocks: 0,
        }
    }

    /// The same drawing its text from `source` (`--prompt-corpus`).
    pub fn with_source(mut self, source: TextSource) -> Self {
        self.source = source;
        self
    }

    /// Says that `trailing` of the template's tokens come after the text
    /// (at most all of them): the last block of a prompt gives them room
    /// instead of the first.
    pub fn with_trailing_template(mut self, trailing: u64) -> Self {
        self.trailing_tokens = trailing.min(self.template_tokens);
        self
    }

    /// Block texts generated so far (cache misses).
    pub fn built_blocks(&self) -> u64 {
        self.built_blocks
    }

    /// Block texts held now.
    pub fn cached_blocks(&self) -> usize {
        self.hot.len() + self.cold.len()
    }

    /// Appends `words` tokens of full block `key` to `out` (the first
    /// block of a prompt has fewer: the template takes the rest; its text
    /// is cached apart). A block is generated straight into the prompt the
    /// first time it is seen, and cached from the second (most blocks of a
    /// real trace are never seen twice: caching them would only copy them
    /// around).
    fn push_block(&mut self, key: u64, words: usize, out: &mut String) {
        let cached = if words as u64 == MOONCAKE_BLOCK_TOKENS {
            key
        } else {
            chain(key, words as u64)
        };
        if let Some(t) = self.hot.get(&cached) {
            out.push_str(t);
            return;
        }
        let text = match self.cold.remove(&cached) {
            Some(t) => t,
            None if !self.seen_before(cached) => {
                self.built_blocks += 1;
                self.source.fill(key, self.salt, words, out);
                return;
            }
            None => {
                self.built_blocks += 1;
                let mut s = String::with_capacity(words * WORD_BYTES);
                self.source.fill(key, self.salt, words, &mut s);
                Arc::from(s)
            }
        };
        out.push_str(&text);
        if self.hot.len() >= self.cap {
            self.cold = std::mem::take(&mut self.hot);
        }
        self.hot.insert(cached, text);
    }

    /// Whether `key` was seen before (remembered in two generations of 8 ×
    /// the text cache's size: ids only, 8 bytes each); notes it as seen.
    fn seen_before(&mut self, key: u64) -> bool {
        if self.seen_hot.contains(&key) || self.seen_cold.remove(&key) {
            self.seen_hot.insert(key);
            return true;
        }
        if self.seen_hot.len() >= self.cap * 8 {
            self.seen_cold = std::mem::take(&mut self.seen_hot);
        }
        self.seen_hot.insert(key);
        false
    }

    /// Words of text for `tokens` prompt tokens in a block: the first holds
    /// the template's leading tokens, the last its trailing ones.
    fn words(&self, tokens: u64, first: bool, last: bool) -> usize {
        let leading = self.template_tokens - self.trailing_tokens;
        let framing = if first { leading } else { 0 } + if last { self.trailing_tokens } else { 0 };
        if framing == 0 {
            return tokens as usize;
        }
        tokens.saturating_sub(framing).max(1) as usize
    }

    /// A prompt of `tokens` tokens over Mooncake blocks `hash_ids` (512
    /// tokens each, the last one the rest): requests sharing their first k
    /// ids share exactly their first k blocks of text.
    pub fn blocks(&mut self, tokens: u64, hash_ids: &[u64]) -> BuiltPrompt {
        let mut text = String::with_capacity(tokens as usize * WORD_BYTES);
        let mut parts = Vec::with_capacity(hash_ids.len());
        for (i, &id) in hash_ids.iter().enumerate() {
            let start = i as u64 * MOONCAKE_BLOCK_TOKENS;
            let len = tokens.saturating_sub(start).min(MOONCAKE_BLOCK_TOKENS);
            if len == 0 {
                break;
            }
            // A short (last) block is its own content: the same id at full
            // length is another block.
            let key = if len == MOONCAKE_BLOCK_TOKENS {
                id
            } else {
                chain(id, len) & !UNIQUE_BIT
            };
            let last = i + 1 == hash_ids.len() || start + len >= tokens;
            let words = self.words(len, i == 0, last);
            if len == MOONCAKE_BLOCK_TOKENS {
                self.push_block(key, words, &mut text);
            } else {
                self.source.fill(key, self.salt, words, &mut text);
            }
            parts.push((key, len));
        }
        BuiltPrompt {
            text,
            segments: chained(parts),
        }
    }

    /// `tokens` words of text of its own for a message a trace row builds
    /// (`messages[].tokens`; `unique` tells messages apart): no template
    /// tokens are taken off, the message's tokens are its text's.
    pub fn message_text(&self, tokens: u64, unique: u64) -> String {
        let mut text = String::new();
        self.source
            .fill(unique | UNIQUE_BIT, self.salt, tokens as usize, &mut text);
        text
    }

    /// A prompt of `tokens` tokens shared with no other (`unique` tells
    /// requests apart, e.g. their index in the trace).
    pub fn unique(&self, tokens: u64, unique: u64) -> BuiltPrompt {
        let key = unique | UNIQUE_BIT;
        let mut text = String::new();
        self.source
            .fill(key, self.salt, self.words(tokens, true, true), &mut text);
        BuiltPrompt {
            text,
            segments: chained([(key, tokens)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_four_distinct_bytes() {
        let mut seen = std::collections::HashSet::new();
        for w in WORDS {
            assert_eq!(w.len(), WORD_BYTES, "{w:?}");
            assert!(w.starts_with(' ') && w[1..].bytes().all(|b| b.is_ascii_lowercase()));
            assert!(seen.insert(w), "{w:?} twice");
        }
    }

    #[test]
    fn shared_blocks_are_byte_identical_and_lengths_exact() {
        let mut b = PromptBuilder::new(7, 12);
        let a = b.blocks(1300, &[1, 2, 3]);
        let c = b.blocks(1100, &[1, 2, 9]);
        // 1300 tokens − 12 template tokens, 4 bytes per word
        assert_eq!(a.text.len(), (1300 - 12) * WORD_BYTES);
        assert_eq!(c.text.len(), (1100 - 12) * WORD_BYTES);
        let shared = (1024 - 12) * WORD_BYTES;
        assert_eq!(a.text[..shared], c.text[..shared]);
        assert_ne!(a.text[shared..shared + 4], c.text[shared..shared + 4]);
        assert_eq!(a.segments[..2], c.segments[..2]);
        assert_ne!(a.segments[2], c.segments[2]);
        assert_eq!(a.segments.iter().map(|s| s.tokens).sum::<u64>(), 1300);
        // another run shares nothing
        let other = PromptBuilder::new(8, 12).blocks(1300, &[1, 2, 3]);
        assert_ne!(other.text[..4], a.text[..4]);
    }

    #[test]
    fn block_boundaries_fall_where_the_trace_puts_them_around_the_template() {
        // 24 template tokens before the text and 6 after it (SmolLM2's).
        let mut b = PromptBuilder::new(7, 30).with_trailing_template(6);
        let a = b.blocks(600, &[1, 2]);
        let c = b.blocks(700, &[1, 3]);
        // the first block's text ends at token 512: 24 + 488 words
        let shared = (512 - 24) * WORD_BYTES;
        assert_eq!(a.text[..shared], c.text[..shared]);
        assert_ne!(a.text[shared..shared + 4], c.text[shared..shared + 4]);
        // the last block leaves room for the 6 after the text
        assert_eq!(a.text.len(), (600 - 30) * WORD_BYTES);
        assert_eq!(c.text.len(), (700 - 30) * WORD_BYTES);
        // one block holds both; more trailing than template is capped
        assert_eq!(b.blocks(100, &[5]).text.len(), 70 * WORD_BYTES);
        let all = PromptBuilder::new(7, 30).with_trailing_template(99);
        assert_eq!(all.unique(100, 1).text.len(), 70 * WORD_BYTES);
    }

    #[test]
    fn unique_blocks_differ_at_their_first_word() {
        let mut b = PromptBuilder::new(3, 0);
        let firsts: std::collections::HashSet<String> = (0..128u64)
            .map(|id| b.blocks(600, &[id, 1000]).text[..4].to_string())
            .collect();
        assert_eq!(firsts.len(), 128);
        // unique prompts differ from each other at once
        assert_ne!(b.unique(50, 1).text[..4], b.unique(50, 2).text[..4]);
        assert_eq!(b.unique(50, 1).text.len(), 50 * WORD_BYTES);
    }

    #[test]
    fn corpus_blocks_share_exactly_what_the_ids_share() {
        use crate::trace::corpus::{CorpusPool, MAX_CHUNKS, TextSource, cut};
        let text = "Call me Ishmael. Some years ago, never mind how long precisely, having \
                    little or no money in my purse, I thought I would sail about a little. "
            .repeat(80);
        // the simulator's count: 4 characters a token
        let counted = cut(&text, MAX_CHUNKS)
            .into_iter()
            .map(|c| (c.clone(), c.chars().count() as u64 / 4))
            .collect();
        let pool = CorpusPool::new(counted).expect("pool");
        let source = TextSource::Corpus(std::sync::Arc::new(pool));
        let mut b = PromptBuilder::with_cache(7, 12, 2).with_source(source);
        let a = b.blocks(1300, &[1, 2, 3]);
        for _ in 0..3 {
            // cached and regenerated texts are the same
            let c = b.blocks(1100, &[1, 2, 9]);
            assert_eq!(a.text.chars().count(), (1300 - 12) * 4);
            assert_eq!(c.text.chars().count(), (1100 - 12) * 4);
            let shared = (1024 - 12) * 4;
            assert_eq!(a.text[..shared], c.text[..shared]);
            assert_ne!(a.text[shared..shared + 4], c.text[shared..shared + 4]);
        }
        assert!(a.text.contains("Ishmael") || a.text.contains("precisely"));
    }

    #[test]
    fn the_cache_is_bounded_and_regenerates_the_same_text() {
        let mut b = PromptBuilder::with_cache(1, 0, 4);
        let first = b.blocks(512, &[0]).text;
        for id in 1..50 {
            b.blocks(512, &[id]);
            assert!(b.cached_blocks() <= 8);
        }
        assert_eq!(b.blocks(512, &[0]).text, first);
        assert_eq!(b.built_blocks(), 51);
    }
}
