//! Every token arrival of a cell's streams, by stream, over a stretch the
//! runner chooses: the prefill–decode interference probe reads the streams'
//! gaps and rates around each injected prompt from it
//! (`ldb_core::interference`). Inactive (one relaxed load per chunk) until
//! [`TokenTail::start`], so cells without the probe pay nothing more.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use ldb_core::interference::Arrival;

/// Arrivals of each stream slot while active.
#[derive(Debug, Default)]
pub struct TokenTail {
    on: AtomicBool,
    log: Mutex<Vec<Vec<Arrival>>>,
}

/// Arrivals beyond this many per stream are dropped (a guard: a probe
/// stretch of minutes at thousands of tokens per second stays far below).
const MAX_PER_STREAM: usize = 4_000_000;

impl TokenTail {
    /// Record from now on.
    pub fn start(&self) {
        self.on.store(true, Ordering::Release);
    }

    /// Stream `slot` received `n` tokens at `t`; `first`: its request's first.
    #[inline]
    pub fn add(&self, slot: u32, t: f64, n: u64, first: bool) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let i = slot as usize;
        if log.len() <= i {
            log.resize_with(i + 1, Vec::new);
        }
        if log[i].len() < MAX_PER_STREAM {
            log[i].push(Arrival { t, n, first });
        }
    }

    /// A copy of the arrivals so far, one list per slot, each in time order.
    pub fn snapshot(&self) -> Vec<Vec<Arrival>> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = log.clone();
        for s in &mut out {
            s.sort_by(|a, b| a.t.total_cmp(&b.t));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_kept_until_started() {
        let t = TokenTail::default();
        t.add(0, 1.0, 1, false);
        t.start();
        t.add(2, 2.0, 3, true);
        t.add(2, 1.5, 1, false);
        let s = t.snapshot();
        assert_eq!(s.len(), 3);
        assert!(s[0].is_empty());
        assert_eq!(s[2].iter().map(|a| a.t).collect::<Vec<_>>(), vec![1.5, 2.0]);
    }
}
