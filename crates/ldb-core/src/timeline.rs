//! A cell's seconds (docs/methodology.md, "Per-second timelines"): the
//! client's output tokens by the second they arrived in, the server's
//! scheduler and KV gauges at each scrape the run made anyway, and the GPU
//! samples the hardware monitor took anyway. Offsets are seconds from the
//! cell's origin, the moment its streams were launched (after the scout),
//! so ramp-up and window sit on one axis and the window's edges are marked.
//!
//! The client series is binned on a grid anchored on the window's start:
//! whole seconds of the window are whole bins, so the window's bins add up
//! to the window's token count and divide by the window's seconds into the
//! cell's rate; ramp-up seconds lie before them on the same grid.

use crate::hardware::HardwareSnapshot;
use crate::result::round;
use serde::{Deserialize, Serialize};

mod counter;
#[cfg(test)]
mod tests;

pub use counter::{RAMP_STEP_S, TimelineCounter, TimelineCounts};

/// One cell's timeline (`timeline` of a cell).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CellTimeline {
    /// Origin → window start, seconds (the ramp-up).
    pub window_start_s: f64,
    /// Origin → window end, seconds.
    pub window_end_s: f64,
    /// Leading entries of `client_tokens` that lie before the window start.
    pub client_ramp_bins: u32,
    /// Output tokens by arrival second: entry `i` covers
    /// `[window_start_s + i − client_ramp_bins, +1 s)`; the last window
    /// entry may be shorter (it ends at `window_end_s`).
    pub client_tokens: Vec<u64>,
    /// The server's gauges at each scrape (absent without `/metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSeries>,
    /// The GPU samples (absent without GPU telemetry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSeries>,
}

/// Parallel arrays, one entry per scrape (`null` where the server does not
/// export that gauge).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSeries {
    /// When the server read its gauges (middle of the scrape's round trip),
    /// seconds from the origin.
    pub t_s: Vec<f64>,
    /// Requests running.
    pub running: Vec<Option<f64>>,
    /// Requests waiting.
    pub waiting: Vec<Option<f64>>,
    /// KV-cache usage, 0–1.
    pub kv_usage: Vec<Option<f64>>,
}

/// Parallel arrays, one entry per hardware sample (`null` where no GPU
/// reported the reading); all GPUs together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuSeries {
    /// Sample time, seconds from the origin.
    pub t_s: Vec<f64>,
    /// Board power of all GPUs, watts.
    pub power_w: Vec<Option<f64>>,
    /// Mean SM utilisation over the GPUs, percent.
    pub util_pct: Vec<Option<f64>>,
    /// PCIe receive (host → device) of all GPUs, MB/s.
    pub pcie_rx_mb_s: Vec<Option<f64>>,
    /// PCIe transmit (device → host) of all GPUs, MB/s.
    pub pcie_tx_mb_s: Vec<Option<f64>>,
}

/// One scrape's gauges, at run-clock time `t`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerPoint {
    /// When the server read them (run clock).
    pub t: f64,
    /// Requests running.
    pub running: Option<f64>,
    /// Requests waiting.
    pub waiting: Option<f64>,
    /// KV usage fraction.
    pub kv_usage: Option<f64>,
}

impl CellTimeline {
    /// Tokens of the window's bins (the entries from `client_ramp_bins` on).
    pub fn window_tokens(&self) -> u64 {
        // Saturating: a result file from elsewhere may hold any count.
        self.client_tokens
            .iter()
            .skip(self.client_ramp_bins as usize)
            .fold(0, |a: u64, &n| a.saturating_add(n))
    }

    /// Start of entry `i` of `client_tokens`, seconds from the origin.
    pub fn bin_start_s(&self, i: usize) -> f64 {
        self.window_start_s + i as f64 - f64::from(self.client_ramp_bins)
    }
}

/// The window-anchored second a time falls in: `⌊t − ws⌋` (negative before
/// the window). A token at exactly `ws + k` opens second `k`.
pub fn second_of(t: f64, ws: f64) -> i64 {
    (t - ws).floor() as i64
}

