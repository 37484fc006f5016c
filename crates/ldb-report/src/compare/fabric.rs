//! Comparing the fabric blocks of two results (`amd_fabric`, `p2pmark`),
//! pair by pair: CPU read/write/copy GB/s and latency per (CPU node, memory
//! node), the bidirectional figures, GPU copy GB/s per (src, dst) and the
//! P2P summary. A change beyond the threshold in the bad direction (less
//! bandwidth, more latency) is a regression, as for cells. Only blocks that
//! are `ok` in both runs are compared; docs/compare.md.

use ldb_core::document::{FabricBlock, FabricStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One compared number.
#[derive(Debug, Clone, PartialEq)]
pub struct FabricRow {
    /// `cpu`, `gpu`.
    pub block: &'static str,
    /// `N0->N1`, `G0->G2`, `N0<->N1`, `summary`.
    pub path: String,
    /// `read GB/s`, `latency us`, …
    pub metric: &'static str,
    /// Base run's value.
    pub base: f64,
    /// New run's value.
    pub new: f64,
    /// (new − base) / base × 100.
    pub change_pct: f64,
    /// Beyond the threshold in the bad direction.
    pub regressed: bool,
}

fn ok(v: &FabricBlock) -> bool {
    v.status == FabricStatus::Ok && v.data().is_object()
}

fn row(
    block: &'static str,
    path: String,
    metric: &'static str,
    base: f64,
    new: f64,
    higher_better: bool,
    threshold: f64,
) -> Option<FabricRow> {
    if !(base.is_finite() && new.is_finite()) || base <= 0.0 {
        return None;
    }
    let change_pct = (new - base) / base * 100.0;
    let regressed = if higher_better {
        change_pct < -threshold
    } else {
        change_pct > threshold
    };
    Some(FabricRow {
        block,
        path,
        metric,
        base,
        new,
        change_pct,
        regressed,
    })
}

/// Square matrix `key` of both data objects, pair by pair.
fn matrix_rows(
    out: &mut Vec<FabricRow>,
    (block, prefix): (&'static str, &str),
    (b, n): (&Value, &Value),
    (key, metric, higher_better): (&str, &'static str, bool),
    threshold: f64,
) {
    let size = b[key]
        .as_array()
        .map_or(0, Vec::len)
        .min(n[key].as_array().map_or(0, Vec::len));
    for i in 0..size {
        for j in 0..size {
            let (x, y) = (b[key][i][j].as_f64(), n[key][i][j].as_f64());
            if let (Some(x), Some(y)) = (x, y) {
                let path = format!("{prefix}{i}->{prefix}{j}");
                out.extend(row(block, path, metric, x, y, higher_better, threshold));
            }
        }
    }
}

/// Every comparable number of the two runs' fabric blocks.
pub fn compare_fabric(base: &Value, new: &Value, threshold: f64) -> Vec<FabricRow> {
    let mut out = Vec::new();
    let block = |doc: &Value, key: &str| FabricBlock::from_value(&doc[key]);
    let (bc, nc) = (block(base, "amd_fabric"), block(new, "amd_fabric"));
    if ok(&bc) && ok(&nc) {
        let (b, n) = (bc.data(), nc.data());
        for (key, metric, hb) in [
            ("read_gbps", "read GB/s", true),
            ("write_gbps", "write GB/s", true),
            ("copy_gbps", "memcpy GB/s", true),
            ("latency_us", "latency us", false),
        ] {
            matrix_rows(&mut out, ("cpu", "N"), (b, n), (key, metric, hb), threshold);
        }
        for (key, metric) in [
            ("bidirectional_remote_read_gbps", "bidir read GB/s"),
            ("bidirectional_remote_write_gbps", "bidir write GB/s"),
            ("bidirectional_remote_copy_gbps", "bidir memcpy GB/s"),
        ] {
            if let (Some(x), Some(y)) = (b[key].as_f64(), n[key].as_f64()) {
                out.extend(row("cpu", "N0<->N1".into(), metric, x, y, true, threshold));
            }
        }
    }
    let (bg, ng) = (block(base, "p2pmark"), block(new, "p2pmark"));
    if ok(&bg) && ok(&ng) {
        let (b, n) = (bg.data(), ng.data());
        matrix_rows(
            &mut out,
            ("gpu", "G"),
            (b, n),
            ("bandwidth_gbps", "copy GB/s", true),
            threshold,
        );
        let lat = (&b["latency"], &n["latency"]);
        matrix_rows(
            &mut out,
            ("gpu", "G"),
            lat,
            ("sequential_us", "read latency us", false),
            threshold,
        );
        for (obj, key, metric, hb) in [
            (
                "bandwidth_topology",
                "all_to_all_total_gbps",
                "all-to-all GB/s",
                true,
            ),
            (
                "bandwidth_topology",
                "pcie_link_score",
                "PCIe link score",
                true,
            ),
            (
                "bandwidth_topology",
                "dense_interconnect_score",
                "dense fabric score",
                true,
            ),
            (
                "latency",
                "effective_full_load_us",
                "full-load latency us",
                false,
            ),
        ] {
            if let (Some(x), Some(y)) = (b[obj][key].as_f64(), n[obj][key].as_f64()) {
                out.extend(row("gpu", "summary".into(), metric, x, y, hb, threshold));
            }
        }
    }
    out
}

/// `compare --format json` of fabric-only files: the threshold and, per
/// new run, its rows against the base (docs/compare.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricCompareOutput {
    /// `--threshold`, percent.
    pub threshold_pct: f64,
    /// One per new run, in command-line order.
    pub fabric: Vec<FabricRunOut>,
}

/// One new run's fabric rows against the base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricRunOut {
    /// The base file as given.
    pub base: String,
    /// The new file as given.
    pub new: String,
    /// The compared numbers.
    pub rows: Vec<FabricRowOut>,
}

/// A [`FabricRow`] as written (and read back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricRowOut {
    /// `cpu`, `gpu`.
    pub block: String,
    /// `N0->N1`, `G0->G2`, `N0<->N1`, `summary`.
    pub path: String,
    /// `read GB/s`, `latency us`, …
    pub metric: String,
    /// Base run's value.
    pub base: f64,
    /// New run's value.
    pub new: f64,
    /// (new − base) / base × 100.
    pub change_pct: f64,
    /// Beyond the threshold in the bad direction.
    pub regressed: bool,
}

