//! The CPU/NUMA fabric measured natively (no helper binary): for every
//! (CPU node, memory node) pair the NUMA distance, read/write/copy
//! bandwidth and pointer-chase latency; with two or more nodes the
//! bidirectional figures between nodes 0 and 1. Runs on any Linux machine;
//! a single-node machine gets the local row. The result object has the
//! reference's `amd_fabric` keys (docs/fabric.md).

pub mod kernels;
pub mod measure;

use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::settings::CpuFabricSettings;
use crate::topology::{Roots, Topology};
use ldb_core::document::FabricStatus;

/// Threads per node when `--amd-fabric-threads` is 0: the reference's cap.
const AUTO_THREADS_CAP: usize = 64;

/// What a run will do, decided before any memory is allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Node indexes (into the topology's list) measured.
    pub nodes: Vec<usize>,
    /// Threads per node.
    pub threads: usize,
    /// Lines to show the user (a clamp, memory-only nodes).
    pub notes: Vec<String>,
}

/// Nodes, threads and notes for `s` on `topo`.
pub fn plan(s: &CpuFabricSettings, topo: &Topology) -> Plan {
    let mut notes = Vec::new();
    let n = topo.nodes.len();
    let keep = match usize::try_from(s.max_nodes).unwrap_or(usize::MAX) {
        0 => n,
        m if m > n => {
            notes.push(format!(
                "--amd-fabric-max-nodes {m} is above the {n} NUMA node(s) here: all {n} measured"
            ));
            n
        }
        m => m,
    };
    let nodes: Vec<usize> = (0..keep).collect();
    let smallest = nodes
        .iter()
        .map(|&i| topo.nodes[i].cpus.len())
        .filter(|&c| c > 0)
        .min()
        .unwrap_or(1);
    for &i in &nodes {
        if topo.nodes[i].cpus.is_empty() {
            notes.push(format!(
                "node {} has no CPUs (memory-only): its row and column are null (memory is placed by \
                 first touch from the node's own CPUs)",
                topo.nodes[i].id
            ));
        }
    }
    let threads = match usize::try_from(s.threads).unwrap_or(usize::MAX) {
        0 => smallest.min(AUTO_THREADS_CAP),
        t => t,
    };
    Plan {
        nodes,
        threads,
        notes,
    }
}

