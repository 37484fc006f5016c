//! PCIe topology facts against sysfs trees laid out as two known machines
//! (written here from their published layouts, not recorded): an H100 pair behind a
//! PLX switch (ACS off on the switch ports, one GPU's link idling at
//! 2.5 GT/s) and an RTX 4090 workstation (GPUs on root ports, ACS on, one
//! link at x8).

use ldb_telemetry::pcie_topology::{PcieConfig, collect, parse_lspci_acs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pcie")
        .join(rel)
}

fn facts(machine: &str, lspci: &str) -> Value {
    collect(&PcieConfig {
        sysfs_root: fixture(&format!("{machine}/sys")),
        lspci: fixture(&format!("{machine}/{lspci}")),
        timeout: Duration::from_secs(5),
    })
}

#[test]
fn h100_behind_a_plx_switch_keeps_p2p_in_the_switch() {
    let v = facts("h100-plx", "lspci");
    assert_eq!(v["status"], "available");
    assert_eq!(v["acs_source"], "lspci -vvv ACSCtl");
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    let g0 = &gpus[0];
    assert_eq!(g0["bus_id"], "0000:03:00.0");
    assert_eq!(g0["current_link_speed"], "32.0 GT/s PCIe");
    assert_eq!(g0["link_below_capability"], false);
    assert_eq!(
        g0["upstream_bridges"],
        serde_json::json!(["0000:00:01.0", "0000:01:00.0", "0000:02:00.0"])
    );
    assert_eq!(g0["root_port_acs_redirect"], true);
    assert_eq!(g0["p2p_through_root_complex"], false);
    let g1 = &gpus[1];
    assert_eq!(g1["current_link_speed"], "2.5 GT/s PCIe");
    assert_eq!(g1["max_link_speed"], "32.0 GT/s PCIe");
    assert_eq!(g1["link_below_capability"], true);
}

#[test]
fn rtx_workstation_with_acs_on_routes_p2p_through_the_root_complex() {
    let v = facts("rtx-acs", "lspci");
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[1]["bus_id"], "0000:21:00.0");
    assert_eq!(gpus[1]["current_link_width"], "8");
    assert_eq!(gpus[1]["max_link_width"], "16");
    assert_eq!(gpus[1]["link_below_capability"], true);
    for g in gpus {
        assert_eq!(g["root_port_acs_redirect"], true);
        assert_eq!(g["p2p_through_root_complex"], true);
    }
}

#[test]
fn lspci_without_root_or_missing_says_why() {
    let v = facts("h100-plx", "lspci-denied");
    assert!(
        v["acs_source"].as_str().unwrap().contains("needs root"),
        "{v}"
    );
    assert!(v["gpus"][0]["p2p_through_root_complex"].is_null());
    assert!(v["gpus"][0]["current_link_speed"].is_string());
    let v = facts("h100-plx", "no-such-lspci");
    assert_eq!(v["acs_source"], "unavailable: lspci not found");
    let v = facts("absent", "lspci");
    assert_eq!(v["status"], "unavailable");
    assert!(v["reason"].as_str().unwrap().contains("not readable"));
}

#[test]
fn lspci_lines_without_a_domain_get_domain_zero() {
    let acs =
        parse_lspci_acs("00:01.1 PCI bridge: x\n\t\tACSCtl:\tSrcValid+ ReqRedir- CmpltRedir+\n");
    assert_eq!(acs.len(), 1);
    assert_eq!(acs[0].0, "0000:00:01.1");
    assert!(!acs[0].1.req_redir && acs[0].1.cmplt_redir);
}
