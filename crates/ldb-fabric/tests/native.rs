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
