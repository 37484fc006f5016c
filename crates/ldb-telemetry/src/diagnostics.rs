//! Startup diagnostics (`startup_diagnostics`): who ran what, where, with
//! which GPUs, and whether the NVIDIA P2P override is in effect. Every
//! command has a time limit and every file read is capped; whatever fails
//! is recorded as such.

use crate::command::{CommandOutcome, CommandRecord, run_with_timeout};
use crate::gpu::NvmlSource;
use ldb_core::document::{FabricBlock, FabricStatus};
use ldb_core::hardware::p2p::{self, P2pOverride, check_p2p_override};
use ldb_core::hardware::smi::{INVENTORY_FIELDS, parse_inventory};
use ldb_core::redact::{REDACTED, diagnostic_env, is_secret_name, redact_url, redact_value};
use serde_json::{Map, Value};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where diagnostics read from; defaults are the real paths, tests point
/// them at fixtures.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosticsConfig {
    /// `nvidia-smi` program.
    pub nvidia_smi: PathBuf,
    /// `/proc/driver/nvidia/params`.
    pub params_path: PathBuf,
    /// `/etc/modprobe.d/nvidia-p2p-override.conf`.
    pub modprobe_path: PathBuf,
    /// Try NVML for the GPU inventory first.
    pub use_nvml: bool,
    /// NVML library override.
    pub nvml_lib: Option<PathBuf>,
    /// Limit for `hostname`, `uname -a` and the inventory query.
    pub command_timeout: Duration,
    /// Limit for `nvidia-smi topo -m`.
    pub topo_timeout: Duration,
    /// Environment to record; `None` reads the process environment.
    pub env: Option<Vec<(String, String)>>,
    /// Sysfs root and `lspci` for the PCIe topology facts.
    pub pcie: crate::pcie_topology::PcieConfig,
}

impl Default for DiagnosticsConfig {
    fn default() -> Self {
        DiagnosticsConfig {
            nvidia_smi: PathBuf::from("nvidia-smi"),
            params_path: PathBuf::from(p2p::PARAMS_PATH),
            modprobe_path: PathBuf::from(p2p::MODPROBE_PATH),
            use_nvml: true,
            nvml_lib: None,
            command_timeout: Duration::from_secs(2),
            topo_timeout: Duration::from_secs(8),
            env: None,
            pcie: crate::pcie_topology::PcieConfig::default(),
        }
    }
}

pub use ldb_core::document::StartupDiagnostics;

/// Collects diagnostics with the default paths and the process environment.
pub fn collect_startup_diagnostics(
    args: &[(String, Value)],
    server_url: &str,
) -> StartupDiagnostics {
    collect_startup_diagnostics_with(&DiagnosticsConfig::default(), args, server_url)
}

/// Collects diagnostics as configured. Worst-case time is about
/// `2 × command_timeout + command_timeout + topo_timeout` plus NVML init.
pub fn collect_startup_diagnostics_with(
    cfg: &DiagnosticsConfig,
    args: &[(String, Value)],
    server_url: &str,
) -> StartupDiagnostics {
    let env = match &cfg.env {
        Some(vars) => diagnostic_env(vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        None => diagnostic_env(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        ),
    };
    let hostname = command_line(run_with_timeout("hostname", &[], cfg.command_timeout))
        .or_else(|| {
            read_capped(Path::new("/proc/sys/kernel/hostname"), 256)
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    let uname = command_line(run_with_timeout("uname", &["-a"], cfg.command_timeout))
        .unwrap_or_else(|| "unknown".to_string());

    let fields = format!("--query-gpu={INVENTORY_FIELDS}");
    let query = run_with_timeout(
        &cfg.nvidia_smi,
        &[&fields, "--format=csv,noheader,nounits"],
        cfg.command_timeout,
    );
    let (query, topo, smi_error) = if query.not_found {
        (None, None, Some("nvidia-smi not found".to_string()))
    } else if query.timed_out {
        (
            Some(query),
            None,
            Some("nvidia-smi timed out; topology not queried".to_string()),
        )
    } else {
        let topo = run_with_timeout(&cfg.nvidia_smi, &["topo", "-m"], cfg.topo_timeout);
        (Some(query), Some(topo), None)
    };
    let nvml_inventory = if cfg.use_nvml {
        NvmlSource::open(cfg.nvml_lib.as_deref())
            .ok()
            .map(|s| s.inventory())
    } else {
        None
    };
    let (gpu_inventory, source) = match (nvml_inventory, &query) {
        (Some(inv), _) if !inv.is_empty() => (inv, "nvml"),
        (_, Some(q)) if q.returncode == 0 => (parse_inventory(&q.stdout).rows, "nvidia-smi"),
        _ => (Vec::new(), "none"),
    };
    StartupDiagnostics {
        version: env!("CARGO_PKG_VERSION").to_string(),
        server_url: redact_url(server_url),
        hostname,
        uname,
        env,
        args: redact_json_args(args),
        nvidia_p2p_override: check_p2p(&cfg.params_path, &cfg.modprobe_path),
        p2pmark: Some(FabricBlock::with_status(FabricStatus::NotRun)),
        amd_fabric: Some(FabricBlock::with_status(FabricStatus::NotRun)),
        gpu_inventory: Some(gpu_inventory),
        gpu_inventory_source: Some(source.to_string()),
        nvidia_smi_query: query,
        nvidia_smi_topo: topo,
        nvidia_smi_error: smi_error,
        extra: Map::from_iter([(
            "pcie_topology".to_string(),
            crate::pcie_topology::collect(&cfg.pcie),
        )]),
    }
}

/// Reads the params and modprobe files (capped) and runs the P2P check.
pub fn check_p2p(params_path: &Path, modprobe_path: &Path) -> P2pOverride {
    let params = read_capped(params_path, 4 * p2p::PARAMS_MAX_CHARS as u64);
    let modprobe = read_capped(modprobe_path, 64 * 1024);
    check_p2p_override(
        &params_path.to_string_lossy(),
        params.as_deref().map_err(Clone::clone),
        &modprobe_path.to_string_lossy(),
        modprobe.as_deref().map_err(Clone::clone),
    )
}

/// Redacts argument values: string values by name and content, any value
/// whose name looks secret.
pub fn redact_json_args(args: &[(String, Value)]) -> Map<String, Value> {
    args.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => Value::String(redact_value(k, s)),
                Value::Null => Value::Null,
                _ if is_secret_name(k) => Value::String(REDACTED.to_string()),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn command_line(r: CommandRecord) -> Option<String> {
    r.into_result()
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Reads at most `cap` bytes of a file as (lossy) UTF-8.
fn read_capped(path: &Path, cap: u64) -> Result<String, String> {
    let f = File::open(path).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.take(cap)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
