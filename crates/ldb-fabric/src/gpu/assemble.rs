//! From a back end's primitive measurements to the reference's `p2pmark`
//! `data` object (pure arithmetic over the [`P2pBackend`] answers, so the
//! fake tests every formula):
//!
//! - `bandwidth_gbps[s][d]`: one copy s→d at a time (diagonal: local copy);
//!   `bandwidth_summary`: mean / min / max off the diagonal.
//! - staggered offset k: every GPU i copies to (i+k) mod n at once; per
//!   pair GB/s, their mean (`avg_gbps`) and sum (`total_gbps`); offset 1 is
//!   the `ring`.
//! - `single_writer_gbps[i]`: GPU i copies to every peer at once; the sum.
//! - all-to-all: every ordered pair at once; `all_to_all_gpu_gbps[i]` =
//!   (n−1) × GPU i's slowest outgoing stream (its streams move equal bytes,
//!   so the slowest decides when it is done); the total is their sum.
//! - `pcie_link_score` = mean off-diagonal GB/s / 63 (PCIe Gen5 x16);
//!   `dense_interconnect_score` = all-to-all total / (mean off-diagonal × n).
//! - latency: isolated µs per dependent remote read for each pair; by
//!   distance (all readers i→i+k at once, mean); one reader against all
//!   peers at once (its worst); all readers against all peers (each
//!   reader's worst; their mean and max = effective).
//! - allreduce per size: µs of the custom one-shot kernel and of NCCL, bus
//!   bandwidth = bytes × 2(n−1)/n / time, winner, ratio = slower / faster.

use serde_json::{Value, json};

use super::P2pBackend;
use crate::settings::{AllreduceSizes, P2pSettings};

/// Nominal PCIe Gen5 x16 bandwidth the link score divides by, GB/s.
pub const PCIE_GEN5_X16_GBPS: f64 = 63.0;

/// Which allreduce implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allreduce {
    /// The simple one-shot kernel (each GPU reads all peers' buffers).
    Custom,
    /// NCCL's allreduce.
    Nccl,
}

/// The reference's default sweep: 256 B … 1 MiB doubling, plus 40, 48 and
/// 56 KiB, ascending.
pub fn allreduce_sizes(s: &AllreduceSizes) -> Vec<u64> {
    match s {
        AllreduceSizes::Full => {
            let mut v: Vec<u64> = (8..=20).map(|p| 1u64 << p).collect();
            v.extend([40 << 10, 48 << 10, 56 << 10]);
            v.sort_unstable();
            v
        }
        AllreduceSizes::Mib(m) => m.iter().map(|x| x << 20).collect(),
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn r(x: f64, d: i32) -> f64 {
    let p = 10f64.powi(d);
    (x * p).round() / p
}

/// The pattern "every GPU i → (i+k) mod n" at once.
fn staggered(b: &dyn P2pBackend, n: usize, k: usize) -> Result<Value, String> {
    let pairs: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + k) % n)).collect();
    let g = b.concurrent_gbps(&pairs)?;
    Ok(json!({
        "pairs": pairs.iter().map(|&(a, c)| json!([a, c])).collect::<Vec<_>>(),
        "pair_gbps": g.iter().map(|&x| r(x, 3)).collect::<Vec<_>>(),
        "avg_gbps": r(mean(&g), 3),
        "total_gbps": r(g.iter().sum(), 3),
    }))
}

