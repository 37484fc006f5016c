//! The native CPU fabric run on this machine with small sizes: the result's
//! structure, positive finite values, and the pointer chase's physics (a
//! working set far above the caches is slower per read than one in L1/L2).

use ldb_fabric::cpu::{kernels, run_native};
use ldb_fabric::topology::Roots;
use serde_json::Value;

fn positive_finite(v: &Value) -> bool {
    v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0)
}

#[test]
fn a_small_run_has_the_reference_structure_and_sane_values() {
    let s = ldb_fabric::CpuFabricSettings {
        size_mb: 4,
        latency_mb: 1,
        iters: 2,
        warmup: 1,
        threads: 1,
        latency_iters: 20_000,
        max_nodes: 2,
        ..Default::default()
    };
    let v = run_native(&s, &Roots::default());
    assert_eq!(v["status"], "ok", "{v}");
    let d = &v["data"];
    let n = d["numa_nodes"].as_u64().expect("numa_nodes") as usize;
    assert!((1..=2).contains(&n));
    for key in [
        "read_gbps",
        "write_gbps",
        "copy_gbps",
        "latency_us",
        "distance",
    ] {
        let m = d[key].as_array().expect(key);
        assert_eq!(m.len(), n, "{key}");
        for row in m {
            let row = row.as_array().expect("row");
            assert_eq!(row.len(), n, "{key}");
            assert!(row.iter().all(positive_finite), "{key}: {row:?}");
        }
    }
    assert_eq!(d["threads_per_node"], 1);
    assert_eq!(d["node_cpus"].as_array().map(Vec::len), Some(n));
    if n >= 2 {
        assert!(positive_finite(&d["bidirectional_remote_read_gbps"]));
    } else {
        assert!(d["bidirectional_remote_read_gbps"].is_null());
    }
    assert!(v["topology"]["cpu_model"].is_string());
}

#[test]
fn a_working_set_far_above_the_caches_is_slower_per_read() {
    // 16 KiB fits in any L1; 256 MiB exceeds any last-level cache in CI.
    let small = kernels::chase_ring(16 << 10, 1);
    let large = kernels::chase_ring(256 << 20, 1);
    let reads = 500_000;
    let per_read = |ring: &[u64]| {
        // best of three: a loaded machine can only make a lap slower
        (0..3)
            .map(|_| kernels::chase(ring, reads).as_secs_f64() / reads as f64)
            .fold(f64::INFINITY, f64::min)
    };
    let (s, l) = (per_read(&small), per_read(&large));
    assert!(l > 2.0 * s, "large {l:e} s/read vs small {s:e} s/read");
}

/// A fake two-node tree over this machine's CPUs: node 0 = CPU 0, node 1 =
/// CPU 1 (or CPU 0 again on a one-CPU machine). The physics stay one
/// node's, but every multi-node code path runs: remote pairs, placement by
/// a thread pinned elsewhere, the bidirectional run.
fn two_fake_nodes(root: &std::path::Path) -> Roots {
    let second = if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        1
    } else {
        0
    };
    for (n, cpu, dist) in [(0, 0, "10 21"), (1, second, "21 10")] {
        let dir = root.join(format!("sys/devices/system/node/node{n}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("cpulist"), format!("{cpu}\n")).expect("cpulist");
        std::fs::write(dir.join("distance"), format!("{dist}\n")).expect("distance");
    }
    Roots {
        sys: root.join("sys"),
        proc: root.join("proc"),
    }
}

fn small() -> ldb_fabric::CpuFabricSettings {
    ldb_fabric::CpuFabricSettings {
        size_mb: 2,
        latency_mb: 1,
        iters: 1,
        warmup: 0,
        latency_iters: 10_000,
        ..Default::default()
    }
}

#[test]
fn two_nodes_fill_every_pair_and_the_bidirectional_figures() {
    let dir = tempfile::tempdir().expect("tmp");
    let v = run_native(&small(), &two_fake_nodes(dir.path()));
    assert_eq!(v["status"], "ok", "{v}");
    let d = &v["data"];
    assert_eq!(d["numa_nodes"], 2);
    assert_eq!(d["distance"], serde_json::json!([[10, 21], [21, 10]]));
    assert_eq!(d["threads_per_node"], 1, "auto = smallest node's CPU count");
    for key in ["read_gbps", "write_gbps", "copy_gbps", "latency_us"] {
        for c in 0..2 {
            for m in 0..2 {
                assert!(
                    positive_finite(&d[key][c][m]),
                    "{key}[{c}][{m}]: {}",
                    d[key]
                );
            }
        }
    }
    for key in [
        "bidirectional_remote_read_gbps",
        "bidirectional_remote_write_gbps",
        "bidirectional_remote_copy_gbps",
    ] {
        assert!(positive_finite(&d[key]), "{key}: {}", d[key]);
    }
    assert_eq!(v["topology"]["node_cpulists"]["0"], serde_json::json!([0]));
}

#[test]
fn a_run_past_its_timeout_says_so_and_keeps_the_shape() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = ldb_fabric::CpuFabricSettings {
        timeout_s: 1e-9,
        ..small()
    };
    let v = run_native(&s, &two_fake_nodes(dir.path()));
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["timeout_seconds"], 1e-9);
    // nothing reached: the matrices are there, full of nulls
    assert!(v["data"]["read_gbps"][1][1].is_null());
    assert!(v["data"]["bidirectional_remote_read_gbps"].is_null());
}

#[test]
fn a_memory_only_node_gets_null_pairs_and_a_note() {
    let dir = tempfile::tempdir().expect("tmp");
    let roots = two_fake_nodes(dir.path());
    std::fs::write(roots.sys.join("devices/system/node/node1/cpulist"), "\n").expect("cpulist");
    let v = run_native(&small(), &roots);
    assert_eq!(v["status"], "ok", "{v}");
    let d = &v["data"];
    assert!(positive_finite(&d["read_gbps"][0][0]));
    for (c, m) in [(0, 1), (1, 0), (1, 1)] {
        assert!(d["read_gbps"][c][m].is_null(), "[{c}][{m}]");
    }
    assert!(d["bidirectional_remote_read_gbps"].is_null());
    let notes = v["notes"].to_string();
    assert!(notes.contains("node 1 has no CPUs"), "{notes}");
}
