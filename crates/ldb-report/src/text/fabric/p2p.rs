//! The GPU peer-to-peer report: the `Run`, `Bandwidth`, `Latency`,
//! `Allreduce` and `Scores` cards, the peer-access issues (only when a peer
//! is missing), the bandwidth matrix, topology by peer distance and the
//! allreduce table; detail adds the latency matrix.

use ldb_core::document::FabricBlock;
use serde_json::Value;

use super::super::table::{Cell, Table};
use super::{card, cell, matrix, num};

/// `256 B`, `32 KiB`, `1 MiB`.
pub(crate) fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// `all enabled (12/12)` or `k/n enabled; missing G0->G1, …`.
fn peer_summary(pa: &Value) -> String {
    let n = pa.as_array().map_or(0, Vec::len);
    let mut missing = Vec::new();
    let mut total = 0;
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i) {
            total += 1;
            if pa[i][j].as_i64() != Some(1) {
                missing.push(format!("G{i}->G{j}"));
            }
        }
    }
    if missing.is_empty() {
        format!("all enabled ({total}/{total})")
    } else {
        format!(
            "{}/{total} enabled; missing {}",
            total - missing.len(),
            missing.join(", ")
        )
    }
}

/// A number, or a list of numbers, as text.
fn nums(v: &Value, digits: usize) -> String {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|x| num(x, digits))
            .collect::<Vec<_>>()
            .join(" / "),
        other => num(other, digits),
    }
}

fn cards(v: &FabricBlock, width: usize) -> Vec<String> {
    let d = v.data();
    let bs = &d["bandwidth_summary"];
    let bt = &d["bandwidth_topology"];
    let lat = &d["latency"];
    let mut out = card(
        "Run",
        &[
            format!(
                "GPUs: {} used / {} visible, mode {}",
                d["gpu_count"],
                d["visible_gpu_count"],
                d["mode"].as_str().unwrap_or("?")
            ),
            format!("peer access: {}", peer_summary(&d["peer_access"])),
            format!(
                "buffer {} MiB, iters {}, warmup {}, latency reads {}",
                d["size_mb"], d["iters"], d["warmup"], d["latency_iters"]
            ),
            format!(
                "elapsed: {} s",
                v.elapsed_seconds
                    .map_or_else(|| "-".into(), |x| format!("{x:.1}"))
            ),
        ],
        width,
    );
    out.extend(card(
        "Bandwidth",
        &[
            format!(
                "1:1 avg/min/max: {} / {} / {} GB/s",
                num(&bs["avg_offdiag_gbps"], 1),
                num(&bs["min_offdiag_gbps"], 1),
                num(&bs["max_offdiag_gbps"], 1)
            ),
            format!("ring avg: {} GB/s", num(&bt["ring"]["avg_gbps"], 1)),
            format!("single writer: {} GB/s", nums(&bt["single_writer_gbps"], 1)),
            format!(
                "all-to-all total: {} GB/s",
                num(&bt["all_to_all_total_gbps"], 1)
            ),
        ],
        width,
    ));
    out.extend(card(
        "Latency",
        &[
            format!(
                "isolated avg/min: {} / {} us",
                num(&lat["avg_sequential_us"], 2),
                num(&lat["min_sequential_us"], 2)
            ),
            format!(
                "full load effective/mean: {} / {} us",
                num(&lat["effective_full_load_us"], 2),
                num(&lat["mean_full_load_us"], 2)
            ),
        ],
        width,
    ));
    if let Some(best) = best_allreduce(&d["allreduce"]) {
        out.extend(card("Allreduce", &best, width));
    }
    out.extend(card(
        "Scores",
        &[
            format!("PCIe link: {}   dense fabric: {}", num(&bt["pcie_link_score"], 2), num(&bt["dense_interconnect_score"], 2)),
            "1.00 is ideal: link = mean 1:1 GB/s / 63 (PCIe Gen5 x16); dense = all-to-all / (mean 1:1 x GPUs)".into(),
        ],
        width,
    ));
    out
}