/// `MemAvailable` of `/proc/meminfo`, bytes.
pub fn available_memory(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// The most memory a run holds at once: a bandwidth pair's buffer plus the
/// copy targets (2 × size), or the latency ring, whichever is larger; the
/// bidirectional run holds two pairs' buffers and targets (4 × size).
pub fn peak_bytes(s: &CpuFabricSettings, nodes: usize) -> u64 {
    let mib = 1u64 << 20;
    let bw = s
        .size_mb
        .saturating_mul(mib)
        .saturating_mul(if nodes >= 2 { 4 } else { 2 });
    bw.max(s.latency_mb.saturating_mul(mib))
}

/// The one-line refusal when the sizes do not fit in available memory.
pub fn check_memory(
    s: &CpuFabricSettings,
    nodes: usize,
    available: Option<u64>,
) -> Result<(), String> {
    let need = peak_bytes(s, nodes);
    match available {
        Some(avail) if need > avail => Err(format!(
            "invalid --amd-fabric-size-mb {} / --amd-fabric-latency-mb {}: the CPU fabric run needs \
             {} MiB at once but only {} MiB of memory is available",
            s.size_mb,
            s.latency_mb,
            need >> 20,
            avail >> 20
        )),
        _ => Ok(()),
    }
}

/// An n × n matrix of nulls.
fn nulls(n: usize) -> Vec<Vec<Value>> {
    vec![vec![Value::Null; n]; n]
}

fn round(x: f64, digits: i32) -> Value {
    let p = 10f64.powi(digits);
    json!((x * p).round() / p)
}

/// Measure the fabric natively. Never panics on a machine it does not
/// understand: errors become `status: error` with the message.
pub fn run_native(s: &CpuFabricSettings, roots: &Roots) -> Value {
    let started = Instant::now();
    let topo = Topology::read(roots);
    let p = plan(s, &topo);
    let mut out = Map::new();
    out.insert("status".into(), json!(FabricStatus::Ok.as_str()));
    out.insert("binary".into(), json!("native"));
    out.insert("topology".into(), topo.to_json());
    out.insert("notes".into(), json!(p.notes));
    let measured = measure_all(s, &topo, &p, started);
    out.insert(
        "elapsed_seconds".into(),
        round(started.elapsed().as_secs_f64(), 3),
    );
    match measured {
        Ok((data, timed_out)) => {
            if timed_out {
                out.insert("status".into(), json!(FabricStatus::Timeout.as_str()));
                out.insert("timeout_seconds".into(), json!(s.timeout_s));
            }
            out.insert("data".into(), data);
        }
        Err(e) => {
            out.insert("status".into(), json!(FabricStatus::Error.as_str()));
            out.insert("error".into(), json!(e.to_string()));
        }
    }
    Value::Object(out)
}

/// Every pair, then the bidirectional figures; `true` when the timeout cut
/// it short (the cells not reached stay null).
fn measure_all(
    s: &CpuFabricSettings,
    topo: &Topology,
    p: &Plan,
    started: Instant,
) -> std::io::Result<(Value, bool)> {
    let n = p.nodes.len();
    let (mut read, mut write, mut copy, mut lat) = (nulls(n), nulls(n), nulls(n), nulls(n));
    let mib = 1usize << 20;
    let bytes = usize::try_from(s.size_mb)
        .unwrap_or(usize::MAX)
        .saturating_mul(mib);
    let lat_bytes = usize::try_from(s.latency_mb)
        .unwrap_or(usize::MAX)
        .saturating_mul(mib);
    let over = || started.elapsed().as_secs_f64() > s.timeout_s;
    let mut timed_out = false;
    let job = |c: usize, m: usize| measure::PairJob {
        cpu_cpus: topo.nodes[p.nodes[c]].cpus.clone(),
        mem_cpus: topo.nodes[p.nodes[m]].cpus.clone(),
        bytes,
        threads: p.threads,
        warmup: s.warmup,
        iters: s.iters,
    };
    'pairs: for c in 0..n {
        for m in 0..n {
            if over() {
                timed_out = true;
                break 'pairs;
            }
            let j = job(c, m);
            if j.cpu_cpus.is_empty() || j.mem_cpus.is_empty() {
                continue;
            }
            let bw = measure::pair_bandwidth(&j)?;
            read[c][m] = round(bw.read, 3);
            write[c][m] = round(bw.write, 3);
            copy[c][m] = round(bw.copy, 3);
            let us = measure::pair_latency(&j.cpu_cpus, &j.mem_cpus, lat_bytes, s.latency_iters)?;
            lat[c][m] = round(us, 4);
        }
    }
    let mut bidi = (Value::Null, Value::Null, Value::Null);
    if n >= 2 && !timed_out {
        let (a, b) = (job(0, 1), job(1, 0));
        if !a.cpu_cpus.is_empty() && !b.cpu_cpus.is_empty() {
            let r = measure::bidirectional(&a, &b)?;
            bidi = (round(r.read, 3), round(r.write, 3), round(r.copy, 3));
        }
    }
    let nodes: Vec<_> = p.nodes.iter().map(|&i| &topo.nodes[i]).collect();
    let data = json!({
        "tool": "llm-decode-bench cpu-fabric",
        "version": 2,
        "numa_nodes": n,
        "size_mb": s.size_mb,
        "latency_mb": s.latency_mb,
        "iters": s.iters,
        "warmup": s.warmup,
        "threads_per_node": p.threads,
        "latency_iters": s.latency_iters,
        "node_cpus": nodes.iter().map(|n| json!(n.cpus)).collect::<Vec<_>>(),
        "distance": nodes.iter().map(|a| p.nodes.iter().map(|&j| json!(a.distance.get(j))).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "read_gbps": read,
        "write_gbps": write,
        "copy_gbps": copy,
        "latency_us": lat,
        "bidirectional_remote_read_gbps": bidi.0,
        "bidirectional_remote_write_gbps": bidi.1,
        "bidirectional_remote_copy_gbps": bidi.2,
    });
    Ok((data, timed_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_available_bytes() {
        let m = "MemTotal: 100 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(available_memory(m), Some(2048 * 1024));
        assert_eq!(available_memory("x"), None);
    }

    #[test]
    fn sizes_above_available_memory_are_one_line_before_allocation() {
        let s = CpuFabricSettings::default();
        assert!(check_memory(&s, 1, Some(8 << 30)).is_ok());
        let e = check_memory(&s, 2, Some(1 << 30)).expect_err("2 GiB > 1 GiB");
        assert!(e.contains("2048 MiB") && e.contains("1024 MiB"), "{e}");
        assert!(!e.contains('\n'));
        assert!(check_memory(&s, 2, None).is_ok());
    }
}
