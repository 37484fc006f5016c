//! Topology parsing against a fake sysfs/procfs tree of a 2-socket, 8-node
//! machine (NPS4: 4 nodes per socket) with the AMD HSMP driver present, and
//! of a machine without NUMA information.

use std::path::Path;

use ldb_fabric::topology::{Roots, Topology};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// 8 nodes of 12 CPUs (+ their SMT siblings), distances 10 / 12 within a
/// socket / 32 across.
pub fn two_socket_eight_nodes(root: &Path) {
    for n in 0..8usize {
        let first = n * 12;
        let smt = 96 + n * 12;
        write(
            root,
            &format!("sys/devices/system/node/node{n}/cpulist"),
            &format!("{}-{},{}-{}\n", first, first + 11, smt, smt + 11),
        );
        let dist: Vec<String> = (0..8usize)
            .map(|m| {
                if m == n {
                    "10"
                } else if m / 4 == n / 4 {
                    "12"
                } else {
                    "32"
                }
                .to_string()
            })
            .collect();
        write(
            root,
            &format!("sys/devices/system/node/node{n}/distance"),
            &format!("{}\n", dist.join(" ")),
        );
    }
    write(root, "sys/devices/system/node/possible", "0-7\n");
    write(
        root,
        "sys/devices/platform/amd_hsmp/protocol_version",
        "5\n",
    );
    write(root, "sys/devices/platform/amd_hsmp/fclk_mhz", "2000\n");
    write(root, "sys/bus/event_source/devices/amd_df/type", "11\n");
    write(
        root,
        "proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n",
    );
}

fn roots(root: &Path) -> Roots {
    Roots {
        sys: root.join("sys"),
        proc: root.join("proc"),
    }
}

#[test]
fn a_two_socket_eight_node_tree_is_read_in_full() {
    let dir = tempfile::tempdir().expect("tmp");
    two_socket_eight_nodes(dir.path());
    let t = Topology::read(&roots(dir.path()));
    assert_eq!(t.nodes.len(), 8);
    assert_eq!(t.nodes[3].cpus.len(), 24);
    assert_eq!(t.nodes[3].cpus[0], 36);
    assert_eq!(t.nodes[3].cpus[12], 132);
    assert_eq!(t.nodes[0].distance, vec![10, 12, 12, 12, 32, 32, 32, 32]);
    assert_eq!(t.nodes[5].distance[4], 12);
    assert_eq!(t.cpu_model, "AMD EPYC 9654 96-Core Processor");
    assert!(t.amd_df_pmu);
    let j = t.to_json();
    assert_eq!(j["hsmp"]["available"], true);
    assert_eq!(j["hsmp"]["protocol_version"], "5");
    assert_eq!(j["hsmp"]["fclk_mhz"], 2000.0);
    assert!(j["hsmp"]["mclk_mhz"].is_null(), "absent files are null");
    assert_eq!(j["node_distances"]["7"][0], 32);
    assert!(
        j["xgmi"]["expected_links"]
            .as_str()
            .unwrap_or("")
            .starts_with("3 or 4")
    );
}

#[test]
fn a_machine_without_numa_is_one_node_and_hsmp_is_labelled_absent() {
    let dir = tempfile::tempdir().expect("tmp");
    write(dir.path(), "sys/devices/system/cpu/online", "0-3\n");
    let t = Topology::read(&roots(dir.path()));
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].cpus, vec![0, 1, 2, 3]);
    assert_eq!(t.nodes[0].distance, vec![10]);
    assert_eq!(t.cpu_model, "unknown");
    let j = t.to_json();
    assert_eq!(j["hsmp"]["available"], false);
    assert_eq!(j["xgmi"]["expected_links"], "unknown");
    assert!(!t.amd_df_pmu);
}

#[test]
fn max_nodes_above_the_count_is_clamped_with_a_note() {
    let dir = tempfile::tempdir().expect("tmp");
    two_socket_eight_nodes(dir.path());
    let t = Topology::read(&roots(dir.path()));
    let s = ldb_fabric::CpuFabricSettings {
        max_nodes: 12,
        ..Default::default()
    };
    let p = ldb_fabric::cpu::plan(&s, &t);
    assert_eq!(p.nodes.len(), 8);
    assert!(
        p.notes[0].contains("above the 8 NUMA node(s)"),
        "{:?}",
        p.notes
    );
    assert_eq!(p.threads, 24, "auto threads = smallest node's CPUs");
    let p = ldb_fabric::cpu::plan(
        &ldb_fabric::CpuFabricSettings {
            max_nodes: 2,
            threads: 3,
            ..Default::default()
        },
        &t,
    );
    assert_eq!((p.nodes.len(), p.threads, p.notes.len()), (2, 3, 0));
}
