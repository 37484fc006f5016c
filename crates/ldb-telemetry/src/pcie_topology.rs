//! PCIe topology facts for the startup diagnostics (`pcie_topology`): per
//! GPU, the link speed and width negotiated against what both ends can do,
//! and whether Access Control Services on a bridge above it redirect
//! peer-to-peer requests up to the root complex (why P2P is slow on many
//! workstations). Read from sysfs (`<root>/bus/pci/devices`, root
//! configurable for tests) and `lspci -vvv` (`ACSCtl:` lines); whatever is
//! missing is said, never guessed. docs/telemetry.md.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the facts come from.
#[derive(Debug, Clone, PartialEq)]
pub struct PcieConfig {
    /// Sysfs root (`/sys`).
    pub sysfs_root: PathBuf,
    /// `lspci` program.
    pub lspci: PathBuf,
    /// Limit for `lspci -vvv`.
    pub timeout: Duration,
}

impl Default for PcieConfig {
    fn default() -> Self {
        PcieConfig {
            sysfs_root: PathBuf::from("/sys"),
            lspci: PathBuf::from("lspci"),
            timeout: Duration::from_secs(4),
        }
    }
}

/// ACS control bits of one bridge, from its `ACSCtl:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcsCtl {
    /// `ReqRedir+`: peer requests are sent upstream.
    pub req_redir: bool,
    /// `CmpltRedir+`: peer completions are sent upstream.
    pub cmplt_redir: bool,
}

/// `BDF → ACSCtl` from `lspci -vvv` output. A device header is a line not
/// starting with whitespace: `0000:02:00.0 PCI bridge: …` or, without
/// `-D`, `02:00.0 …` (domain 0000 assumed).
pub fn parse_lspci_acs(text: &str) -> Vec<(String, AcsCtl)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) && !line.is_empty() {
            current = line.split_whitespace().next().map(full_bdf);
            continue;
        }
        let t = line.trim();
        if let (Some(bdf), Some(bits)) = (&current, t.strip_prefix("ACSCtl:")) {
            let has = |flag: &str| bits.split_whitespace().any(|w| w == format!("{flag}+"));
            out.push((
                bdf.clone(),
                AcsCtl {
                    req_redir: has("ReqRedir"),
                    cmplt_redir: has("CmpltRedir"),
                },
            ));
        }
    }
    out
}

fn full_bdf(s: &str) -> String {
    let s = s.to_ascii_lowercase();
    if s.matches(':').count() == 1 {
        format!("0000:{s}")
    } else {
        s
    }
}

fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

fn read(dir: &Path, name: &str) -> Option<String> {
    let s = std::fs::read_to_string(dir.join(name)).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// One GPU's link and the bridges above it (nearest last), from sysfs.
fn gpu_facts(dev: &Path, bdf: &str, acs: Option<&[(String, AcsCtl)]>) -> Value {
    let real = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    let bridges: Vec<String> = real
        .components()
        .filter_map(|c| {
            c.as_os_str()
                .to_str()
                .filter(|s| is_bdf(s))
                .map(String::from)
        })
        .filter(|b| b != bdf)
        .collect();
    let speed = (read(dev, "current_link_speed"), read(dev, "max_link_speed"));
    let width = (read(dev, "current_link_width"), read(dev, "max_link_width"));
    let downgraded = match (&speed, &width) {
        ((Some(cs), Some(ms)), (Some(cw), Some(mw))) => Some(cs != ms || cw != mw),
        _ => None,
    };
    let redirects = |b: &String| {
        acs.map(|acs| {
            acs.iter()
                .any(|(a, c)| a == b && (c.req_redir || c.cmplt_redir))
        })
    };
    // bridges[0] is the root port; the rest are switch ports.
    let switch_ports = bridges.get(1..).unwrap_or(&[]);
    let switch_redirect: Option<Vec<&String>> = acs.map(|_| {
        switch_ports
            .iter()
            .filter(|b| redirects(b) == Some(true))
            .collect()
    });
    let (through_rc, why) = match (&switch_redirect, switch_ports.is_empty()) {
        (_, true) => (
            Some(true),
            "no PCIe switch above the GPU: its peers are reached through the root complex".to_string(),
        ),
        (None, false) => (None, "ACS control bits unreadable (see acs_source)".to_string()),
        (Some(r), false) if !r.is_empty() => (
            Some(true),
            format!("ACS redirect on switch port(s) {}: peer traffic is sent up to the root complex", join(r)),
        ),
        (Some(_), false) => (
            Some(false),
            "no ACS redirect on the switch ports above: peers under the same switch talk through it".to_string(),
        ),
    };
    json!({
        "bus_id": bdf,
        "current_link_speed": speed.0, "max_link_speed": speed.1,
        "current_link_width": width.0, "max_link_width": width.1,
        "link_below_capability": downgraded,
        "upstream_bridges": bridges,
        "root_port_acs_redirect": bridges.first().and_then(redirects),
        "switch_acs_redirecting_ports": switch_redirect,
        "p2p_through_root_complex": through_rc,
        "p2p_reason": why,
    })
}

fn join(v: &[&String]) -> String {
    v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

/// The `pcie_topology` block: `{status, reason?, acs_source, gpus: […]}`.
pub fn collect(cfg: &PcieConfig) -> Value {
    let dir = cfg.sysfs_root.join("bus/pci/devices");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => {
            return json!({"status": "unavailable",
                "reason": format!("{} is not readable: {e}", dir.display())});
        }
    };
    let mut gpus: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .filter(|(_, p)| {
            read(p, "class").is_some_and(|c| c.starts_with("0x0300") || c.starts_with("0x0302"))
        })
        .collect();
    gpus.sort();
    if gpus.is_empty() {
        return json!({"status": "unavailable",
            "reason": format!("no display or 3D controller under {}", dir.display())});
    }
    let run = crate::command::run_with_timeout(&cfg.lspci, &["-vvv"], cfg.timeout);
    let (acs, acs_source) = if run.not_found {
        (None, "unavailable: lspci not found".to_string())
    } else if run.timed_out || run.returncode != 0 {
        (
            None,
            format!("unavailable: lspci -vvv failed (exit {})", run.returncode),
        )
    } else {
        let acs = parse_lspci_acs(&run.stdout);
        let note = if acs.is_empty() && run.stdout.contains("access denied") {
            "unavailable: lspci could not read extended capabilities (needs root)".to_string()
        } else {
            "lspci -vvv ACSCtl".to_string()
        };
        (note.starts_with("lspci").then_some(acs), note)
    };
    let facts: Vec<Value> = gpus
        .iter()
        .map(|(bdf, p)| gpu_facts(p, bdf, acs.as_deref()))
        .collect();
    json!({"status": "available", "acs_source": acs_source, "gpus": facts})
}