/// The size with the highest bus bandwidth.
fn best_allreduce(ar: &Value) -> Option<Vec<String>> {
    let rows = ar.as_array()?;
    let best = rows.iter().max_by(|a, b| {
        let x = |r: &Value| r["best_bus_bw_gbps"].as_f64().unwrap_or(0.0);
        x(a).total_cmp(&x(b))
    })?;
    let sizes: Vec<u64> = rows
        .iter()
        .filter_map(|r| r["size_bytes"].as_u64())
        .collect();
    let (lo, hi) = (sizes.iter().min()?, sizes.iter().max()?);
    Some(vec![
        format!(
            "best: {} ({}), {} GB/s bus, ratio {}x",
            size_label(best["size_bytes"].as_u64().unwrap_or(0)),
            best["winner"].as_str().unwrap_or("?"),
            num(&best["best_bus_bw_gbps"], 1),
            num(&best["ratio"], 2)
        ),
        format!(
            "sweep: {} .. {} ({} sizes)",
            size_label(*lo),
            size_label(*hi),
            sizes.len()
        ),
    ])
}

fn distance_table(d: &Value) -> Vec<String> {
    let st = d["bandwidth_topology"]["staggered"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if st.is_empty() {
        return Vec::new();
    }
    let lat = d["latency"]["staggered_avg_us"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut t = Table::new(
        "Topology by peer distance",
        &["dist", "write avg", "write total", "read avg"],
    )
    .right(&[1, 2, 3]);
    for (k, s) in st.iter().enumerate() {
        t.push(vec![
            Cell::plain(format!("+{}", s["offset"])),
            Cell::plain(format!("{} GB/s", num(&s["result"]["avg_gbps"], 1))),
            Cell::plain(format!("{} GB/s", num(&s["result"]["total_gbps"], 1))),
            Cell::plain(
                lat.get(k)
                    .map_or_else(|| "-".into(), |x| format!("{} us", num(x, 2))),
            ),
        ]);
    }
    let mut out = t.render(false);
    out.push(String::new());
    out
}

fn allreduce_table(ar: &Value) -> Vec<String> {
    let rows = ar.as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(
        "Allreduce: custom PCIe vs NCCL",
        &[
            "size",
            "custom us",
            "NCCL us",
            "winner",
            "speedup",
            "bus GB/s",
        ],
    )
    .right(&[1, 2, 4, 5]);
    for r in rows {
        t.push(vec![
            Cell::plain(size_label(r["size_bytes"].as_u64().unwrap_or(0))),
            Cell::plain(num(&r["custom_us"], 1)),
            Cell::plain(num(&r["nccl_us"], 1)),
            Cell::plain(r["winner"].as_str().unwrap_or("-")),
            Cell::plain(format!("{} x", num(&r["ratio"], 1))),
            Cell::plain(num(&r["best_bus_bw_gbps"], 1)),
        ]);
    }
    let mut out = t.render(false);
    out.push(String::new());
    out
}

/// The report of an `ok` block.
pub(super) fn report(v: &FabricBlock, detail: bool, width: usize) -> Vec<String> {
    let d = v.data();
    let mut out = cards(v, width);
    let pa = &d["peer_access"];
    let n = pa.as_array().map_or(0, Vec::len);
    let any_missing = (0..n).any(|i| (0..n).any(|j| i != j && cell(pa, i, j) != Some(1.0)));
    if any_missing {
        out.extend(matrix(
            "CUDA peer access issues",
            "src \\ dst",
            "G",
            pa,
            0,
            Some("-"),
        ));
    }
    out.extend(matrix(
        "P2P memcpy bandwidth GB/s",
        "src \\ dst",
        "G",
        &d["bandwidth_gbps"],
        1,
        Some("local"),
    ));
    out.extend(distance_table(d));
    out.extend(allreduce_table(&d["allreduce"]));
    if detail {
        out.extend(matrix(
            "Sequential P2P remote-read latency us",
            "src \\ dst",
            "G",
            &d["latency"]["sequential_us"],
            2,
            None,
        ));
    } else {
        out.push("use --p2pmark-detail for the latency matrix".into());
        out.push(String::new());
    }
    out
}
