//! `--repeat N`: one cell measured several times, and how the repeats sit
//! in the cell's record.
//!
//! The model (docs/result-json.md, "Repeats"): the cell object stays one
//! object per (context, concurrency). Its detail keys (samples, token
//! counts, window, scheduler, hardware) are those of its first repeat; its
//! headline metrics — the ones listed in [`METRICS`] — come from the
//! repeats that measured a value: the rates are their mean, the TTFT, TTFO
//! and token-gap distributions are those of all their requests and gaps
//! pooled ([`pool`]; files from before 7 Dec 2026 have no pools, and their
//! cells keep the mean of each repeat's value). `repeats` lists every repeat's own values
//! in the order they were measured, `repeat_stats` the mean, standard
//! deviation and 95 % interval of each headline metric. With N = 1 neither
//! key is written, so a single run's file is unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::result::{CellResult, CellStatus, Dist};
use crate::student::MeanCi;

pub mod pool;

use pool::{RepeatPool, pooled};

/// One measurement of a repeated cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepeatEntry {
    /// 1-based repeat number (the pass of the matrix it was measured in).
    pub repeat: u32,
    /// That measurement's status.
    pub status: CellStatus,
    /// Its window start, Unix seconds.
    pub window_start_unix: Option<f64>,
    /// Its window end, Unix seconds.
    pub window_end_unix: Option<f64>,
    /// What its distributions are made of, pooled into the cell's
    /// percentiles (valid repeats only; absent in files from before 7 Dec
    /// 2026).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<RepeatPool>,
    /// The headline metrics it measured, by key (absent: no value).
    #[serde(flatten)]
    pub values: BTreeMap<String, f64>,
}

/// The headline metrics a repeated cell averages, by their key in
/// `repeats` and `repeat_stats`.
pub const METRICS: [&str; 14] = [
    "aggregate_tps",
    "per_request_avg_tps",
    "ttft_avg",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "ttfo_avg",
    "ttfo_p50",
    "ttfo_p90",
    "ttfo_p99",
    "token_gap_p50",
    "token_gap_p90",
    "token_gap_p99",
    "token_gap_max",
];

/// A metric's value in a cell record, `None` when it has none.
pub fn metric(c: &CellResult, key: &str) -> Option<f64> {
    let dist = |d: Option<Dist>, part: &str| {
        d.map(|d| match part {
            "avg" => d.avg,
            "p50" => d.p50,
            "p90" => d.p90,
            _ => d.p99,
        })
    };
    let v = match key {
        "aggregate_tps" => c.aggregate_tps,
        "per_request_avg_tps" => c.per_request_avg_tps,
        "token_gap_p50" => c.ext.token_gap_p50,
        "token_gap_p90" => c.ext.token_gap_p90,
        "token_gap_p99" => c.ext.token_gap_p99,
        "token_gap_max" => c.ext.token_gap_max,
        k => match k.split_once('_') {
            Some(("ttft", part)) => dist(c.latency.ttft, part),
            Some(("ttfo", part)) => dist(c.latency.ttfo, part),
            _ => None,
        },
    };
    v.filter(|v| v.is_finite())
}

/// Writes `v` as metric `key` of the record (no-op for an unknown key or a
/// distribution the record does not have).
fn set_metric(c: &mut CellResult, key: &str, v: f64) {
    let put = |d: &mut Option<Dist>, part: &str| {
        if let Some(d) = d {
            match part {
                "avg" => d.avg = v,
                "p50" => d.p50 = v,
                "p90" => d.p90 = v,
                _ => d.p99 = v,
            }
        }
    };
    match key {
        "aggregate_tps" => c.aggregate_tps = Some(v),
        "per_request_avg_tps" => c.per_request_avg_tps = Some(v),
        "token_gap_p50" => c.ext.token_gap_p50 = Some(v),
        "token_gap_p90" => c.ext.token_gap_p90 = Some(v),
        "token_gap_p99" => c.ext.token_gap_p99 = Some(v),
        "token_gap_max" => c.ext.token_gap_max = Some(v),
        k => match k.split_once('_') {
            Some(("ttft", part)) => put(&mut c.latency.ttft, part),
            Some(("ttfo", part)) => put(&mut c.latency.ttfo, part),
            _ => {}
        },
    }
}

/// Writes a repeat's values into a cell record (for tables that show one
/// repeat as a row of its own).
pub fn apply_values(c: &mut CellResult, r: &RepeatEntry) {
    for (k, v) in &r.values {
        if k.starts_with("ttft") && c.latency.ttft.is_none() {
            c.latency.ttft = Some(Dist::default());
        }
        if k.starts_with("ttfo") && c.latency.ttfo.is_none() {
            c.latency.ttfo = Some(Dist::default());
        }
        set_metric(c, k, *v);
    }
}

