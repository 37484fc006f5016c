//! Fabric diagnostics run before a benchmark (or alone with `--…-only`):
//! the CPU/NUMA fabric measured natively ([`cpu`]), the topology read from
//! sysfs ([`topology`]), an external helper binary when the user names one
//! ([`helper`]), and the GPU peer-to-peer interface ([`gpu`]). Each produces
//! the reference's result object (`status`, `data`, …) as JSON, so that the
//! result file keeps the reference's keys. See docs/fabric.md.

pub mod cpu;
pub mod gpu;
pub mod helper;
pub mod settings;
pub mod topology;

/// The status of a fabric block: the result document's own type, so that
/// what the diagnostics write and what the reports read are one enum.
pub use ldb_core::document::FabricStatus;
pub use settings::{CpuFabricSettings, P2pSettings};
