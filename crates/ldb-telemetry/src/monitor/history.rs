//! Bounded snapshot history with absolute indices that survive trimming.

use ldb_core::hardware::HardwareSnapshot;
use std::collections::VecDeque;

/// Ring of the most recent snapshots. Index `i` names the `i`-th snapshot
/// ever pushed; once trimmed away it is simply absent.
#[derive(Debug)]
pub(crate) struct History {
    items: VecDeque<HardwareSnapshot>,
    /// Absolute index of `items[0]`.
    base: usize,
    cap: usize,
}

impl History {
    pub(crate) fn new(cap: usize) -> Self {
        History {
            items: VecDeque::new(),
            base: 0,
            cap: cap.max(1),
        }
    }

    /// Absolute index the next snapshot will get.
    pub(crate) fn next_index(&self) -> usize {
        self.base + self.items.len()
    }

    pub(crate) fn push(&mut self, s: HardwareSnapshot) {
        if self.items.len() == self.cap {
            self.items.pop_front();
            self.base += 1;
        }
        self.items.push_back(s);
    }

    /// Copies of snapshots with absolute index in `[from, to)`.
    pub(crate) fn range(&self, from: usize, to: usize) -> Vec<HardwareSnapshot> {
        let lo = from.saturating_sub(self.base).min(self.items.len());
        let hi = to.saturating_sub(self.base).min(self.items.len());
        if lo >= hi {
            return Vec::new();
        }
        self.items.range(lo..hi).cloned().collect()
    }

    pub(crate) fn latest(&self) -> Option<&HardwareSnapshot> {
        self.items.back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64) -> HardwareSnapshot {
        HardwareSnapshot {
            t_s: t,
            ..HardwareSnapshot::default()
        }
    }

    #[test]
    fn indices_survive_trimming() {
        let mut h = History::new(3);
        for i in 0..5 {
            h.push(at(f64::from(i)));
        }
        assert_eq!(h.next_index(), 5);
        let r: Vec<f64> = h.range(0, 5).iter().map(|s| s.t_s).collect();
        assert_eq!(r, [2.0, 3.0, 4.0]);
        let r: Vec<f64> = h.range(3, 4).iter().map(|s| s.t_s).collect();
        assert_eq!(r, [3.0]);
        assert!(h.range(4, 2).is_empty());
        assert!(h.range(9, 12).is_empty());
        assert_eq!(h.latest().map(|s| s.t_s), Some(4.0));
    }
}
