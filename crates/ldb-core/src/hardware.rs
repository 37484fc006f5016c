//! Hardware telemetry model: per-sample GPU and CPU readings, the summary
//! over a slice of samples (`hardware_summary`, `hardware_run_summary`),
//! energy and throttle verdicts, parsers for `nvidia-smi` and the NVIDIA
//! peer-to-peer (P2P) override check.
//!
//! Everything here is pure: the sampler in `ldb-telemetry` reads the devices
//! and files and hands the text or values in. Timestamps are seconds since the
//! start of the run, measured by the caller.
//!
//! Unknown values are `None`, never `0`: a GPU that reports `N/A` for its
//! power draw does not pull the average power down, it is left out of it.

pub mod p2p;
pub mod smi;
pub mod summary;

pub use p2p::{P2pOverride, check_p2p_override};
pub use summary::{HardwareSummary, Throttle, summarize, summarize_window, tokens_per_joule};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU's readings at one sampling instant. `None` means the source did
/// not report the value (not supported, `N/A`, or unparsable).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Device index as the driver numbers it.
    pub index: u32,
    /// SM ("GPU") utilization over the driver's last sample period, percent.
    pub util_pct: Option<f64>,
    /// Memory-controller utilization, percent.
    pub mem_util_pct: Option<f64>,
    /// VRAM in use, MiB.
    pub vram_used_mb: Option<f64>,
    /// VRAM installed, MiB.
    pub vram_total_mb: Option<f64>,
    /// Board power draw, watts.
    pub power_w: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit_w: Option<f64>,
    /// GPU core temperature, °C.
    pub temp_c: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<f64>,
    /// PCIe receive throughput (host → device), MB/s.
    pub pcie_rx_mb_s: Option<f64>,
    /// PCIe transmit throughput (device → host), MB/s.
    pub pcie_tx_mb_s: Option<f64>,
    /// Current PCIe link generation.
    pub pcie_gen: Option<u32>,
    /// Current PCIe link width (lanes).
    pub pcie_width: Option<u32>,
    /// Active clock-throttle reasons; `None` when the source cannot tell.
    pub throttle_reasons: Option<Vec<ThrottleReason>>,
}

/// Host CPU readings at one sampling instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    /// Whole-machine CPU utilization since the previous sample, percent.
    pub util_pct: Option<f64>,
    /// Mean current core frequency, MHz.
    pub freq_mhz: Option<f64>,
    /// Package / die temperatures by normalized label (`CPU0`, `TCTL`, …), °C.
    pub temps_c: BTreeMap<String, f64>,
}

impl CpuSample {
    /// Hottest CPU package temperature, if any was read.
    pub fn temp_max_c(&self) -> Option<f64> {
        max_of(self.temps_c.values().copied())
    }
}

/// Everything read at one sampling instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HardwareSnapshot {
    /// Seconds since the start of the run (caller's monotonic clock).
    pub t_s: f64,
    /// One entry per GPU sampled (empty when GPU telemetry is off).
    pub gpus: Vec<GpuSample>,
    /// Host CPU readings.
    pub cpu: CpuSample,
}

