//! Summary of a slice of hardware snapshots: the `hardware_summary` object
//! attached to each measured cell and prefill row, and `hardware_run_summary`.
//!
//! Keys and meanings follow the reference tool (surfaces.md §6.3), plus
//! `energy_joules`, `energy_window_seconds`, `sm_clock_avg_mhz`,
//! `mem_clock_avg_mhz`, `throttle` and `throttle_reasons`.
//!
//! Only snapshots with at least one GPU count. An empty summary (no such
//! snapshot) serializes as `{}`. In a non-empty summary every key is present;
//! a value no sample reported is `null` (the reference wrote `0` for `N/A`,
//! which pulled averages down).

use super::{HardwareSnapshot, ThrottleReason, max_of, mean_of};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;

/// Throttle verdict over a slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Throttle {
    /// Throttle reasons were read and none (other than idle) was active.
    None,
    /// Power cap or power brake was the most frequent active reason.
    Power,
    /// Thermal slowdown was the most frequent active reason.
    Thermal,
    /// Another reason (HW slowdown, sync boost, clock settings) dominated.
    Other,
    /// No sample carried throttle information.
    #[default]
    Unknown,
}

/// Summary over a slice of snapshots. See the module docs for the
/// serialization rules; all means are over snapshots, where each snapshot
/// first aggregates its GPUs (mean for utilization/temperature/clocks, sum
/// for power/VRAM/PCIe).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default)]
pub struct HardwareSummary {
    /// Snapshots with at least one GPU in the slice; 0 means empty.
    pub samples: u64,
    /// Last minus first snapshot time, seconds (3 dp).
    pub duration_seconds: f64,
    /// Most GPUs seen in one snapshot.
    pub gpu_count: u64,
    /// Mean host CPU utilization, percent.
    pub cpu_util_avg_pct: Option<f64>,
    /// Hottest CPU package temperature seen, °C.
    pub cpu_temp_max_c: Option<f64>,
    /// Mean of per-snapshot mean SM utilization, percent.
    pub gpu_util_avg_pct: Option<f64>,
    /// Highest SM utilization of any GPU, percent.
    pub gpu_util_max_pct: Option<f64>,
    /// Mean of per-snapshot mean memory-controller utilization, percent.
    pub mem_util_avg_pct: Option<f64>,
    /// Highest memory-controller utilization, percent.
    pub mem_util_max_pct: Option<f64>,
    /// Mean of per-snapshot mean GPU temperature, °C.
    pub temp_avg_c: Option<f64>,
    /// Hottest GPU temperature seen, °C.
    pub temp_max_c: Option<f64>,
    /// Mean total (all-GPU) power draw, W.
    pub power_total_avg_w: Option<f64>,
    /// Highest total power draw, W.
    pub power_total_max_w: Option<f64>,
    /// Highest sum of positive power limits, W.
    pub power_limit_total_w: Option<f64>,
    /// Mean total VRAM in use, MiB.
    pub vram_used_avg_mb: Option<f64>,
    /// Highest total VRAM in use, MiB.
    pub vram_used_max_mb: Option<f64>,
    /// Highest total installed VRAM, MiB.
    pub vram_total_mb: Option<f64>,
    /// Mean of per-snapshot used/total VRAM, percent.
    pub vram_used_avg_pct: Option<f64>,
    /// Highest per-snapshot used/total VRAM, percent.
    pub vram_used_max_pct: Option<f64>,
    /// Mean total PCIe receive throughput, MB/s.
    pub pcie_rx_avg_mb_s: Option<f64>,
    /// Highest total PCIe receive throughput, MB/s.
    pub pcie_rx_max_mb_s: Option<f64>,
    /// Mean total PCIe transmit throughput, MB/s.
    pub pcie_tx_avg_mb_s: Option<f64>,
    /// Highest total PCIe transmit throughput, MB/s.
    pub pcie_tx_max_mb_s: Option<f64>,
    /// GPU energy over the energy window, J: integral of the total power,
    /// linear between snapshots and held constant before the first and after
    /// the last snapshot when the window is wider than the samples.
    pub energy_joules: Option<f64>,
    /// Length of the span `energy_joules` covers, seconds.
    pub energy_window_seconds: Option<f64>,
    /// Mean of per-snapshot mean SM clock, MHz.
    pub sm_clock_avg_mhz: Option<f64>,
    /// Mean of per-snapshot mean memory clock, MHz.
    pub mem_clock_avg_mhz: Option<f64>,
    /// Throttle verdict: the category active in the most snapshots.
    pub throttle: Throttle,
    /// Every active reason seen in the slice (sorted, idle excluded).
    pub throttle_reasons: Vec<ThrottleReason>,
}

