//! The CPU/NUMA fabric report: the `AMD CPU Fabric` card and the per-pair
//! table (compact), or four cards and the matrices (detail).

use ldb_core::document::FabricBlock;
use serde_json::Value;

use super::super::table::{Cell, Table};
use super::{card, cell, matrix, num, stats};

/// Off-diagonal values of a matrix.
fn remote(m: &Value) -> Vec<f64> {
    let n = m.as_array().map_or(0, Vec::len);
    (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .filter_map(|(i, j)| cell(m, i, j))
        .collect()
}

fn triple(label: &str, xs: &[f64], unit: &str, digits: usize) -> String {
    match stats(xs) {
        Some((a, lo, hi)) => {
            format!("{label} avg/min/max: {a:.digits$} / {lo:.digits$} / {hi:.digits$} {unit}")
        }
        None => format!("{label}: n/a (one node)"),
    }
}

/// `local=10, remote=32` when the matrix has one remote value, else the rows.
fn distance_summary(d: &Value) -> String {
    let n = d.as_array().map_or(0, Vec::len);
    let local: Vec<u64> = (0..n).filter_map(|i| d[i][i].as_u64()).collect();
    let mut rem: Vec<u64> = remote(d).iter().map(|&x| x as u64).collect();
    rem.sort_unstable();
    rem.dedup();
    let loc = local.first().copied().unwrap_or(10);
    match rem.as_slice() {
        [] => format!("local={loc}"),
        [r] => format!("local={loc}, remote={r}"),
        many => format!(
            "local={loc}, remote={}",
            many.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        ),
    }
}

fn main_card(v: &FabricBlock) -> Vec<String> {
    let d = v.data();
    let t = v.extra_key("topology");
    let mut body = vec![format!(
        "CPU: {}",
        t["cpu_model"].as_str().unwrap_or("unknown")
    )];
    body.push(format!(
        "NUMA nodes: {}, threads/node: {}, distance: {}",
        d["numa_nodes"],
        d["threads_per_node"],
        distance_summary(&d["distance"])
    ));
    body.push(triple("remote read", &remote(&d["read_gbps"]), "GB/s", 1));
    if d["bidirectional_remote_read_gbps"].is_number() {
        body.push(format!(
            "bidirectional saturation GB/s: read {} / write {} / memcpy {}",
            num(&d["bidirectional_remote_read_gbps"], 1),
            num(&d["bidirectional_remote_write_gbps"], 1),
            num(&d["bidirectional_remote_copy_gbps"], 1)
        ));
    }
    body.push(triple("remote latency", &remote(&d["latency_us"]), "us", 3));
    body.push(match t["hsmp"]["available"].as_bool() {
        Some(true) => format!(
            "HSMP: protocol {}, FCLK {} MHz, MCLK {} MHz",
            t["hsmp"]["protocol_version"].as_str().unwrap_or("?"),
            num(&t["hsmp"]["fclk_mhz"], 0),
            num(&t["hsmp"]["mclk_mhz"], 0)
        ),
        _ => "HSMP: absent".into(),
    });
    body.push(format!(
        "DF perf PMU: {}",
        if t["amd_df_pmu"] == true {
            "present"
        } else {
            "absent"
        }
    ));
    body.push("xGMI active links: not exposed (Linux does not report this portably)".into());
    body
}

fn pair_table(d: &Value) -> Vec<String> {
    let n = d["numa_nodes"].as_u64().unwrap_or(0) as usize;
    let mut t = Table::new(
        "NUMA fabric: CPU node -> memory node",
        &["path", "dist", "read", "write", "memcpy", "lat", "kind"],
    )
    .right(&[1, 2, 3, 4, 5]);
    for c in 0..n {
        for m in 0..n {
            let gb =
                |k: &str| cell(&d[k], c, m).map_or_else(|| "-".into(), |x| format!("{x:.1} GB/s"));
            t.push(vec![
                Cell::plain(format!("N{c}->N{m}")),
                Cell::plain(d["distance"][c][m].to_string()),
                Cell::plain(gb("read_gbps")),
                Cell::plain(gb("write_gbps")),
                Cell::plain(gb("copy_gbps")),
                Cell::plain(
                    cell(&d["latency_us"], c, m)
                        .map_or_else(|| "-".into(), |x| format!("{x:.3} us")),
                ),
                Cell::plain(if c == m { "local" } else { "remote" }),
            ]);
        }
    }
    let mut out = t.render(false);
    out.push(
        "GB/s = bytes x passes / slowest thread / 1e9; lat = one dependent read, random cycle (docs/fabric.md)"
            .into(),
    );
    out.push(String::new());
    out
}

/// The report of an `ok` block.
pub(super) fn report(v: &FabricBlock, detail: bool, width: usize) -> Vec<String> {
    let d = v.data();
    let mut out = Vec::new();
    if !detail {
        out.extend(card("AMD CPU Fabric", &main_card(v), width));
        out.extend(pair_table(d));
        out.push("use --amd-fabric-detail for the matrices".into());
        out.push(String::new());
        return out;
    }
    let m = main_card(v);
    out.extend(card("AMD CPU Fabric", &m[..2.min(m.len())], width));
    out.extend(card("xGMI Links", &m[m.len().saturating_sub(3)..], width));
    out.extend(card(
        "Bandwidth",
        &[
            triple("remote read", &remote(&d["read_gbps"]), "GB/s", 1),
            triple("remote write", &remote(&d["write_gbps"]), "GB/s", 1),
            triple("remote memcpy", &remote(&d["copy_gbps"]), "GB/s", 1),
        ],
        width,
    ));
    out.extend(card(
        "Latency",
        &[triple("remote latency", &remote(&d["latency_us"]), "us", 3)],
        width,
    ));
    out.extend(matrix(
        "NUMA distance",
        "CPU \\ Mem",
        "N",
        &d["distance"],
        0,
        None,
    ));
    out.extend(matrix(
        "CPU read bandwidth GB/s",
        "CPU \\ Mem",
        "N",
        &d["read_gbps"],
        1,
        None,
    ));
    out.extend(matrix(
        "CPU write bandwidth GB/s",
        "CPU \\ Mem",
        "N",
        &d["write_gbps"],
        1,
        None,
    ));
    out.extend(matrix(
        "CPU memcpy bandwidth GB/s",
        "CPU \\ Mem",
        "N",
        &d["copy_gbps"],
        1,
        None,
    ));
    out.extend(matrix(
        "Dependent pointer-chase latency us",
        "CPU \\ Mem",
        "N",
        &d["latency_us"],
        3,
        None,
    ));
    out
}
