//! GPU sources: NVML (preferred), `nvidia-smi` (fallback), or none.

pub mod nvml;
pub mod smi;

use crate::error::TelemetryError;
use ldb_core::hardware::GpuSample;
use ldb_core::hardware::smi::GpuInventory;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

pub use nvml::NvmlSource;
pub use smi::SmiSource;

/// Which GPU source to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// NVML, else `nvidia-smi`, else none.
    #[default]
    Auto,
    /// NVML only.
    Nvml,
    /// `nvidia-smi` only.
    NvidiaSmi,
    /// No GPU telemetry (CPU is still sampled).
    Disabled,
}

/// Where to find the GPU tools; every field has a working default and exists
/// so that tests can point at fakes.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuConfig {
    /// Source selection.
    pub backend: BackendChoice,
    /// `nvidia-smi` program (default `nvidia-smi`, looked up on `PATH`).
    pub nvidia_smi: PathBuf,
    /// NVML library to load; `None` tries `libnvidia-ml.so` then
    /// `libnvidia-ml.so.1`.
    pub nvml_lib: Option<PathBuf>,
    /// Limit for each `nvidia-smi --query-gpu` call.
    pub query_timeout: Duration,
    /// Limit for each `nvidia-smi dmon` call (it samples for about a second).
    pub dmon_timeout: Duration,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            nvidia_smi: PathBuf::from("nvidia-smi"),
            nvml_lib: None,
            query_timeout: Duration::from_secs(3),
            dmon_timeout: Duration::from_secs(4),
        }
    }
}

/// An opened GPU source.
pub enum GpuSource {
    /// NVML through `nvml-wrapper` (library loaded at run time).
    Nvml(Box<NvmlSource>),
    /// `nvidia-smi` commands.
    Smi(SmiSource),
    /// Nothing usable.
    None,
}

impl GpuSource {
    /// Opens the source `cfg` asks for. On failure returns [`GpuSource::None`]
    /// and a warning naming every reason. Bounded by NVML init plus one
    /// `nvidia-smi` query timeout.
    pub fn open(cfg: &GpuConfig) -> (GpuSource, Option<String>) {
        let mut reasons = Vec::new();
        if matches!(cfg.backend, BackendChoice::Disabled) {
            return (GpuSource::None, None);
        }
        if matches!(cfg.backend, BackendChoice::Auto | BackendChoice::Nvml) {
            match NvmlSource::open(cfg.nvml_lib.as_deref()) {
                Ok(s) => return (GpuSource::Nvml(Box::new(s)), None),
                Err(e) => reasons.push(e.to_string()),
            }
        }
        if matches!(cfg.backend, BackendChoice::Auto | BackendChoice::NvidiaSmi) {
            match SmiSource::open(cfg) {
                Ok(s) => return (GpuSource::Smi(s), None),
                Err(e) => reasons.push(format!("nvidia-smi unavailable: {e}")),
            }
        }
        let warning = format!("GPU telemetry off: {}", reasons.join("; "));
        (GpuSource::None, Some(warning))
    }

    /// `"nvml"`, `"nvidia-smi"` or `"none"`.
    pub fn name(&self) -> &'static str {
        match self {
            GpuSource::Nvml(_) => "nvml",
            GpuSource::Smi(_) => "nvidia-smi",
            GpuSource::None => "none",
        }
    }

    /// Reads every GPU once. [`GpuSource::None`] returns no GPUs.
    pub fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        match self {
            GpuSource::Nvml(s) => s.sample(),
            GpuSource::Smi(s) => s.sample(),
            GpuSource::None => Ok(Vec::new()),
        }
    }

    /// Static description of each GPU (name, driver, bus id, link, limit).
    pub fn inventory(&mut self) -> Result<Vec<GpuInventory>, TelemetryError> {
        match self {
            GpuSource::Nvml(s) => Ok(s.inventory()),
            GpuSource::Smi(s) => s.inventory(),
            GpuSource::None => Ok(Vec::new()),
        }
    }
}