/// A measured value the mean may use: `ok` or `capacity_limited`.
fn valid(s: CellStatus) -> bool {
    matches!(s, CellStatus::Ok | CellStatus::CapacityLimited)
}

/// The entry of one measurement.
pub fn entry(c: &CellResult, repeat: u32) -> RepeatEntry {
    let values = if valid(c.ext.status) {
        METRICS
            .iter()
            .filter_map(|k| metric(c, k).map(|v| (k.to_string(), v)))
            .collect()
    } else {
        BTreeMap::new()
    };
    RepeatEntry {
        repeat,
        status: c.ext.status,
        window_start_unix: c.ext.window_start_unix,
        window_end_unix: c.ext.window_end_unix,
        pool: valid(c.ext.status).then(|| RepeatPool::of(c)),
        values,
    }
}

/// How many repeats a record holds (1 for a record without `repeats`).
pub fn count(c: &CellResult) -> u32 {
    (c.ext.repeats.len() as u32).max(1)
}

/// Adds measurement `new` (repeat number `repeat`) to the cell record
/// `cell`, which holds the earlier repeats. The first valid repeat's record
/// becomes the detail record if the earlier ones all failed; the status is
/// the first failing repeat's (a cell is trusted only when every repeat
/// measured), else `capacity_limited` if any was, else `ok`.
pub fn add(cell: &mut CellResult, new: CellResult, repeat: u32) {
    if cell.ext.repeats.is_empty() {
        cell.ext.repeats.push(entry(cell, 1));
    }
    let e = entry(&new, repeat);
    let earlier = std::mem::take(&mut cell.ext.repeats);
    if !earlier.iter().any(|r| valid(r.status)) && valid(new.ext.status) {
        *cell = new;
    }
    cell.ext.repeats = earlier;
    cell.ext.repeats.push(e);
    settle(cell);
}

/// Recomputes the headline means, `repeat_stats` and the status from the
/// record's `repeats`.
pub fn settle(cell: &mut CellResult) {
    let reps = &cell.ext.repeats;
    if reps.is_empty() {
        return;
    }
    let mut stats = BTreeMap::new();
    for k in METRICS {
        let xs: Vec<f64> = reps
            .iter()
            .filter(|r| valid(r.status))
            .filter_map(|r| r.values.get(k).copied())
            .collect();
        if let Some(m) = MeanCi::of(&xs) {
            stats.insert(k.to_string(), m);
        }
    }
    let status = reps
        .iter()
        .map(|r| r.status)
        .find(|s| !valid(*s))
        .or_else(|| {
            reps.iter()
                .map(|r| r.status)
                .find(|s| *s == CellStatus::CapacityLimited)
        })
        .unwrap_or(CellStatus::Ok);
    if status != cell.ext.status && !valid(status) {
        let failed = reps
            .iter()
            .find(|r| r.status == status)
            .map_or(0, |r| r.repeat);
        cell.ext.status_reason = format!("repeat {failed} of the cell: {}", status.as_str());
    }
    cell.ext.status = status;
    if valid(status) {
        for (k, m) in &stats {
            set_metric(cell, k, m.mean);
        }
        set_pooled(cell);
    } else {
        clear_headline(cell);
    }
    cell.ext.repeat_stats = stats;
}

/// The distributions' keys from every valid repeat's requests and gaps
/// pooled, when every valid repeat has its pool (else the means stay). The
/// token gaps only when every pool has a histogram.
fn set_pooled(cell: &mut CellResult) {
    let pools: Option<Vec<&RepeatPool>> = cell
        .ext
        .repeats
        .iter()
        .filter(|r| valid(r.status))
        .map(|r| r.pool.as_ref())
        .collect();
    let Some(pools) = pools.filter(|p| p.len() > 1) else {
        return;
    };
    let with_gaps = pools.iter().all(|p| !p.gap_buckets.is_empty());
    let p = pooled(pools);
    if p.ttft.is_some() {
        cell.latency.ttft = p.ttft;
    }
    if p.ttfo.is_some() {
        cell.latency.ttfo = p.ttfo;
    }
    if with_gaps && p.gaps.count > 0 {
        cell.ext.token_gap_p50 = p.gaps.p50;
        cell.ext.token_gap_p90 = p.gaps.p90;
        cell.ext.token_gap_p99 = p.gaps.p99;
        cell.ext.token_gap_max = p.gaps.max;
    }
}

