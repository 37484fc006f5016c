//! GPU and CPU telemetry for llm-decode-bench: the I/O side of
//! [`ldb_core::hardware`].
//!
//! - [`HardwareMonitor`] samples GPUs (NVML, else `nvidia-smi`, else none)
//!   and the host CPU (sysinfo, hwmon) on its own thread and slices the
//!   history into [`HardwareSummary`] objects per cell and per run.
//! - [`collect_startup_diagnostics`] records version, redacted arguments and
//!   environment, host, GPU inventory, `nvidia-smi topo -m` and the NVIDIA P2P
//!   override check.
//!
//! Nothing here panics or stalls on bad input: commands are killed at their
//! time limit, files are read with a size cap, and whatever cannot be read
//! becomes an "unknown" value with a reason. See `docs/telemetry.md`.
//!
//! See also: `ldb_core::hardware` (types, summary math, parsers),
//! `ldb_core::redact` (secret redaction).

pub mod command;
pub mod cpu;
pub mod diagnostics;
pub mod error;
pub mod gpu;
pub mod live;
pub mod monitor;
pub mod pcie_topology;

pub use diagnostics::{
    DiagnosticsConfig, StartupDiagnostics, collect_startup_diagnostics,
    collect_startup_diagnostics_with,
};
pub use error::{Result, TelemetryError};
pub use gpu::{BackendChoice, GpuConfig};
pub use ldb_core::hardware::{HardwareSnapshot, HardwareSummary, tokens_per_joule};
pub use monitor::{HardwareMonitor, MonitorConfig, MonitorHandle};