impl HardwareSummary {
    /// True when no snapshot with GPUs fell in the slice.
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }
}

impl Serialize for HardwareSummary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_empty() {
            serializer.serialize_map(Some(0))?.end()
        } else {
            HardwareSummary::serialize(self, serializer)
        }
    }
}

impl<'de> Deserialize<'de> for HardwareSummary {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        HardwareSummary::deserialize(deserializer)
    }
}

/// Summarizes `samples`; energy covers the span from the first to the last
/// snapshot with a known power total.
pub fn summarize(samples: &[HardwareSnapshot]) -> HardwareSummary {
    summarize_window(samples, None)
}

/// Like [`summarize`], but integrates energy over `window` = (start, end)
/// seconds, so that a cell's energy matches the cell's measurement window
/// even though the sampler ticks only every couple of seconds.
pub fn summarize_window(
    samples: &[HardwareSnapshot],
    window: Option<(f64, f64)>,
) -> HardwareSummary {
    let s: Vec<&HardwareSnapshot> = samples.iter().filter(|x| x.gpu_count() > 0).collect();
    let (Some(first), Some(last)) = (s.first(), s.last()) else {
        return HardwareSummary::default();
    };
    let avg =
        |f: &dyn Fn(&HardwareSnapshot) -> Option<f64>| r2(mean_of(s.iter().filter_map(|x| f(x))));
    let max =
        |f: &dyn Fn(&HardwareSnapshot) -> Option<f64>| r2(max_of(s.iter().filter_map(|x| f(x))));
    let mut power: Vec<(f64, f64)> = s
        .iter()
        .filter_map(|x| Some((x.t_s, x.power_total()?)))
        .filter(|(t, p)| t.is_finite() && p.is_finite())
        .collect();
    power.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (energy, span) = match energy(&power, window) {
        Some((e, w)) => (r2(Some(e)), round_to(Some(w), 3)),
        None => (None, None),
    };
    let (throttle, throttle_reasons) = throttle_verdict(&s);
    HardwareSummary {
        samples: s.len() as u64,
        duration_seconds: round_to(Some(last.t_s - first.t_s), 3).unwrap_or(0.0),
        gpu_count: s.iter().map(|x| x.gpu_count() as u64).max().unwrap_or(0),
        cpu_util_avg_pct: avg(&|x| x.cpu.util_pct),
        cpu_temp_max_c: max(&|x| x.cpu.temp_max_c()),
        gpu_util_avg_pct: avg(&|x| x.gpu_util_avg()),
        gpu_util_max_pct: max(&|x| x.gpu_util_max()),
        mem_util_avg_pct: avg(&|x| x.mem_util_avg()),
        mem_util_max_pct: max(&|x| x.mem_util_max()),
        temp_avg_c: avg(&|x| x.temp_avg()),
        temp_max_c: max(&|x| x.temp_max()),
        power_total_avg_w: avg(&|x| x.power_total()),
        power_total_max_w: max(&|x| x.power_total()),
        power_limit_total_w: max(&|x| x.power_limit_total()),
        vram_used_avg_mb: avg(&|x| x.vram_used()),
        vram_used_max_mb: max(&|x| x.vram_used()),
        vram_total_mb: max(&|x| x.vram_total()),
        vram_used_avg_pct: avg(&|x| x.vram_used_pct()),
        vram_used_max_pct: max(&|x| x.vram_used_pct()),
        pcie_rx_avg_mb_s: avg(&|x| x.pcie_rx_total()),
        pcie_rx_max_mb_s: max(&|x| x.pcie_rx_total()),
        pcie_tx_avg_mb_s: avg(&|x| x.pcie_tx_total()),
        pcie_tx_max_mb_s: max(&|x| x.pcie_tx_total()),
        energy_joules: energy,
        energy_window_seconds: span,
        sm_clock_avg_mhz: avg(&|x| x.sm_clock_avg()),
        mem_clock_avg_mhz: avg(&|x| x.mem_clock_avg()),
        throttle,
        throttle_reasons,
    }
}