impl HardwareSnapshot {
    /// Number of GPUs in this snapshot.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
    /// Mean SM utilization over GPUs that reported it.
    pub fn gpu_util_avg(&self) -> Option<f64> {
        mean_of(self.gpus.iter().filter_map(|g| g.util_pct))
    }
    /// Highest SM utilization of any GPU.
    pub fn gpu_util_max(&self) -> Option<f64> {
        max_of(self.gpus.iter().filter_map(|g| g.util_pct))
    }
    /// Mean memory-controller utilization.
    pub fn mem_util_avg(&self) -> Option<f64> {
        mean_of(self.gpus.iter().filter_map(|g| g.mem_util_pct))
    }
    /// Highest memory-controller utilization.
    pub fn mem_util_max(&self) -> Option<f64> {
        max_of(self.gpus.iter().filter_map(|g| g.mem_util_pct))
    }
    /// Mean GPU temperature.
    pub fn temp_avg(&self) -> Option<f64> {
        mean_of(self.gpus.iter().filter_map(|g| g.temp_c))
    }
    /// Hottest GPU.
    pub fn temp_max(&self) -> Option<f64> {
        max_of(self.gpus.iter().filter_map(|g| g.temp_c))
    }
    /// Sum of power draw over GPUs that reported it, watts.
    pub fn power_total(&self) -> Option<f64> {
        sum_of(self.gpus.iter().filter_map(|g| g.power_w))
    }
    /// Sum of positive power limits, watts.
    pub fn power_limit_total(&self) -> Option<f64> {
        sum_of(
            self.gpus
                .iter()
                .filter_map(|g| g.power_limit_w)
                .filter(|w| *w > 0.0),
        )
    }
    /// Sum of VRAM in use, MiB.
    pub fn vram_used(&self) -> Option<f64> {
        sum_of(self.gpus.iter().filter_map(|g| g.vram_used_mb))
    }
    /// Sum of VRAM installed, MiB.
    pub fn vram_total(&self) -> Option<f64> {
        sum_of(self.gpus.iter().filter_map(|g| g.vram_total_mb))
    }
    /// VRAM in use as a percentage of installed VRAM (over GPUs reporting both).
    pub fn vram_used_pct(&self) -> Option<f64> {
        let both = || {
            self.gpus
                .iter()
                .filter_map(|g| Some((g.vram_used_mb?, g.vram_total_mb?)))
        };
        let total: f64 = both().map(|(_, t)| t).sum();
        (total > 0.0).then(|| 100.0 * both().map(|(u, _)| u).sum::<f64>() / total)
    }
    /// Sum of PCIe receive throughput, MB/s.
    pub fn pcie_rx_total(&self) -> Option<f64> {
        sum_of(self.gpus.iter().filter_map(|g| g.pcie_rx_mb_s))
    }
    /// Sum of PCIe transmit throughput, MB/s.
    pub fn pcie_tx_total(&self) -> Option<f64> {
        sum_of(self.gpus.iter().filter_map(|g| g.pcie_tx_mb_s))
    }
    /// Mean SM clock, MHz.
    pub fn sm_clock_avg(&self) -> Option<f64> {
        mean_of(self.gpus.iter().filter_map(|g| g.sm_clock_mhz))
    }
    /// Mean memory clock, MHz.
    pub fn mem_clock_avg(&self) -> Option<f64> {
        mean_of(self.gpus.iter().filter_map(|g| g.mem_clock_mhz))
    }
}

/// Why the driver is holding clocks below their maximum. Names follow the
/// NVML clock-event reasons; bit values are those of
/// `nvmlDeviceGetCurrentClocksEventReasons` (and of `nvidia-smi`'s
/// `clocks_throttle_reasons.active` bitmask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    /// Nothing runs on the GPU (not a throttle).
    GpuIdle,
    /// Clocks limited by the applications-clocks setting.
    ApplicationsClocksSetting,
    /// Software power cap (power limit reached).
    SwPowerCap,
    /// Hardware slowdown (thermal or power-brake signal from the board).
    HwSlowdown,
    /// Sync boost with other GPUs.
    SyncBoost,
    /// Software thermal slowdown.
    SwThermalSlowdown,
    /// Hardware thermal slowdown.
    HwThermalSlowdown,
    /// External power-brake assertion.
    HwPowerBrakeSlowdown,
    /// Clocks limited by the display-clock setting.
    DisplayClockSetting,
}