impl From<&FabricRow> for FabricRowOut {
    fn from(r: &FabricRow) -> FabricRowOut {
        FabricRowOut {
            block: r.block.into(),
            path: r.path.clone(),
            metric: r.metric.into(),
            base: r.base,
            new: r.new,
            change_pct: r.change_pct,
            regressed: r.regressed,
        }
    }
}

/// The rows as a text table (empty when nothing was comparable).
pub fn render_fabric_text(rows: &[FabricRow], threshold: f64) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!("Fabric comparison (threshold {threshold}%)\n");
    s.push_str(&format!(
        "{:<6} {:<9} {:<20} {:>10} {:>10} {:>9}  \n",
        "block", "path", "metric", "base", "new", "change"
    ));
    for r in rows {
        s.push_str(&format!(
            "{:<6} {:<9} {:<20} {:>10.3} {:>10.3} {:>+8.1}%  {}\n",
            r.block,
            r.path,
            r.metric,
            r.base,
            r.new,
            r.change_pct,
            if r.regressed { "REGRESSION" } else { "" }
        ));
    }
    let n = rows.iter().filter(|r| r.regressed).count();
    s.push_str(&format!("{n} fabric regression(s)\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cpu(read: f64, lat: f64) -> Value {
        json!({"amd_fabric": {"status": "ok", "data": {
            "read_gbps": [[100.0, read], [read, 100.0]],
            "latency_us": [[0.1, lat], [lat, 0.1]],
            "bidirectional_remote_read_gbps": 150.0,
        }}, "p2pmark": {"status": "not_run"}})
    }

    #[test]
    fn less_bandwidth_and_more_latency_are_regressions_per_pair() {
        let rows = compare_fabric(&cpu(50.0, 0.2), &cpu(40.0, 0.25), 5.0);
        let bad: Vec<_> = rows
            .iter()
            .filter(|r| r.regressed)
            .map(|r| (r.path.as_str(), r.metric))
            .collect();
        assert_eq!(
            bad,
            vec![
                ("N0->N1", "read GB/s"),
                ("N1->N0", "read GB/s"),
                ("N0->N1", "latency us"),
                ("N1->N0", "latency us")
            ]
        );
        assert!(rows.iter().any(|r| r.path == "N0<->N1" && !r.regressed));
        // better is never a regression
        assert!(
            compare_fabric(&cpu(40.0, 0.25), &cpu(50.0, 0.2), 5.0)
                .iter()
                .all(|r| !r.regressed)
        );
        let t = render_fabric_text(&rows, 5.0);
        assert!(t.contains("4 fabric regression(s)"), "{t}");
    }

    #[test]
    fn blocks_not_ok_in_both_runs_are_not_compared() {
        let failed = json!({"amd_fabric": {"status": "timeout"}});
        assert!(compare_fabric(&cpu(50.0, 0.2), &failed, 5.0).is_empty());
        assert_eq!(render_fabric_text(&[], 5.0), "");
    }

    /// The typed output writes the bytes of the `json!` it replaced and
    /// reads back to itself.
    #[test]
    fn the_fabric_comparison_json_round_trips_in_its_layout() {
        use crate::export::{Exporter, Json};
        let rows = compare_fabric(&cpu(50.0, 0.2), &cpu(40.0, 0.25), 5.0);
        let out = FabricCompareOutput {
            threshold_pct: 5.0,
            fabric: vec![FabricRunOut {
                base: "a.json".into(),
                new: "b.json".into(),
                rows: rows.iter().map(FabricRowOut::from).collect(),
            }],
        };
        let before = json!({
            "threshold_pct": 5.0,
            "fabric": [json!({
                "base": "a.json",
                "new": "b.json",
                "rows": rows.iter().map(|r| json!({
                    "block": r.block, "path": r.path, "metric": r.metric, "base": r.base,
                    "new": r.new, "change_pct": r.change_pct, "regressed": r.regressed,
                })).collect::<Vec<_>>(),
            })],
        });
        let mut old = serde_json::to_string_pretty(&before).unwrap();
        old.push('\n');
        let bytes = Json.serialize(&out).unwrap();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), old);
        let back: FabricCompareOutput = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, out);
    }
}