/// Bandwidth block: matrix, summary, topology patterns and scores.
fn bandwidth(b: &dyn P2pBackend, n: usize) -> Result<(Value, Value, Value), String> {
    let mut m = vec![vec![0.0; n]; n];
    for (s, row) in m.iter_mut().enumerate() {
        for (d, x) in row.iter_mut().enumerate() {
            *x = b.copy_gbps(s, d)?;
        }
    }
    let off: Vec<f64> = (0..n)
        .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
        .map(|(s, d)| m[s][d])
        .collect();
    let avg = mean(&off);
    let summary = json!({
        "avg_offdiag_gbps": r(avg, 3),
        "min_offdiag_gbps": r(off.iter().copied().fold(f64::INFINITY, f64::min), 3),
        "max_offdiag_gbps": r(off.iter().copied().fold(f64::NEG_INFINITY, f64::max), 3),
    });
    let st: Vec<Value> = (1..n)
        .map(|k| staggered(b, n, k).map(|res| json!({"offset": k, "result": res})))
        .collect::<Result<_, _>>()?;
    let ring = st.first().map_or(Value::Null, |s| s["result"].clone());
    let single: Vec<f64> = (0..n)
        .map(|i| {
            b.concurrent_gbps(
                &(0..n)
                    .filter(|&d| d != i)
                    .map(|d| (i, d))
                    .collect::<Vec<_>>(),
            )
            .map(|g| g.iter().sum())
        })
        .collect::<Result<_, _>>()?;
    let all: Vec<(usize, usize)> = (0..n)
        .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
        .collect();
    let g = b.concurrent_gbps(&all)?;
    let per_gpu: Vec<f64> = (0..n)
        .map(|i| {
            let slowest = all
                .iter()
                .zip(&g)
                .filter(|((s, _), _)| *s == i)
                .map(|(_, &x)| x)
                .fold(f64::INFINITY, f64::min);
            slowest * (n - 1) as f64
        })
        .collect();
    let total: f64 = per_gpu.iter().sum();
    let topo = json!({
        "staggered": st,
        "ring": ring,
        "single_writer_gbps": single.iter().map(|&x| r(x, 3)).collect::<Vec<_>>(),
        "all_to_all_gpu_gbps": per_gpu.iter().map(|&x| r(x, 3)).collect::<Vec<_>>(),
        "all_to_all_total_gbps": r(total, 3),
        "pcie_link_score": r(avg / PCIE_GEN5_X16_GBPS, 4),
        "dense_interconnect_score": if avg > 0.0 { r(total / (avg * n as f64), 4) } else { 0.0 },
    });
    let matrix = json!(
        m.iter()
            .map(|row| row.iter().map(|&x| r(x, 3)).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    Ok((matrix, summary, topo))
}

/// Latency block.
fn latency(b: &dyn P2pBackend, n: usize) -> Result<Value, String> {
    let mut seq = vec![vec![0.0; n]; n];
    for (i, row) in seq.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            if i != j {
                *x = b.read_latency_us(&[(i, j)])?[0];
            }
        }
    }
    let off: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| seq[i][j])
        .collect();
    let by_dist: Vec<f64> = (1..n)
        .map(|k| {
            b.read_latency_us(&(0..n).map(|i| (i, (i + k) % n)).collect::<Vec<_>>())
                .map(|v| r(mean(&v), 4))
        })
        .collect::<Result<_, _>>()?;
    let peers = |i: usize| {
        (0..n)
            .filter(|&j| j != i)
            .map(|j| (i, j))
            .collect::<Vec<_>>()
    };
    let single: Vec<f64> = (0..n)
        .map(|i| {
            b.read_latency_us(&peers(i))
                .map(|v| v.iter().copied().fold(0.0, f64::max))
        })
        .collect::<Result<_, _>>()?;
    let all: Vec<(usize, usize)> = (0..n).flat_map(peers).collect();
    let lat = b.read_latency_us(&all)?;
    let per_reader: Vec<f64> = (0..n)
        .map(|i| {
            all.iter()
                .zip(&lat)
                .filter(|((a, _), _)| *a == i)
                .map(|(_, &x)| x)
                .fold(0.0, f64::max)
        })
        .collect();
    Ok(json!({
        "sequential_us": seq.iter().map(|row| row.iter().map(|&x| r(x, 4)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "staggered_avg_us": by_dist,
        "single_reader_all_peers_us": single.iter().map(|&x| r(x, 4)).collect::<Vec<_>>(),
        "all_read_all_peers_us": per_reader.iter().map(|&x| r(x, 4)).collect::<Vec<_>>(),
        "min_sequential_us": r(off.iter().copied().fold(f64::INFINITY, f64::min), 4),
        "avg_sequential_us": r(mean(&off), 4),
        "mean_full_load_us": r(mean(&per_reader), 4),
        "effective_full_load_us": r(per_reader.iter().copied().fold(0.0, f64::max), 4),
    }))
}

/// Allreduce rows over the sweep.
fn allreduce(b: &dyn P2pBackend, n: usize, sizes: &[u64]) -> Result<Value, String> {
    let factor = 2.0 * (n as f64 - 1.0) / n as f64;
    let rows: Vec<Value> = sizes
        .iter()
        .map(|&bytes| {
            let cu = b.allreduce_us(Allreduce::Custom, bytes)?;
            let nc = b.allreduce_us(Allreduce::Nccl, bytes)?;
            let bus = |us: f64| bytes as f64 * factor / (us * 1e-6) / 1e9;
            let (fast, slow) = (cu.min(nc), cu.max(nc));
            Ok(json!({
                "size_bytes": bytes,
                "custom_us": r(cu, 3),
                "nccl_us": r(nc, 3),
                "custom_bus_bw_gbps": r(bus(cu), 3),
                "nccl_bus_bw_gbps": r(bus(nc), 3),
                "best_bus_bw_gbps": r(bus(fast), 3),
                "winner": if cu <= nc { "custom" } else { "nccl" },
                "ratio": r(slow / fast, 3),
            }))
        })
        .collect::<Result<_, String>>()?;
    Ok(json!(rows))
}

/// The `data` object for `gpus` GPUs of `visible`.
pub fn measure(
    s: &P2pSettings,
    b: &dyn P2pBackend,
    visible: usize,
    gpus: usize,
) -> Result<Value, String> {
    let n = gpus;
    let access: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| u8::from(i == j || b.peer_access(i, j)))
                .collect()
        })
        .collect();
    let want = |m: &str| s.mode == "all" || s.mode == m;
    // a block that fails leaves its key empty and its reason in `errors`;
    // the other blocks are still measured
    let mut errors = serde_json::Map::new();
    let mut keep = |key: &str, r: Result<Value, String>, empty: Value| {
        r.unwrap_or_else(|e| {
            errors.insert(key.into(), json!(e));
            empty
        })
    };
    let (bw, summary, topo) = if want("bandwidth") {
        let r = bandwidth(b, n).map(|(m, s, t)| json!([m, s, t]));
        let v = keep("bandwidth", r, json!([[], {}, {}]));
        (v[0].clone(), v[1].clone(), v[2].clone())
    } else {
        (json!([]), json!({}), json!({}))
    };
    let lat = if want("latency") {
        keep("latency", latency(b, n), json!({}))
    } else {
        json!({})
    };
    let ar = if want("allreduce") {
        keep(
            "allreduce",
            allreduce(b, n, &allreduce_sizes(&s.allreduce_sizes)),
            json!([]),
        )
    } else {
        json!([])
    };
    Ok(json!({
        "tool": "llm-decode-bench p2p",
        "version": 1,
        "visible_gpu_count": visible,
        "gpu_count": n,
        "gpu_count_clamped": n < visible,
        "mode": s.mode,
        "size_mb": s.size_mb,
        "iters": s.iters,
        "warmup": s.warmup,
        "latency_iters": s.latency_iters,
        "peer_access": access,
        "bandwidth_gbps": bw,
        "bandwidth_summary": summary,
        "bandwidth_topology": topo,
        "latency": lat,
        "allreduce": ar,
        "errors": errors,
    }))
}
