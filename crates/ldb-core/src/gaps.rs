//! The per-token gap distribution of a cell.
//!
//! A gap is the time between two consecutive output tokens of one request, as
//! the client receives them. Tokens that arrive together (one socket read, or
//! one chunk carrying several tokens under speculative decoding) share the gap
//! before them evenly: 3 tokens read 30 ms after the previous read are three
//! gaps of 10 ms. Only gaps whose both ends lie inside the measurement window
//! count (see `window::RequestTrack`).
//!
//! Many streams record into one histogram at once, so the buckets are atomic
//! counters. The buckets are logarithmic with 1 % width from 1 µs to ~1,000 s,
//! so a percentile read from them is within 1 % of the exact sample
//! percentile (a gap below 1 µs goes to the first bucket, above the range to
//! the last). The maximum is kept exactly. Memory: 16 KiB per cell.

use std::sync::atomic::{AtomicU64, Ordering};

/// Smallest resolved gap, seconds.
const MIN_GAP: f64 = 1e-6;
/// Bucket growth factor (1 % wide buckets).
const GROWTH: f64 = 1.01;
/// Buckets from `MIN_GAP` to `MIN_GAP · GROWTH^BUCKETS` ≈ 1,000 s.
const BUCKETS: usize = 2083;

/// Gaps of several tokens that arrived together: `count` gaps of `each` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenGaps {
    /// One token's share of the gap, seconds.
    pub each: f64,
    /// How many tokens shared it.
    pub count: u64,
}

/// A histogram of token gaps that many streams fill concurrently.
#[derive(Debug)]
pub struct GapHistogram {
    buckets: Box<[AtomicU64]>,
    max_bits: AtomicU64,
}

impl Default for GapHistogram {
    fn default() -> Self {
        GapHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max_bits: AtomicU64::new(0),
        }
    }
}

fn bucket_of(gap: f64) -> usize {
    if gap <= MIN_GAP {
        return 0;
    }
    let i = ((gap / MIN_GAP).ln() / GROWTH.ln()).floor();
    (i as usize).min(BUCKETS - 1)
}

/// The value a bucket stands for: the geometric middle of its bounds.
fn bucket_value(i: usize) -> f64 {
    MIN_GAP * GROWTH.powf(i as f64 + 0.5)
}

impl GapHistogram {
    /// Record `g.count` gaps of `g.each` seconds (negative or NaN gaps are ignored).
    pub fn record(&self, g: TokenGaps) {
        if g.count == 0 || !g.each.is_finite() || g.each < 0.0 {
            return;
        }
        self.buckets[bucket_of(g.each)].fetch_add(g.count, Ordering::Relaxed);
        // Non-negative f64 bit patterns sort like the numbers they encode.
        // Most gaps are no new maximum: a plain load spares them the locked
        // read-modify-write on a line every stream of the cell shares.
        let bits = g.each.to_bits();
        if bits > self.max_bits.load(Ordering::Relaxed) {
            self.max_bits.fetch_max(bits, Ordering::Relaxed);
        }
    }

    /// Take back gaps recorded earlier (a window end learned late: its
    /// tokens after the end are not the window's). The maximum stays as
    /// recorded: the histogram keeps no second largest to fall back on, so
    /// a taken-back gap that was the largest leaves it high.
    pub fn forget(&self, g: TokenGaps) {
        if g.count == 0 || !g.each.is_finite() || g.each < 0.0 {
            return;
        }
        let b = &self.buckets[bucket_of(g.each)];
        let _ = b.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            Some(n.saturating_sub(g.count))
        });
    }

    /// The bucket counts and maximum, to hand to another histogram: bucket
    /// sums are exact, so shards' histograms merge into the one a single
    /// process would have filled.
    pub fn snapshot(&self) -> GapCounts {
        GapCounts {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            max: f64::from_bits(self.max_bits.load(Ordering::Relaxed)),
        }
    }

    /// Add another histogram's counts (a snapshot of a different size is
    /// ignored: it was made by another version).
    pub fn absorb(&self, other: &GapCounts) {
        if other.buckets.len() != self.buckets.len() {
            return;
        }
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.fetch_add(*theirs, Ordering::Relaxed);
        }
        if other.max.is_finite() && other.max >= 0.0 {
            self.max_bits
                .fetch_max(other.max.to_bits(), Ordering::Relaxed);
        }
    }

    /// Percentiles and maximum of what was recorded so far.
    pub fn stats(&self) -> GapStats {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let n: u64 = counts.iter().sum();
        if n == 0 {
            return GapStats::default();
        }
        let max = f64::from_bits(self.max_bits.load(Ordering::Relaxed));
        let at = |p: f64| {
            // The smallest gap with at least p of the gaps at or below it.
            let rank = ((p * n as f64).ceil() as u64).clamp(1, n);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_value(i).min(max);
                }
            }
            max
        };
        GapStats {
            count: n,
            p50: Some(at(0.50)),
            p90: Some(at(0.90)),
            p99: Some(at(0.99)),
            max: Some(max),
        }
    }
}

