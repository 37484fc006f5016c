//! The pooled distributions of a repeated cell: its headline percentiles
//! (TTFT, TTFO, token gaps) over the requests and gaps of every valid
//! repeat together, not a mean of each repeat's percentile.
//!
//! A mean of p99s is not a p99: three repeats whose slowest 1 % differ say
//! less about the cell's tail than the 1 % of all their requests together.
//! So each repeat keeps what its distributions are made of — the TTFT and
//! TTFO of the requests its own statistics counted, and its token-gap
//! histogram (sparse) — and the cell's percentiles come from their union.
//! The rates stay means over the repeats.

use serde::{Deserialize, Serialize};

use crate::gaps::{GapCounts, GapHistogram, GapStats};
use crate::result::{CellResult, Dist};
use crate::stats::summarize;

/// What one repeat's distributions are made of (`repeats[].pool`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepeatPool {
    /// TTFT of the requests the repeat's own TTFT counted (first token in
    /// the window, with output), seconds.
    pub ttft: Vec<f64>,
    /// TTFO of the same requests, seconds.
    pub ttfo: Vec<f64>,
    /// The window's token-gap histogram: `[bucket, gaps]` of its non-empty
    /// buckets (`ldb_core::gaps`: 1 % wide from 1 µs); empty when the run
    /// did not hand it over.
    pub gap_buckets: Vec<(u32, u64)>,
    /// The largest gap, seconds.
    pub gap_max: Option<f64>,
}

impl RepeatPool {
    /// The pool of a measured cell: its window requests, and the gap
    /// histogram the run left in it (`ext.gap_counts`).
    pub fn of(c: &CellResult) -> RepeatPool {
        // The same requests as the cell's own TTFT/TTFO (cellstats, window scope).
        let counted: Vec<_> = c
            .request_samples
            .iter()
            .filter(|s| s.in_window && s.output_tokens > 0 && s.first_token_in_window)
            .collect();
        let (gap_buckets, gap_max) = match &c.ext.gap_counts {
            Some(g) => (
                g.buckets
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| (i as u32, *n))
                    .collect(),
                Some(g.max).filter(|m| *m > 0.0),
            ),
            None => (Vec::new(), None),
        };
        RepeatPool {
            ttft: counted.iter().map(|s| s.ttft).collect(),
            ttfo: counted.iter().map(|s| s.ttfo).collect(),
            gap_buckets,
            gap_max,
        }
    }

    fn gap_counts(&self) -> GapCounts {
        let mut g = GapHistogram::default().snapshot();
        for &(i, n) in &self.gap_buckets {
            if let Some(b) = g.buckets.get_mut(i as usize) {
                *b += n;
            }
        }
        g.max = self.gap_max.unwrap_or(0.0);
        g
    }
}

/// The pooled distributions of several repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pooled {
    /// TTFT over every repeat's counted requests (`None`: none).
    pub ttft: Option<Dist>,
    /// TTFO over the same requests (`None`: no answer token in any).
    pub ttfo: Option<Dist>,
    /// Token gaps over every repeat's histogram (`None`s: none recorded).
    pub gaps: GapStats,
}

/// Pool `pools`: the distributions of the union of their requests and gaps.
pub fn pooled<'a>(pools: impl IntoIterator<Item = &'a RepeatPool>) -> Pooled {
    let (mut ttft, mut ttfo) = (Vec::new(), Vec::new());
    let gaps = GapHistogram::default();
    for p in pools {
        ttft.extend_from_slice(&p.ttft);
        ttfo.extend_from_slice(&p.ttfo);
        if !p.gap_buckets.is_empty() {
            gaps.absorb(&p.gap_counts());
        }
    }
    let dist = |v: Vec<f64>| {
        let s = summarize(v);
        (s.n > 0).then(|| s.into())
    };
    Pooled {
        ttft: dist(ttft),
        ttfo: dist(ttfo),
        gaps: gaps.stats(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cellstats::{LatencyScope, latency_stats};
    use crate::gaps::TokenGaps;
    use crate::result::RequestSample;

    fn req(ttft: f64) -> RequestSample {
        RequestSample {
            ttft,
            ttfo: ttft + 0.01,
            output_tokens: 10,
            in_window: true,
            first_token_in_window: true,
            ..RequestSample::default()
        }
    }

    fn cell(ttfts: &[f64], gap: f64) -> CellResult {
        let mut samples: Vec<RequestSample> = ttfts.iter().map(|t| req(*t)).collect();
        // A ramp-up request: not in the cell's TTFT, so not in the pool.
        samples.push(RequestSample {
            first_token_in_window: false,
            ..req(99.0)
        });
        let mut c = CellResult {
            request_samples: samples,
            ..CellResult::default()
        };
        c.latency = latency_stats(
            c.request_samples.iter().filter(|s| s.in_window),
            LatencyScope::Window,
        );
        let h = GapHistogram::default();
        h.record(TokenGaps {
            each: gap,
            count: 100,
        });
        c.ext.gap_counts = Some(h.snapshot());
        let s = h.stats();
        (
            c.ext.token_gap_p50,
            c.ext.token_gap_p99,
            c.ext.token_gap_max,
        ) = (s.p50, s.p99, s.max);
        c
    }

    #[test]
    fn one_repeats_pool_gives_back_its_own_distributions() {
        let c = cell(&[0.1, 0.2, 0.3, 0.4], 0.02);
        let p = pooled([&RepeatPool::of(&c)]);
        assert_eq!(p.ttft, c.latency.ttft);
        assert_eq!(p.ttfo, c.latency.ttfo);
        assert_eq!(p.gaps.p99, c.ext.token_gap_p99);
        assert_eq!(p.gaps.max, c.ext.token_gap_max);
    }

    #[test]
    fn pools_survive_a_write_and_read_back() {
        let pool = RepeatPool::of(&cell(&[0.1, 0.2], 0.02));
        assert_eq!(pool.gap_buckets.len(), 1);
        let text = serde_json::to_string(&pool).expect("json");
        let back: RepeatPool = serde_json::from_str(&text).expect("reads");
        assert_eq!(back, pool);
    }
}
