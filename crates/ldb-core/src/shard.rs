//! Coordinated shards (`--shards N`): the pure parts of one measurement made
//! by several client processes — how a cell's load is split, how a shard's
//! clock offset is estimated from timed exchanges, which clock uncertainty
//! still lets a window be opened, and when two shards' windows are one.
//!
//! The rules are written out in `docs/shards.md`; the protocol that carries
//! them is in `ldb-runner/src/shard/`.

use serde::{Deserialize, Serialize};

/// Streams of shard `index` when `total` are split over `shards`: `total /
/// shards` each, the remainder one each to the lowest indexes (so 10 over 4
/// is 3, 3, 2, 2 and the shares always add up to `total`).
pub fn share(total: u32, shards: u32, index: u32) -> u32 {
    if shards == 0 || index >= shards {
        return 0;
    }
    total / shards + u32::from(index < total % shards)
}

/// One timed exchange with a shard: the leader's clock when it sent the
/// question and when the answer came, and the shard's clock when it answered
/// (Unix seconds on each side's own clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSample {
    /// Leader's clock at sending.
    pub sent: f64,
    /// Shard's clock at answering.
    pub peer: f64,
    /// Leader's clock at the answer's arrival.
    pub received: f64,
}

impl ClockSample {
    /// Round-trip time, seconds.
    pub fn rtt(&self) -> f64 {
        self.received - self.sent
    }

    /// Shard clock minus leader clock, taking the answer as made halfway
    /// through the round trip.
    pub fn offset(&self) -> f64 {
        self.peer - (self.sent + self.received) / 2.0
    }
}

/// A shard's clock offset (shard − leader, seconds) and the bound on its error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockEstimate {
    /// Shard clock minus leader clock, seconds.
    pub offset_s: f64,
    /// The true offset lies within `offset_s ± uncertainty_s`.
    pub uncertainty_s: f64,
}

/// The estimate from the exchange with the smallest round trip. The
/// shard answered at some instant between the leader's sending and
/// receiving, so whatever the two directions' delays were, the true offset
/// is within half that round trip of the midpoint estimate; the shortest
/// exchange gives the tightest such bound (the NTP rule). `None` without a
/// usable sample.
pub fn best_estimate(samples: &[ClockSample]) -> Option<ClockEstimate> {
    samples
        .iter()
        .filter(|s| s.rtt().is_finite() && s.rtt() >= 0.0 && s.peer.is_finite())
        .min_by(|a, b| a.rtt().total_cmp(&b.rtt()))
        .map(|s| ClockEstimate {
            offset_s: s.offset(),
            uncertainty_s: s.rtt() / 2.0,
        })
}

/// Share of the window's length that each of its edges may be misplaced on
/// a shard's clock. A window of length D counted on a clock off by ε sees
/// at most ε too much at one edge and ε too little at the other: at a
/// steady rate the two cancel, and at worst (the rate changing at an edge)
/// the count is off by 2ε/D. With ε ≤ 0.0005 · D that is ≤ 0.1 %.
pub const EDGE_SHARE: f64 = 0.0005;

/// The largest clock uncertainty, seconds, with which a window of
/// `window_s` seconds may be opened (see [`EDGE_SHARE`]).
pub fn uncertainty_bound(window_s: f64) -> f64 {
    window_s.max(0.0) * EDGE_SHARE
}

/// What one shard contributed to a cell (result key `shards`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardCellRecord {
    /// Shard index (0 is the leader).
    pub index: u32,
    /// Streams the shard ran.
    pub concurrency: u32,
    /// Tokens the shard counted inside the window (its part of
    /// `client_output_tokens`, before chunk calibration).
    pub delivered_tokens: u64,
    /// Requests the shard started.
    pub requests: u64,
    /// The shard's own process limited its share of the window (same rule as
    /// the cell's `client_limited`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_limited: bool,
    /// The shard's CPU share over the window, 0–1 (Linux only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_share: Option<f64>,
    /// Its clock minus the leader's, seconds (0 for the leader).
    pub clock_offset_s: f64,
    /// The bound on that offset's error, seconds.
    pub clock_uncertainty_s: f64,
    /// The shard was lost during the cell: nothing of it is counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
}

/// Why two windows (Unix seconds `[start, end]`) are not one measurement:
/// an edge apart by more than `tolerance_s`, or a window of no length.
pub fn windows_differ(a: (f64, f64), b: (f64, f64), tolerance_s: f64) -> Option<String> {
    if !(a.1 > a.0 && b.1 > b.0) {
        return Some("a window of no length".into());
    }
    let (ds, de) = ((a.0 - b.0).abs(), (a.1 - b.1).abs());
    (ds > tolerance_s || de > tolerance_s).then(|| {
        format!(
            "the windows' starts differ by {ds:.3} s and their ends by {de:.3} s \
             (tolerance {tolerance_s:.3} s)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_the_remainder_goes_to_the_lowest_indexes() {
        let got: Vec<u32> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(got, [3, 3, 2, 2]);
        assert_eq!(
            (0..3).map(|i| share(2, 3, i)).collect::<Vec<_>>(),
            [1, 1, 0]
        );
        for total in 0..50 {
            for n in 1..9 {
                assert_eq!((0..n).map(|i| share(total, n, i)).sum::<u32>(), total);
            }
        }
        assert_eq!(share(5, 2, 2), 0, "an index past the shards gets nothing");
    }

    #[test]
    fn the_shortest_round_trip_wins_and_bounds_the_true_offset() {
        // Shard clock 2.5 s ahead; asymmetric delays on the slow samples.
        let true_offset = 2.5;
        let mk = |sent: f64, out: f64, back: f64| ClockSample {
            sent,
            peer: sent + out + true_offset,
            received: sent + out + back,
        };
        let samples = [
            mk(0.0, 0.030, 0.002),
            mk(1.0, 0.001, 0.003),
            mk(2.0, 0.2, 0.0),
        ];
        let e = best_estimate(&samples).expect("estimate");
        assert!((e.uncertainty_s - 0.002).abs() < 1e-12);
        assert!((e.offset_s - true_offset).abs() <= e.uncertainty_s + 1e-12);
        assert!(best_estimate(&[]).is_none());
    }

    #[test]
    fn a_ten_second_window_tolerates_five_milliseconds() {
        assert!((uncertainty_bound(10.0) - 0.005).abs() < 1e-12);
        assert_eq!(uncertainty_bound(-1.0), 0.0);
    }

    #[test]
    fn windows_within_the_tolerance_are_one() {
        assert!(windows_differ((100.0, 110.0), (100.004, 110.003), 0.005).is_none());
        let why = windows_differ((100.0, 110.0), (101.0, 111.0), 0.005).expect("differ");
        assert!(why.contains("1.000 s"), "{why}");
        assert!(windows_differ((1.0, 1.0), (1.0, 2.0), 1.0).is_some());
    }
}