/// Output tokens per joule of GPU energy: `tokens / energy_joules`. `None`
/// when the summary has no positive energy. Count the tokens over the same
/// window the summary's energy covers (the cell's measurement window).
pub fn tokens_per_joule(tokens: f64, summary: &HardwareSummary) -> Option<f64> {
    let e = summary
        .energy_joules
        .filter(|e| *e > 0.0 && e.is_finite())?;
    (tokens.is_finite() && tokens >= 0.0).then(|| tokens / e)
}

/// Integral of a piecewise-linear power curve (finite, sorted by time). Returns
/// (joules, seconds covered). Without a window: first to last point, which
/// needs two points. With a window: the curve is held flat outside the points.
fn energy(points: &[(f64, f64)], window: Option<(f64, f64)>) -> Option<(f64, f64)> {
    let (first, last) = (points.first()?, points.last()?);
    let (a, b) = match window {
        Some((a, b)) if b > a && a.is_finite() && b.is_finite() => (a, b),
        Some(_) => return None,
        None if last.0 > first.0 => (first.0, last.0),
        None => return None,
    };
    let power_at = |t: f64| -> f64 {
        if t <= first.0 {
            return first.1;
        }
        if t >= last.0 {
            return last.1;
        }
        let i = points
            .partition_point(|p| p.0 <= t)
            .clamp(1, points.len() - 1);
        let (p0, p1) = (points[i - 1], points[i]);
        if p1.0 <= p0.0 {
            return p1.1;
        }
        p0.1 + (p1.1 - p0.1) * (t - p0.0) / (p1.0 - p0.0)
    };
    let mut knots = vec![a];
    knots.extend(points.iter().map(|p| p.0).filter(|t| *t > a && *t < b));
    knots.push(b);
    let joules = knots
        .windows(2)
        .map(|w| 0.5 * (power_at(w[0]) + power_at(w[1])) * (w[1] - w[0]))
        .sum();
    Some((joules, b - a))
}

fn throttle_verdict(s: &[&HardwareSnapshot]) -> (Throttle, Vec<ThrottleReason>) {
    let mut informed = false;
    let mut counts = [0usize; 3]; // thermal, power, other
    let mut seen = BTreeSet::new();
    for snap in s {
        let mut active = [false; 3];
        for reasons in snap.gpus.iter().filter_map(|g| g.throttle_reasons.as_ref()) {
            informed = true;
            for r in reasons {
                let slot = match r.category() {
                    Some(Throttle::Thermal) => 0,
                    Some(Throttle::Power) => 1,
                    Some(_) => 2,
                    None => continue,
                };
                active[slot] = true;
                seen.insert(*r);
            }
        }
        for (c, a) in counts.iter_mut().zip(active) {
            *c += usize::from(a);
        }
    }
    let verdict = if !informed {
        Throttle::Unknown
    } else {
        // Ties go to the first: thermal, then power, then other.
        let best = (0..3).fold(0, |b, i| if counts[i] > counts[b] { i } else { b });
        match (counts[best], best) {
            (0, _) => Throttle::None,
            (_, 0) => Throttle::Thermal,
            (_, 1) => Throttle::Power,
            _ => Throttle::Other,
        }
    };
    (verdict, seen.into_iter().collect())
}

fn r2(v: Option<f64>) -> Option<f64> {
    round_to(v, 2)
}

fn round_to(v: Option<f64>, dp: i32) -> Option<f64> {
    let f = 10f64.powi(dp);
    v.filter(|x| x.is_finite()).map(|x| (x * f).round() / f)
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
