//! NVML source. `nvml-wrapper` loads `libnvidia-ml` with `dlopen` when
//! [`NvmlSource::open`] runs, so the binary starts on machines without
//! NVIDIA libraries; there `open` returns an error and the monitor falls back.

use crate::error::TelemetryError;
use ldb_core::hardware::smi::GpuInventory;
use ldb_core::hardware::{GpuSample, ThrottleReason};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use std::ffi::OsStr;
use std::path::Path;

/// Libraries tried when no path is configured: the loader's search path
/// first (many installs ship only the versioned name), then the usual
/// driver locations, which containers do not always put on that path.
const LIB_CANDIDATES: [&str; 5] = [
    "libnvidia-ml.so",
    "libnvidia-ml.so.1",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
];
const MIB: f64 = 1024.0 * 1024.0;

/// Samples GPUs through NVML.
pub struct NvmlSource {
    nvml: Nvml,
    count: u32,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource")
            .field("count", &self.count)
            .finish()
    }
}

impl NvmlSource {
    /// Loads and initializes NVML and counts the GPUs; fails when the
    /// library is missing, the driver is not loaded, or there is no GPU.
    pub fn open(lib: Option<&Path>) -> Result<Self, TelemetryError> {
        let candidates: Vec<&OsStr> = match lib {
            Some(p) => vec![p.as_os_str()],
            None => LIB_CANDIDATES.iter().map(OsStr::new).collect(),
        };
        let mut errors = Vec::new();
        for name in candidates {
            match Nvml::builder().lib_path(name).init() {
                Ok(nvml) => {
                    let count = nvml
                        .device_count()
                        .map_err(|e| TelemetryError::Nvml(e.to_string()))?;
                    if count == 0 {
                        return Err(TelemetryError::Nvml("no GPU found".to_string()));
                    }
                    return Ok(NvmlSource { nvml, count });
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        let tried = errors.len();
        let first = errors.into_iter().next().unwrap_or_default();
        Err(TelemetryError::Nvml(match tried {
            0 | 1 => first,
            n => format!("{first} (and {} other locations)", n - 1),
        }))
    }

    /// Number of GPUs NVML reports.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// One sample of every GPU. A GPU that cannot be opened is skipped; a
    /// value a GPU does not support is `None`.
    ///
    /// Each GPU is read on a thread of its own: NVML measures PCIe
    /// throughput over a 20 ms window per call, so one GPU's sample takes
    /// about 45 ms (measured on an H200, docs/telemetry.md), and reading
    /// eight GPUs one after another would take most of a 0.5 s interval
    /// and spread one sample's readings over 360 ms.
    pub fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let nvml = &self.nvml;
        let results: Vec<Result<GpuSample, String>> = std::thread::scope(|scope| {
            let pending: Vec<_> = (0..self.count)
                .map(|index| {
                    std::thread::Builder::new()
                        .name(format!("nvml-gpu{index}"))
                        .spawn_scoped(scope, move || sample_one(nvml, index))
                        .map_err(|_| index)
                })
                .collect();
            pending
                .into_iter()
                .map(|p| match p {
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|_| Err("GPU sampling thread panicked".to_string())),
                    // no thread to be had: read this GPU here instead
                    Err(index) => sample_one(nvml, index),
                })
                .collect()
        });
        let mut out = Vec::with_capacity(results.len());
        let mut last_error = None;
        for r in results {
            match r {
                Ok(sample) => out.push(sample),
                Err(e) => last_error = Some(e),
            }
        }
        match (out.is_empty(), last_error) {
            (true, Some(e)) => Err(TelemetryError::Nvml(e)),
            _ => Ok(out),
        }
    }

    /// Static description of every GPU.
    pub fn inventory(&self) -> Vec<GpuInventory> {
        let driver = self.nvml.sys_driver_version().unwrap_or_default();
        (0..self.count)
            .filter_map(|index| {
                let d = self.nvml.device_by_index(index).ok()?;
                Some(GpuInventory {
                    index,
                    name: d.name().unwrap_or_default(),
                    driver_version: driver.clone(),
                    pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                    pcie_gen: d.current_pcie_link_gen().ok(),
                    pcie_width: d.current_pcie_link_width().ok(),
                    power_limit_w: d
                        .enforced_power_limit()
                        .ok()
                        .map(|mw| f64::from(mw) / 1000.0),
                })
            })
            .collect()
    }
}

/// Reads one GPU; `Err` when NVML cannot open it.
fn sample_one(nvml: &Nvml, index: u32) -> Result<GpuSample, String> {
    let d = nvml.device_by_index(index).map_err(|e| e.to_string())?;
    let util = d.utilization_rates().ok();
    let mem = d.memory_info().ok();
    let kb_s = |c| d.pcie_throughput(c).ok().map(|v| f64::from(v) / 1024.0);
    Ok(GpuSample {
        index,
        util_pct: util.as_ref().map(|u| f64::from(u.gpu)),
        mem_util_pct: util.as_ref().map(|u| f64::from(u.memory)),
        vram_used_mb: mem.as_ref().map(|m| m.used as f64 / MIB),
        vram_total_mb: mem.as_ref().map(|m| m.total as f64 / MIB),
        power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
        power_limit_w: d
            .enforced_power_limit()
            .ok()
            .map(|mw| f64::from(mw) / 1000.0),
        temp_c: d.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
        sm_clock_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
        mem_clock_mhz: d.clock_info(Clock::Memory).ok().map(f64::from),
        pcie_rx_mb_s: kb_s(PcieUtilCounter::Receive),
        pcie_tx_mb_s: kb_s(PcieUtilCounter::Send),
        pcie_gen: d.current_pcie_link_gen().ok(),
        pcie_width: d.current_pcie_link_width().ok(),
        throttle_reasons: d
            .current_throttle_reasons()
            .ok()
            .map(|r| ThrottleReason::from_bits(r.bits())),
    })
}
