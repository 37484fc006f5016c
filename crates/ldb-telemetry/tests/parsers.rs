//! Core parsers on recorded-style fixtures, and the file-reading side of the
//! P2P check and hwmon.

use ldb_core::hardware::smi::{merge_dmon, parse_dmon, parse_inventory, parse_sample_query};
use ldb_core::hardware::{HardwareSnapshot, ThrottleReason, summarize};
use ldb_telemetry::cpu::read_hwmon_temps;
use ldb_telemetry::diagnostics::check_p2p;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read(rel: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(fixture(rel)).unwrap_or_default()).into_owned()
}

#[test]
fn four_gpu_query_and_dmon() {
    let mut q = parse_sample_query(&read("smi/query_4gpu.csv"));
    assert!(q.problems.is_empty(), "{:?}", q.problems);
    assert_eq!(q.rows.len(), 4);
    let g0 = &q.rows[0];
    assert_eq!(
        (g0.temp_c, g0.util_pct, g0.mem_util_pct),
        (Some(45.0), Some(99.0), Some(62.0))
    );
    assert_eq!((g0.power_w, g0.power_limit_w), (Some(155.2), Some(300.0)));
    assert_eq!(
        (g0.sm_clock_mhz, g0.mem_clock_mhz),
        (Some(2430.0), Some(12001.0))
    );
    assert_eq!((g0.pcie_gen, g0.pcie_width), (Some(1), Some(16)));
    assert_eq!(g0.throttle_reasons, Some(vec![ThrottleReason::SwPowerCap]));
    let d = parse_dmon(&read("smi/dmon_4gpu.txt"));
    assert_eq!(d.rows.len(), 4);
    merge_dmon(&mut q.rows, &d.rows);
    assert_eq!(
        (q.rows[2].pcie_rx_mb_s, q.rows[2].pcie_tx_mb_s),
        (Some(635.0), Some(570.0))
    );
    // Same numbers as the reference result's first cell.
    let snap = |t| HardwareSnapshot {
        t_s: t,
        gpus: q.rows.clone(),
        ..HardwareSnapshot::default()
    };
    let s = summarize(&[snap(0.0), snap(2.0)]);
    assert_eq!(s.gpu_util_avg_pct, Some(49.5));
    assert_eq!(s.mem_util_avg_pct, Some(26.75));
    assert_eq!(s.temp_avg_c, Some(44.25));
    assert_eq!(s.power_total_avg_w, Some(619.0));
    assert_eq!(s.power_limit_total_w, Some(1200.0));
    assert_eq!(s.vram_used_avg_mb, Some(189_604.0));
    assert_eq!(s.vram_total_mb, Some(391_548.0));
    assert_eq!(s.vram_used_avg_pct, Some(48.42));
    assert_eq!(s.pcie_rx_avg_mb_s, Some(2535.0));
    assert_eq!(s.energy_joules, Some(1238.0));
}

#[test]
fn eight_gpu_query_with_na_fields() {
    let q = parse_sample_query(&read("smi/query_8gpu_na.csv"));
    assert_eq!(q.rows.len(), 8);
    assert_eq!(q.problems.len(), 1, "the lost-GPU line: {:?}", q.problems);
    let g1 = &q.rows[1];
    assert_eq!(
        (g1.temp_c, g1.util_pct, g1.power_w, g1.power_limit_w),
        (None, None, None, None)
    );
    assert_eq!(g1.throttle_reasons, None);
    assert_eq!((q.rows[2].pcie_gen, q.rows[2].pcie_width), (None, None));
    assert_eq!(
        q.rows[4].throttle_reasons,
        Some(vec![
            ThrottleReason::SwPowerCap,
            ThrottleReason::SwThermalSlowdown
        ])
    );
    let s = summarize(&[HardwareSnapshot {
        t_s: 0.0,
        gpus: q.rows.clone(),
        ..HardwareSnapshot::default()
    }]);
    // N/A values are left out, not counted as zero.
    assert_eq!(s.gpu_util_avg_pct, Some(85.71));
    assert_eq!(s.power_total_avg_w, Some(3097.17));
    assert_eq!(s.power_limit_total_w, Some(4900.0));
    assert_eq!(s.gpu_count, 8);
    let d = parse_dmon(&read("smi/dmon_na.txt"));
    assert_eq!(d.rows.len(), 2);
    assert_eq!(d.rows[0].rx_mb_s, None);
    assert_eq!(d.rows[1].rx_mb_s, Some(12.0));
    assert_eq!(d.problems.len(), 1);
}

#[test]
fn garbage_yields_no_rows_and_reasons() {
    for f in ["smi/query_garbage.txt", "smi/query_binary.txt"] {
        let q = parse_sample_query(&read(f));
        assert!(q.rows.is_empty(), "{f}");
        assert!(!q.problems.is_empty(), "{f}");
    }
    assert!(parse_dmon(&read("smi/query_binary.txt")).rows.is_empty());
    assert!(
        parse_inventory(&read("smi/query_garbage.txt"))
            .rows
            .is_empty()
    );
}

#[test]
fn inventory_from_the_reference_host() {
    let inv = parse_inventory(&read("smi/inventory_4gpu.csv"));
    assert_eq!(inv.rows.len(), 4);
    assert_eq!(
        inv.rows[1].name,
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    );
    assert_eq!(inv.rows[3].pci_bus_id, "00000000:C1:00.0");
    assert_eq!(inv.rows[0].driver_version, "610.57.04");
}

#[test]
fn p2p_check_on_params_fixtures() {
    let conf = fixture("modprobe/nvidia-p2p-override.conf");
    let p = check_p2p(&fixture("params/effective.txt"), &conf);
    assert!(p.effective && p.configured, "{p:?}");
    assert_eq!(p.runtime["DmaRemapPeerMmio"], "1");

    let p = check_p2p(&fixture("params/missing.txt"), &conf);
    assert!(!p.effective && p.configured && p.params_available);
    assert_eq!(p.missing, ["ForceP2P", "RMForceP2PType", "RMPcieP2PType"]);
    // Same-named module parameters are used when RegistryDwords lacks a key.
    assert_eq!(p.mismatched["EnableResizableBar"]["actual"], "0");

    let p = check_p2p(
        &fixture("params/mismatched.txt"),
        &fixture("modprobe/absent.conf"),
    );
    assert!(!p.effective && !p.configured && !p.modprobe_available);
    assert!(p.missing.is_empty());
    let keys: Vec<&String> = p.mismatched.keys().collect();
    assert_eq!(
        keys,
        ["ForceP2P", "RMPcieP2PType", "GrdmaPciTopoCheckOverride"]
    );
    assert!(
        p.summary_line()
            .starts_with("not effective: missing=none; mismatched=ForceP2P,")
    );

    let p = check_p2p(&fixture("params/garbled.bin"), &conf);
    assert!(!p.effective && p.params_error.is_some());
    let p = check_p2p(&fixture("params/absent"), &conf);
    assert!(!p.params_available);
    assert!(
        p.summary_line().starts_with("unknown: "),
        "{}",
        p.summary_line()
    );
}

#[test]
fn hwmon_fixture_temperatures() {
    let t = read_hwmon_temps(&fixture("hwmon"));
    let got: Vec<(&str, f64)> = t.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    // Core temps, NVMe, Tccd and the unparsable chip are skipped.
    assert_eq!(got, [("CPU0", 67.5), ("CPU1", 66.0), ("TCTL", 55.125)]);
}
