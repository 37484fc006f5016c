//! Cold prefill measurements: which prompts the server has already seen.
//!
//! A scout is timed as the prefill of its context only when nothing with the
//! same prefix went before it. Its prompt can have been sent already when an
//! earlier scout of the context failed (the cell went on and its streams
//! filled the prefix cache), when a stalled cell is measured again, or on a
//! later `--repeat` pass. Such a scout gets a fresh uniqueness prefix
//! ([`ldb_core::prompt::renewed`]), and its cell's streams send that prompt
//! too, so they still find it cached. Where the server says how many prompt
//! tokens it served from its cache, a row whose scout hit the cache anyway
//! is not recorded ([`hit_cache`]).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use ldb_core::prompt::{Message, renewed};

/// Prompts sent so far in this run, by a hash of their first message after
/// any shared system prompt (the one that opens with the nonce).
#[derive(Debug, Default)]
pub struct SentPrompts(Mutex<HashSet<u64>>);

fn key(msgs: &[Message]) -> u64 {
    let mut h = DefaultHasher::new();
    msgs.iter()
        .find(|m| m.role != "system")
        .map(|m| m.content.as_str())
        .hash(&mut h);
    h.finish()
}

impl SentPrompts {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note that `msgs` is about to be sent (a failed request may still
    /// have been prefilled, so the note comes before the answer).
    pub fn mark(&self, msgs: &[Message]) {
        self.set().insert(key(msgs));
    }

    /// Whether `msgs` went out before.
    pub fn was_sent(&self, msgs: &[Message]) -> bool {
        self.set().contains(&key(msgs))
    }

    /// `msgs` itself when it was never sent, else the first of its renewals
    /// that was not (`None`: it was sent).
    pub fn cold(&self, msgs: &[Message]) -> Option<Vec<Message>> {
        if !self.was_sent(msgs) {
            return None;
        }
        (1..).map(|n| renewed(msgs, n)).find(|m| !self.was_sent(m))
    }
}

/// Whether a scout's prefill came from the prefix cache: more than half of
/// its prompt tokens served from it. A cold prompt shares only the chat
/// template and the nonce's opening with earlier ones (a few dozen tokens at
/// most; vLLM counts whole blocks); a cached one all but its last block.
pub fn hit_cache(prompt_tokens: u64, cached_tokens: u64) -> bool {
    prompt_tokens > 0 && cached_tokens.saturating_mul(2) > prompt_tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::prompt::{messages, nonce};

    #[test]
    fn a_sent_prompt_is_renewed_and_each_renewal_once() {
        let sent = SentPrompts::default();
        let m = messages(&nonce("r", "ctx8"), 20);
        assert_eq!(sent.cold(&m), None, "never sent: used as it is");
        sent.mark(&m);
        let first = sent.cold(&m).expect("renewed");
        assert_eq!(first, renewed(&m, 1));
        sent.mark(&first);
        assert_eq!(sent.cold(&m), Some(renewed(&m, 2)));
    }

    #[test]
    fn a_scout_hit_the_cache_when_most_of_its_prompt_was_cached() {
        assert!(hit_cache(8192, 8191));
        assert!(hit_cache(100, 96));
        assert!(!hit_cache(8192, 32), "the chat template's block");
        assert!(!hit_cache(8192, 0));
        assert!(!hit_cache(0, 0));
        assert!(!hit_cache(100, 50));
    }
}
