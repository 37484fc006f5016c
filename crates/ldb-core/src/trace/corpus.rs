//! `--prompt-corpus FILE`: prompt text cut from a real text corpus instead of
//! the word list (filler text skews speculative decoding's acceptance).
//!
//! The builder needs text whose token count is known and adds up across
//! joins. The corpus is cut into *chunks* of whole words, each opening with
//! a space (a BPE pre-tokenizer splits before every space-led word, so the
//! count of joined chunks is the sum of their counts) and each a multiple
//! of 4 characters long (so the simulator, 4 characters a token, adds up
//! too). The runner counts each chunk once with the server's tokenizer (a
//! few hundred `/tokenize` calls per run); text of n tokens is then one
//! word-list word that tells blocks apart (as without a corpus), chunks
//! taken in corpus order from a place chosen by the block's key, skipping
//! those longer than what is left, and word-list words for the last few
//! tokens no chunk fits. The pool is cycled: a prompt longer than it
//! repeats its text (the run's event log says how many tokens it holds).

use super::prompt::{WORDS, block_words};
use crate::prefix_cache::chain;

/// Chunks counted per run, at most (one `/tokenize` call each).
pub const MAX_CHUNKS: usize = 384;

/// Fewest chunks a usable corpus yields.
pub const MIN_CHUNKS: usize = 16;

/// Words longer than this (URLs, base64, tables) are left out of chunks.
const MAX_WORD_CHARS: usize = 40;

/// Smallest chunk lengths in characters, taken in turn: long chunks keep
/// the text running, short ones fill what is left of a block.
const TARGET_CHARS: [usize; 6] = [384, 32, 192, 16, 96, 48];

/// Cuts `text` into at most `max` chunks (see the module doc), in corpus
/// order. Whitespace runs become one space.
pub fn cut(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = 0usize;
    for word in text.split_whitespace() {
        if out.len() >= max {
            break;
        }
        let n = word.chars().count();
        if n > MAX_WORD_CHARS {
            continue;
        }
        cur.push(' ');
        cur.push_str(word);
        chars += n + 1;
        if chars >= TARGET_CHARS[out.len() % TARGET_CHARS.len()] && chars.is_multiple_of(4) {
            out.push(std::mem::take(&mut cur));
            chars = 0;
        }
    }
    out
}

/// Counted chunks: the text the builder draws from.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusPool {
    chunks: Vec<(String, u64)>,
    tokens: u64,
}

impl CorpusPool {
    /// A pool of `(chunk, tokens)` pairs; chunks counted as 0 tokens are
    /// dropped. `None` with fewer than [`MIN_CHUNKS`] left.
    pub fn new(counted: Vec<(String, u64)>) -> Option<CorpusPool> {
        let chunks: Vec<(String, u64)> = counted.into_iter().filter(|(_, t)| *t > 0).collect();
        let tokens = chunks.iter().map(|(_, t)| t).sum();
        (chunks.len() >= MIN_CHUNKS).then_some(CorpusPool { chunks, tokens })
    }

    /// Chunks held.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Tokens of all chunks together (prompts longer than this repeat).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Appends text of `tokens` tokens keyed `key` (same key, salt and count:
    /// same text) to `out`.
    pub fn fill(&self, key: u64, salt: u64, tokens: usize, out: &mut String) {
        if tokens == 0 {
            return;
        }
        // One word of the list first: blocks whose keys differ by less than
        // its length differ at their first token, as without a corpus.
        out.push_str(WORDS[(key.wrapping_add(salt) % WORDS.len() as u64) as usize]);
        let mut left = tokens as u64 - 1;
        let n = self.chunks.len();
        let mut at = (chain(salt, key) % n as u64) as usize;
        let mut misses = 0;
        while left > 0 && misses < n {
            let (text, t) = &self.chunks[at];
            if *t <= left {
                out.push_str(text);
                left -= t;
                misses = 0;
            } else {
                misses += 1;
            }
            at = (at + 1) % n;
        }
        block_words(chain(key, 0xf111), salt, left as usize, out);
    }
}

/// Where a prompt's text comes from.
#[derive(Debug, Clone, Default)]
pub enum TextSource {
    /// The word list, one token a word (the default).
    #[default]
    Words,
    /// A corpus (`--prompt-corpus`).
    Corpus(std::sync::Arc<CorpusPool>),
}

impl TextSource {
    /// Appends text of `tokens` tokens keyed `key` to `out`.
    pub fn fill(&self, key: u64, salt: u64, tokens: usize, out: &mut String) {
        match self {
            TextSource::Words => block_words(key, salt, tokens, out),
            TextSource::Corpus(p) => p.fill(key, salt, tokens, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> String {
        let s = "It was the best of times, it was the worst of times, it was the age of \
                 wisdom, it was the age of foolishness, it was the epoch of belief, it \
                 was the epoch of incredulity.\n\n";
        s.repeat(60)
    }

    /// The simulator's rule: 4 characters a token.
    fn pool() -> CorpusPool {
        let counted = cut(&corpus(), MAX_CHUNKS)
            .into_iter()
            .map(|c| {
                let t = c.chars().count() as u64 / 4;
                (c, t)
            })
            .collect();
        CorpusPool::new(counted).expect("pool")
    }

    #[test]
    fn chunks_are_space_led_whole_words_in_multiples_of_four() {
        let chunks = cut(&corpus(), MAX_CHUNKS);
        assert!(chunks.len() >= MIN_CHUNKS, "{}", chunks.len());
        for c in &chunks {
            assert!(c.starts_with(' ') && !c.starts_with("  "), "{c:?}");
            assert_eq!(c.chars().count() % 4, 0, "{c:?}");
            assert!(!c.contains('\n'));
        }
        assert!(chunks[0].contains("best of times"));
        assert_eq!(cut(&corpus(), 5).len(), 5);
        assert!(cut("   \n ", 10).is_empty());
    }

    #[test]
    fn filled_text_has_the_asked_length_and_is_mostly_corpus() {
        let p = pool();
        for n in [1usize, 2, 7, 100, 511, 512, 5000] {
            let mut s = String::new();
            p.fill(42, 9, n, &mut s);
            assert_eq!(s.chars().count(), n * 4, "{n} tokens");
            assert!(s.starts_with(' '));
        }
        let mut s = String::new();
        p.fill(42, 9, 512, &mut s);
        // corpus words, not only the list's
        assert!(
            s.contains("foolishness") || s.contains("incredulity"),
            "{s}"
        );
        // a long prompt wraps around the pool
        assert!(p.tokens() < 5000);
    }

    #[test]
    fn the_same_key_gives_the_same_text_and_neighbours_differ_at_once() {
        let p = pool();
        let text = |key| {
            let mut s = String::new();
            p.fill(key, 3, 300, &mut s);
            s
        };
        assert_eq!(text(5), text(5));
        for k in 0..127u64 {
            assert_ne!(text(k)[..4], text(k + 1)[..4]);
        }
        assert!(CorpusPool::new(vec![(" abc".into(), 1); MIN_CHUNKS - 1]).is_none());
        assert!(CorpusPool::new(vec![(" abc".into(), 0); 100]).is_none());
    }
}