impl ThrottleReason {
    /// All reasons with their NVML bit.
    pub const BITS: [(ThrottleReason, u64); 9] = [
        (Self::GpuIdle, 0x1),
        (Self::ApplicationsClocksSetting, 0x2),
        (Self::SwPowerCap, 0x4),
        (Self::HwSlowdown, 0x8),
        (Self::SyncBoost, 0x10),
        (Self::SwThermalSlowdown, 0x20),
        (Self::HwThermalSlowdown, 0x40),
        (Self::HwPowerBrakeSlowdown, 0x80),
        (Self::DisplayClockSetting, 0x100),
    ];

    /// Decodes an NVML bitmask; unknown bits are ignored.
    pub fn from_bits(bits: u64) -> Vec<ThrottleReason> {
        Self::BITS
            .iter()
            .filter(|(_, b)| bits & b != 0)
            .map(|(r, _)| *r)
            .collect()
    }

    /// Verdict category of this reason (`None` for idle, which is no throttle).
    pub fn category(self) -> Option<Throttle> {
        match self {
            Self::GpuIdle => None,
            Self::SwPowerCap | Self::HwPowerBrakeSlowdown => Some(Throttle::Power),
            Self::SwThermalSlowdown | Self::HwThermalSlowdown => Some(Throttle::Thermal),
            Self::ApplicationsClocksSetting
            | Self::HwSlowdown
            | Self::SyncBoost
            | Self::DisplayClockSetting => Some(Throttle::Other),
        }
    }

    /// snake_case name as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GpuIdle => "gpu_idle",
            Self::ApplicationsClocksSetting => "applications_clocks_setting",
            Self::SwPowerCap => "sw_power_cap",
            Self::HwSlowdown => "hw_slowdown",
            Self::SyncBoost => "sync_boost",
            Self::SwThermalSlowdown => "sw_thermal_slowdown",
            Self::HwThermalSlowdown => "hw_thermal_slowdown",
            Self::HwPowerBrakeSlowdown => "hw_power_brake_slowdown",
            Self::DisplayClockSetting => "display_clock_setting",
        }
    }
}

pub(crate) fn sum_of(it: impl Iterator<Item = f64>) -> Option<f64> {
    it.fold(None, |acc, v| Some(acc.unwrap_or(0.0) + v))
}

pub(crate) fn mean_of(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = it.fold((0usize, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| s / n as f64)
}

pub(crate) fn max_of(it: impl Iterator<Item = f64>) -> Option<f64> {
    it.fold(None, |acc: Option<f64>, v| {
        Some(acc.map_or(v, |a| a.max(v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, util: Option<f64>, power: Option<f64>) -> GpuSample {
        GpuSample {
            index,
            util_pct: util,
            power_w: power,
            vram_used_mb: Some(1000.0),
            vram_total_mb: Some(4000.0),
            ..GpuSample::default()
        }
    }

    #[test]
    fn snapshot_aggregates_skip_unknown_values() {
        let s = HardwareSnapshot {
            t_s: 0.0,
            gpus: vec![
                gpu(0, Some(50.0), Some(100.0)),
                gpu(1, None, None),
                gpu(2, Some(100.0), Some(200.0)),
            ],
            cpu: CpuSample::default(),
        };
        assert_eq!(s.gpu_util_avg(), Some(75.0));
        assert_eq!(s.gpu_util_max(), Some(100.0));
        assert_eq!(s.power_total(), Some(300.0));
        assert_eq!(s.vram_used_pct(), Some(25.0));
        assert_eq!(s.temp_avg(), None);
        assert_eq!(s.pcie_rx_total(), None);
    }

    #[test]
    fn throttle_bits_decode() {
        let r = ThrottleReason::from_bits(0x4 | 0x40 | 0x1000);
        assert_eq!(
            r,
            vec![
                ThrottleReason::SwPowerCap,
                ThrottleReason::HwThermalSlowdown
            ]
        );
        assert_eq!(ThrottleReason::GpuIdle.category(), None);
        assert_eq!(
            ThrottleReason::HwPowerBrakeSlowdown.category(),
            Some(Throttle::Power)
        );
    }
}