/// The timeline from the counts (`counter.rs`), the window `[ws, we]` and
/// the scrapes' and GPU samples' points, all times on the run clock (points
/// before the origin are left out, and GPU samples after the window);
/// `gpu_clock_offset` turns the monitor's times into run-clock times.
pub fn build(
    counts: &TimelineCounts,
    (ws, we): (f64, f64),
    scrapes: &[ServerPoint],
    gpu: &[HardwareSnapshot],
    gpu_clock_offset: f64,
) -> CellTimeline {
    let origin = counts.origin;
    let (client_ramp_bins, client_tokens) = client_series(counts, ws, we);
    let at = |t: f64| round(t - origin, 2);
    let in_cell = |t: f64| t >= origin && t <= we;
    // The end scrape is read just after the window's close: kept, as every
    // scrape of the cell is (the caller passes no scrape from after it).
    let mut pts: Vec<&ServerPoint> = scrapes.iter().filter(|p| p.t >= origin).collect();
    pts.sort_by(|a, b| a.t.total_cmp(&b.t));
    pts.dedup_by(|a, b| a.t == b.t);
    let server = (!pts.is_empty()).then(|| ServerSeries {
        t_s: pts.iter().map(|p| at(p.t)).collect(),
        running: pts.iter().map(|p| r(p.running, 1)).collect(),
        waiting: pts.iter().map(|p| r(p.waiting, 1)).collect(),
        kv_usage: pts.iter().map(|p| r(p.kv_usage, 3)).collect(),
    });
    let snaps: Vec<&HardwareSnapshot> = gpu
        .iter()
        .filter(|s| !s.gpus.is_empty() && in_cell(s.t_s + gpu_clock_offset))
        .collect();
    let sum = |s: &HardwareSnapshot, f: fn(&crate::hardware::GpuSample) -> Option<f64>| {
        let v: Vec<f64> = s.gpus.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    let gpu = (!snaps.is_empty()).then(|| GpuSeries {
        t_s: snaps.iter().map(|s| at(s.t_s + gpu_clock_offset)).collect(),
        power_w: snaps.iter().map(|s| r(sum(s, |g| g.power_w), 1)).collect(),
        util_pct: snaps.iter().map(|s| r(s.gpu_util_avg(), 1)).collect(),
        pcie_rx_mb_s: snaps
            .iter()
            .map(|s| r(sum(s, |g| g.pcie_rx_mb_s), 1))
            .collect(),
        pcie_tx_mb_s: snaps
            .iter()
            .map(|s| r(sum(s, |g| g.pcie_tx_mb_s), 1))
            .collect(),
    });
    CellTimeline {
        window_start_s: round(ws - origin, 3),
        window_end_s: round(we - origin, 3),
        client_ramp_bins,
        client_tokens,
        server,
        gpu,
    }
}

fn r(v: Option<f64>, dp: i32) -> Option<f64> {
    v.filter(|x| x.is_finite()).map(|x| round(x, dp))
}

/// The client series on the window-anchored grid: the ramp-up's fine bins
/// folded into whole seconds before `ws` (each fine bin goes to the second
/// its middle falls in, never past the window start), then the window's
/// seconds, `⌈we − ws⌉` of them (a token counted at exactly `we` belongs to
/// the last). Returns (ramp-up bins, series).
pub fn client_series(counts: &TimelineCounts, ws: f64, we: f64) -> (u32, Vec<u64>) {
    let ramp_secs = (ws - counts.origin - 1e-9).ceil().max(0.0) as usize;
    let mut out = vec![0u64; ramp_secs];
    for (j, &n) in counts.ramp.iter().enumerate() {
        // A bin that starts at or after the window start holds tokens a
        // stream read in the instant before it saw the window open; the
        // window counts those itself (`ldb_core::window`, pending tokens).
        let start = counts.origin + j as f64 * RAMP_STEP_S;
        if n == 0 || ramp_secs == 0 || start >= ws {
            continue;
        }
        let mid = start + 0.5 * RAMP_STEP_S;
        let k = second_of(mid.min(ws - 1e-9), ws).max(-(ramp_secs as i64));
        out[(ramp_secs as i64 + k) as usize] += n;
    }
    let window_secs = ((we - ws - 1e-9).ceil().max(1.0)) as usize;
    let mut win = vec![0u64; window_secs];
    for (k, &n) in counts.window.iter().enumerate() {
        win[k.min(window_secs - 1)] += n;
    }
    out.extend(win);
    (ramp_secs as u32, out)
}