/// A histogram's counts as data (see [`GapHistogram::snapshot`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GapCounts {
    /// Gaps per bucket.
    pub buckets: Vec<u64>,
    /// Largest gap, seconds.
    pub max: f64,
}

/// The token-gap distribution of a cell (`None` when no gap was inside the window).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GapStats {
    /// Gaps recorded.
    pub count: u64,
    /// Median gap, seconds.
    pub p50: Option<f64>,
    /// 90th percentile, seconds.
    pub p90: Option<f64>,
    /// 99th percentile, seconds.
    pub p99: Option<f64>,
    /// Largest gap, seconds (exact).
    pub max: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() <= 0.011 * b)
    }

    #[test]
    fn two_absorbed_halves_give_the_whole_histograms_statistics() {
        let (whole, a, b, merged) = (
            GapHistogram::default(),
            GapHistogram::default(),
            GapHistogram::default(),
            GapHistogram::default(),
        );
        for ms in 1..=1000u32 {
            let g = TokenGaps {
                each: f64::from(ms) / 1000.0,
                count: 1,
            };
            whole.record(g);
            if ms % 3 == 0 { &a } else { &b }.record(g);
        }
        merged.absorb(&a.snapshot());
        merged.absorb(&b.snapshot());
        assert_eq!(merged.stats(), whole.stats());
    }

    #[test]
    fn percentiles_within_one_percent_and_exact_max() {
        let h = GapHistogram::default();
        // 1..=1000 ms, one gap each.
        for ms in 1..=1000 {
            h.record(TokenGaps {
                each: f64::from(ms) / 1000.0,
                count: 1,
            });
        }
        let s = h.stats();
        assert_eq!(s.count, 1000);
        assert!(close(s.p50, 0.500), "{s:?}");
        assert!(close(s.p90, 0.900), "{s:?}");
        assert!(close(s.p99, 0.990), "{s:?}");
        assert_eq!(s.max, Some(1.0));
    }

    #[test]
    fn a_multi_token_chunk_is_many_small_gaps() {
        // Speculative decoding: 1 token after 20 ms, then 3 tokens after 30 ms, repeated.
        let h = GapHistogram::default();
        for _ in 0..100 {
            h.record(TokenGaps {
                each: 0.020,
                count: 1,
            });
            h.record(TokenGaps {
                each: 0.010,
                count: 3,
            });
        }
        let s = h.stats();
        assert_eq!(s.count, 400);
        assert!(close(s.p50, 0.010), "{s:?}");
        assert!(close(s.p90, 0.020), "{s:?}");
        assert_eq!(s.max, Some(0.020));
    }

    #[test]
    fn empty_and_odd_inputs() {
        let h = GapHistogram::default();
        assert_eq!(h.stats(), GapStats::default());
        h.record(TokenGaps {
            each: f64::NAN,
            count: 3,
        });
        h.record(TokenGaps {
            each: -1.0,
            count: 3,
        });
        h.record(TokenGaps {
            each: 1.0,
            count: 0,
        });
        assert_eq!(h.stats().count, 0);
        h.record(TokenGaps {
            each: 0.0,
            count: 2,
        });
        h.record(TokenGaps {
            each: 1e6,
            count: 1,
        });
        let s = h.stats();
        assert_eq!(s.count, 3);
        assert_eq!(s.max, Some(1e6));
        assert!(s.p50.is_some_and(|p| p < 2e-6));
    }
}
