//! The machine's NUMA topology, read from sysfs and procfs under a
//! configurable root (tests use fake trees): node CPU lists and distances,
//! the CPU model, and AMD HSMP / data-fabric PMU information where present
//! (labelled absent elsewhere). Pure parsing plus file reads; nothing runs.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Where the kernel's trees are (`/sys`, `/proc` on a real machine).
#[derive(Debug, Clone)]
pub struct Roots {
    /// The sysfs root.
    pub sys: PathBuf,
    /// The procfs root.
    pub proc: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
        }
    }
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Kernel node number.
    pub id: usize,
    /// Its online CPUs (empty for a memory-only node).
    pub cpus: Vec<usize>,
    /// Distance to every node, in node order (`[10]` when unknown on a
    /// single node).
    pub distance: Vec<u64>,
}

/// What the machine looks like.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Nodes in id order; one synthetic node 0 with every CPU when the
    /// kernel exposes no NUMA information.
    pub nodes: Vec<Node>,
    /// `model name` of the first CPU, or "unknown".
    pub cpu_model: String,
    /// The HSMP block (`available: false` elsewhere).
    pub hsmp: Value,
    /// Is the AMD data-fabric PMU (`amd_df`) registered?
    pub amd_df_pmu: bool,
}

/// Parse a kernel CPU list (`0-3,8,10-11`). `None` for malformed text.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let s = s.trim();
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (
                    a.trim().parse::<usize>().ok()?,
                    b.trim().parse::<usize>().ok()?,
                );
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// Node ids under `<sys>/devices/system/node`, sorted.
fn node_ids(sys: &Path) -> Vec<usize> {
    let mut ids: Vec<usize> = std::fs::read_dir(sys.join("devices/system/node"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// The first `model name` line of `cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

impl Topology {
    /// Read the topology under `roots`.
    pub fn read(roots: &Roots) -> Topology {
        let base = roots.sys.join("devices/system/node");
        let mut nodes: Vec<Node> = node_ids(&roots.sys)
            .into_iter()
            .map(|id| {
                let dir = base.join(format!("node{id}"));
                let cpus = read(&dir.join("cpulist"))
                    .and_then(|s| parse_cpulist(&s))
                    .unwrap_or_default();
                let distance = read(&dir.join("distance"))
                    .map(|s| {
                        s.split_whitespace()
                            .filter_map(|d| d.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default();
                Node { id, cpus, distance }
            })
            .collect();
        if nodes.is_empty() {
            // No NUMA in the kernel: one node holding every CPU.
            let cpus = read(&roots.sys.join("devices/system/cpu/online"))
                .and_then(|s| parse_cpulist(&s))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| {
                    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
                });
            nodes.push(Node {
                id: 0,
                cpus,
                distance: vec![10],
            });
        }
        let n = nodes.len();
        for node in &mut nodes {
            if node.distance.len() != n {
                // unknown or inconsistent: local 10, remote 20 (the ACPI
                // SLIT defaults), said in docs/fabric.md
                node.distance = (0..n).map(|j| if j == node.id { 10 } else { 20 }).collect();
            }
        }
        Topology {
            nodes,
            cpu_model: read(&roots.proc.join("cpuinfo"))
                .and_then(|s| cpu_model(&s))
                .unwrap_or_else(|| "unknown".into()),
            hsmp: hsmp(&roots.sys),
            amd_df_pmu: roots.sys.join("bus/event_source/devices/amd_df").exists(),
        }
    }

    /// The `topology` block of the result (the reference's keys).
    pub fn to_json(&self) -> Value {
        let expected = if self.cpu_model.contains("EPYC 9") {
            "3 or 4 board-wired xGMI links; AMD 9004/9005 2P NPS1 reference topology uses 4"
        } else if self.cpu_model.contains("EPYC") {
            "board-dependent EPYC xGMI links"
        } else {
            "unknown"
        };
        json!({
            "cpu_model": self.cpu_model,
            "node_distances": self.nodes.iter().map(|n| (n.id.to_string(), json!(n.distance))).collect::<serde_json::Map<_, _>>(),
            "node_cpulists": self.nodes.iter().map(|n| (n.id.to_string(), json!(n.cpus))).collect::<serde_json::Map<_, _>>(),
            "hsmp": self.hsmp,
            "amd_df_pmu": self.amd_df_pmu,
            "data_fabric_perf_link_counter_slots": Value::Null,
            "xgmi": {
                "reported_active_links": Value::Null,
                "expected_links": expected,
                "source": "cpu model",
                "note": "Linux does not report active xGMI links portably",
            },
        })
    }
}

/// AMD HSMP: the driver's sysfs directory, and the values some drivers
/// expose there as text files. Absent elsewhere (`available: false`).
fn hsmp(sys: &Path) -> Value {
    let dir = ["devices/platform/amd_hsmp", "devices/system/cpu/amd_hsmp"]
        .iter()
        .map(|d| sys.join(d))
        .find(|d| d.is_dir());
    let Some(dir) = dir else {
        return json!({ "available": false, "reason": "no amd_hsmp driver in sysfs" });
    };
    let num = |name: &str| -> Value {
        read(&dir.join(name))
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map_or(Value::Null, |v| json!(v))
    };
    let text =
        |name: &str| -> Value { read(&dir.join(name)).map_or(Value::Null, |s| json!(s.trim())) };
    json!({
        "available": true,
        "protocol_version": text("protocol_version"),
        "smu_fw_version": text("smu_fw_version"),
        "fclk_mhz": num("fclk_mhz"),
        "mclk_mhz": num("mclk_mhz"),
        "ddr_max_bw_gbps": num("ddr_max_bw_gbps"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_ranges_and_singles() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a"), None);
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"),
            Some("AMD EPYC 9654 96-Core Processor".into())
        );
    }
}