/// An invalid cell shows no headline number, as a single `error` or
/// `no_tokens` measurement does: the mean of its valid repeats — or one
/// valid repeat's own value — would read as the cell's value. So every key
/// of [`METRICS`] goes: the rates, TTFT, TTFO and the token gaps. `repeats`
/// and `repeat_stats` keep every measured value.
fn clear_headline(cell: &mut CellResult) {
    cell.aggregate_tps = None;
    cell.per_request_avg_tps = None;
    cell.latency.ttft = None;
    cell.latency.ttfo = None;
    cell.ext.token_gap_p50 = None;
    cell.ext.token_gap_p90 = None;
    cell.ext.token_gap_p99 = None;
    cell.ext.token_gap_max = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(tps: f64, ttft_p99: f64, start: f64) -> CellResult {
        let mut c = CellResult {
            concurrency: 2,
            context_tokens: 0,
            aggregate_tps: Some(tps),
            per_request_avg_tps: Some(tps / 2.0),
            total_tokens: tps as u64,
            ..CellResult::default()
        };
        c.latency.ttft = Some(Dist {
            avg: ttft_p99 / 2.0,
            p50: ttft_p99 / 2.0,
            p90: ttft_p99,
            p99: ttft_p99,
        });
        c.ext.window_start_unix = Some(start);
        c
    }

    #[test]
    fn three_repeats_give_means_and_keep_each_value() {
        let mut cell = measured(100.0, 0.2, 10.0);
        add(&mut cell, measured(104.0, 0.4, 20.0), 2);
        add(&mut cell, measured(96.0, 0.3, 30.0), 3);
        assert_eq!(count(&cell), 3);
        assert_eq!(cell.aggregate_tps, Some(100.0));
        assert!((cell.latency.ttft.unwrap().p99 - 0.3).abs() < 1e-12);
        // The detail record is the first repeat's.
        assert_eq!(cell.total_tokens, 100);
        let s = cell.ext.repeat_stats["aggregate_tps"];
        assert_eq!((s.n, s.std_dev), (3, Some(4.0)));
        let starts: Vec<_> = cell
            .ext
            .repeats
            .iter()
            .map(|r| r.window_start_unix)
            .collect();
        assert_eq!(starts, [Some(10.0), Some(20.0), Some(30.0)]);
        assert_eq!(cell.ext.repeats[1].values["aggregate_tps"], 104.0);
    }

    #[test]
    fn a_failed_repeat_marks_the_cell_and_is_left_out_of_the_mean() {
        let mut cell = measured(100.0, 0.2, 10.0);
        let mut bad = measured(0.0, 0.0, 20.0);
        bad.ext.status = CellStatus::Error;
        add(&mut cell, bad, 2);
        add(&mut cell, measured(110.0, 0.2, 30.0), 3);
        assert_eq!(cell.ext.status, CellStatus::Error);
        assert!(cell.ext.status_reason.contains("repeat 2"));
        // No headline number for an invalid cell: the mean of the valid
        // repeats (105) is not the cell's value.
        assert_eq!(cell.aggregate_tps, None);
        assert_eq!(cell.per_request_avg_tps, None);
        assert!(cell.ext.repeats[1].values.is_empty());
        // The repeats and their statistics stay in the file.
        assert_eq!(cell.ext.repeats[2].values["aggregate_tps"], 110.0);
        assert_eq!(cell.ext.repeat_stats["aggregate_tps"].mean, 105.0);
    }

    #[test]
    fn a_late_failed_repeat_takes_back_the_means_already_written() {
        let mut cell = measured(100.0, 0.2, 10.0);
        add(&mut cell, measured(110.0, 0.4, 20.0), 2);
        assert_eq!(cell.aggregate_tps, Some(105.0));
        let mut bad = measured(0.0, 0.0, 30.0);
        bad.ext.status = CellStatus::NoTokens;
        add(&mut cell, bad, 3);
        assert_eq!(cell.ext.status, CellStatus::NoTokens);
        assert_eq!(cell.aggregate_tps, None);
        assert_eq!(count(&cell), 3);
    }

    /// Issue 35: a failed repeat cleared the rates but left TTFT, TTFO and
    /// the token gaps standing (a valid repeat's value read as the cell's).
    #[test]
    fn a_failed_repeat_clears_every_headline_key() {
        let with_all = |tps: f64| {
            let mut c = measured(tps, 0.2, 10.0);
            c.latency.ttfo = c.latency.ttft;
            c.ext.token_gap_p50 = Some(0.01);
            c.ext.token_gap_p90 = Some(0.02);
            c.ext.token_gap_p99 = Some(0.03);
            c.ext.token_gap_max = Some(0.04);
            c
        };
        let mut cell = with_all(100.0);
        add(&mut cell, with_all(110.0), 2);
        assert!(METRICS.iter().all(|k| metric(&cell, k).is_some()));
        let mut bad = with_all(0.0);
        bad.ext.status = CellStatus::Error;
        add(&mut cell, bad, 3);
        for k in METRICS {
            assert_eq!(metric(&cell, k), None, "{k} stays on a failed cell");
        }
        // Each repeat's values and their statistics stay.
        assert_eq!(cell.ext.repeats[1].values["token_gap_p99"], 0.03);
        assert_eq!(cell.ext.repeat_stats["ttft_p99"].n, 2);
    }

    /// A measured repeat whose window requests have these TTFTs and whose
    /// window gaps are 100 of `gap` seconds, with the cell's own statistics.
    fn with_requests(ttfts: &[f64], gap: f64) -> CellResult {
        use crate::cellstats::{LatencyScope, latency_stats};
        use crate::gaps::{GapHistogram, TokenGaps};
        let mut c = measured(100.0, 0.0, 10.0);
        c.request_samples = ttfts
            .iter()
            .map(|&t| crate::result::RequestSample {
                ttft: t,
                ttfo: t,
                output_tokens: 10,
                in_window: true,
                first_token_in_window: true,
                ..crate::result::RequestSample::default()
            })
            .collect();
        c.latency = latency_stats(&c.request_samples, LatencyScope::Window);
        let h = GapHistogram::default();
        h.record(TokenGaps {
            each: gap,
            count: 100,
        });
        let g = h.stats();
        (c.ext.token_gap_p50, c.ext.token_gap_p90) = (g.p50, g.p90);
        (c.ext.token_gap_p99, c.ext.token_gap_max) = (g.p99, g.max);
        c.ext.gap_counts = Some(h.snapshot());
        c
    }

    /// Issue 35: a repeated cell's p99 was the mean of its repeats' p99s,
    /// which is not the p99 of anything. The headline percentiles are those
    /// of every valid repeat's requests (and gaps) together; each repeat's
    /// own values stay in `repeats` and `repeat_stats`.
    #[test]
    fn headline_percentiles_come_from_the_pooled_requests_of_the_valid_repeats() {
        let fast = vec![0.1; 100];
        let mut slow = vec![0.2; 97];
        slow.extend([3.0, 3.0, 3.0]);
        let mut cell = with_requests(&fast, 0.01);
        add(&mut cell, with_requests(&slow, 0.05), 2);
        let all: Vec<f64> = fast.iter().chain(&slow).copied().collect();
        let truth = crate::stats::summarize(all);
        let ttft = cell.latency.ttft.expect("ttft");
        assert_eq!(
            (ttft.p50, ttft.p90, ttft.p99),
            (truth.p50, truth.p90, truth.p99)
        );
        assert_eq!(cell.latency.ttfo.map(|d| d.p99), Some(truth.p99));
        let mean_p99 = cell.ext.repeat_stats["ttft_p99"].mean;
        assert!(
            (ttft.p99 - mean_p99).abs() > 0.1,
            "{} vs mean {mean_p99}",
            ttft.p99
        );
        // Gaps: half at 10 ms, half at 50 ms; the pooled median is the
        // 10 ms bucket (the mean of medians would say 30 ms), the max 50 ms.
        let p50 = cell.ext.token_gap_p50.expect("gap p50");
        assert!((p50 - 0.01).abs() < 0.0002, "{p50}");
        assert!((cell.ext.token_gap_max.expect("max") - 0.05).abs() < 1e-12);
        // Each repeat's own value and the rates' mean stay.
        assert_eq!(cell.ext.repeats[1].values["ttft_p99"], 3.0);
        assert_eq!(cell.aggregate_tps, Some(100.0));
        // The pools travel in the file: read back and settled again, the
        // same numbers.
        let mut back: CellResult =
            serde_json::from_str(&serde_json::to_string(&cell).unwrap()).unwrap();
        settle(&mut back);
        assert_eq!(back.latency.ttft, cell.latency.ttft);
        assert_eq!(back.ext.token_gap_p50, cell.ext.token_gap_p50);
    }

    #[test]
    fn repeats_survive_a_write_and_read_back() {
        let mut cell = measured(100.0, 0.2, 10.0);
        add(&mut cell, measured(90.0, 0.25, 20.0), 2);
        let text = serde_json::to_string(&cell).unwrap();
        let back: CellResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back.ext.repeats, cell.ext.repeats);
        assert_eq!(back.ext.repeat_stats, cell.ext.repeat_stats);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        // A single measurement writes neither key.
        let one = serde_json::to_string(&measured(1.0, 1.0, 1.0)).unwrap();
        assert!(!one.contains("\"repeat"), "{one}");
    }
}
