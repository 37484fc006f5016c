//! The P2P arithmetic against a fake machine whose answers are known: the
//! pair matrix and its summary, ring and staggered patterns, fan-out,
//! all-to-all, the two scores, the latency summaries and the allreduce
//! sweep, then the report rendered from the assembled result.

use ldb_fabric::P2pSettings;
use ldb_fabric::gpu::assemble::allreduce_sizes;
use ldb_fabric::gpu::fake::FakeMachine;
use ldb_fabric::gpu::{Allreduce, P2pBackend, run_p2p};
use ldb_fabric::settings::AllreduceSizes;
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn four_pcie_gpus_give_the_known_figures() {
    // links 50 GB/s, each GPU sends at most 100 GB/s in total
    let mut m = FakeMachine::pcie(4, 50.0, 100.0);
    m.access[2][3] = false;
    m.link[2][3] = 20.0;
    let v = run_p2p(&P2pSettings::default(), &m);
    assert_eq!(v["status"], "ok", "{v}");
    let d = &v["data"];
    assert_eq!(d["gpu_count"], 4);
    assert_eq!(d["peer_access"][2][3], 0);
    assert_eq!(d["peer_access"][3][3], 1);
    assert_eq!(f(&d["bandwidth_gbps"][0][0]), 1500.0);
    // 11 links at 50, one at 20
    let avg = (11.0 * 50.0 + 20.0) / 12.0;
    assert!((f(&d["bandwidth_summary"]["avg_offdiag_gbps"]) - avg).abs() < 1e-3);
    assert_eq!(f(&d["bandwidth_summary"]["min_offdiag_gbps"]), 20.0);
    let t = &d["bandwidth_topology"];
    // ring: 0→1, 1→2, 2→3 (20), 3→0; one stream per GPU, no sharing
    assert_eq!(
        t["ring"]["pair_gbps"],
        serde_json::json!([50.0, 50.0, 20.0, 50.0])
    );
    assert_eq!(f(&t["ring"]["total_gbps"]), 170.0);
    assert_eq!(t["staggered"].as_array().map(Vec::len), Some(3));
    assert_eq!(t["staggered"][1]["offset"], 2);
    // fan-out: 3 streams share 100 → 33.3 each, GPU 2's 20 GB/s link stays 20
    assert!((f(&t["single_writer_gbps"][0]) - 100.0).abs() < 1e-2);
    assert!((f(&t["single_writer_gbps"][2]) - (20.0 + 2.0 * 100.0 / 3.0)).abs() < 1e-2);
    // all-to-all per GPU: 3 × slowest stream; GPU 2 is held back by its 20
    assert!((f(&t["all_to_all_gpu_gbps"][0]) - 100.0).abs() < 1e-2);
    assert!((f(&t["all_to_all_gpu_gbps"][2]) - 60.0).abs() < 1e-2);
    let total = f(&t["all_to_all_total_gbps"]);
    assert!((total - 360.0).abs() < 1e-2);
    assert!((f(&t["pcie_link_score"]) - avg / 63.0).abs() < 1e-3);
    assert!((f(&t["dense_interconnect_score"]) - total / (avg * 4.0)).abs() < 1e-3);
    // latency: 2 µs alone; all readers on all peers: 3 readers per owner
    let l = &d["latency"];
    assert_eq!(f(&l["avg_sequential_us"]), 2.0);
    assert_eq!(f(&l["sequential_us"][1][1]), 0.0);
    assert!((f(&l["effective_full_load_us"]) - 2.4).abs() < 1e-9);
    assert!((f(&l["single_reader_all_peers_us"][0]) - 2.0).abs() < 1e-9);
    assert_eq!(l["staggered_avg_us"].as_array().map(Vec::len), Some(3));
    // allreduce: custom wins 256 B, NCCL wins 1 MiB
    let ar = d["allreduce"].as_array().expect("sweep");
    assert_eq!(ar.len(), 16);
    assert_eq!(ar[0]["size_bytes"], 256);
    assert_eq!(ar[0]["winner"], "custom");
    assert_eq!(ar[15]["size_bytes"], 1 << 20);
    assert_eq!(ar[15]["winner"], "nccl");
    let (cu, nc) = (f(&ar[15]["custom_us"]), f(&ar[15]["nccl_us"]));
    assert!((f(&ar[15]["ratio"]) - cu / nc).abs() < 1e-3);
    let bus = (1u64 << 20) as f64 * 1.5 / (nc * 1e-6) / 1e9;
    assert!((f(&ar[15]["best_bus_bw_gbps"]) - bus).abs() < 1e-2);
}

#[test]
fn the_mode_limits_what_is_measured_and_sizes_follow_the_flag() {
    let m = FakeMachine::pcie(2, 50.0, 100.0);
    let s = P2pSettings {
        mode: "latency".into(),
        ..Default::default()
    };
    let v = run_p2p(&s, &m);
    assert_eq!(v["data"]["bandwidth_gbps"], serde_json::json!([]));
    assert_eq!(v["data"]["allreduce"], serde_json::json!([]));
    assert!(v["data"]["latency"]["sequential_us"].is_array());
    assert_eq!(
        allreduce_sizes(&AllreduceSizes::Mib(vec![1, 4])),
        vec![1 << 20, 4 << 20]
    );
    let full = allreduce_sizes(&AllreduceSizes::Full);
    assert!(full.contains(&(48 << 10)) && full.windows(2).all(|w| w[0] < w[1]));
}

/// The fake machine with some primitives failing, as a real machine's do
/// (no peer path for remote reads, NCCL absent, the run's time limit).
struct Failing {
    inner: FakeMachine,
    latency: Option<&'static str>,
    allreduce: Option<&'static str>,
    copies: Option<&'static str>,
}

impl P2pBackend for Failing {
    fn gpu_count(&self) -> Result<usize, String> {
        self.inner.gpu_count()
    }
    fn peer_access(&self, a: usize, b: usize) -> bool {
        self.inner.peer_access(a, b)
    }
    fn copy_gbps(&self, s: usize, d: usize) -> Result<f64, String> {
        match self.copies {
            Some(e) => Err(e.into()),
            None => self.inner.copy_gbps(s, d),
        }
    }
    fn concurrent_gbps(&self, p: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        match self.copies {
            Some(e) => Err(e.into()),
            None => self.inner.concurrent_gbps(p),
        }
    }
    fn read_latency_us(&self, p: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        match self.latency {
            Some(e) => Err(e.into()),
            None => self.inner.read_latency_us(p),
        }
    }
    fn allreduce_us(&self, k: Allreduce, b: u64) -> Result<f64, String> {
        match self.allreduce {
            Some(e) => Err(e.into()),
            None => self.inner.allreduce_us(k, b),
        }
    }
}

#[test]
fn a_failing_block_keeps_the_others_and_says_why() {
    let m = Failing {
        inner: FakeMachine::pcie(2, 50.0, 100.0),
        latency: Some("GPU 0 cannot read GPU 1's memory directly (no peer access)"),
        allreduce: Some("NCCL cannot be loaded (libnccl.so.2: cannot open shared object file)"),
        copies: None,
    };
    let v = run_p2p(&P2pSettings::default(), &m);
    assert_eq!(v["status"], "ok", "{v}");
    let d = &v["data"];
    assert_eq!(f(&d["bandwidth_gbps"][0][1]), 50.0);
    assert_eq!(d["latency"], serde_json::json!({}));
    assert_eq!(d["allreduce"], serde_json::json!([]));
    assert!(
        d["errors"]["latency"]
            .as_str()
            .unwrap_or("")
            .contains("no peer access")
    );
    assert!(
        d["errors"]["allreduce"]
            .as_str()
            .unwrap_or("")
            .contains("libnccl")
    );
    // nothing measured: error, with every reason in one line
    let m = Failing {
        copies: Some("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"),
        ..m
    };
    let v = run_p2p(&P2pSettings::default(), &m);
    assert_eq!(v["status"], "error", "{v}");
    let e = v["error"].as_str().unwrap_or("");
    assert!(
        e.starts_with("bandwidth: cuMemAlloc_v2") && e.contains("; latency: "),
        "{e}"
    );
    assert!(!e.contains('\n'));
    // the run's time limit: timeout, with the limit
    let m = Failing {
        copies: None,
        latency: Some("timed out: the native P2P run passed --p2pmark-timeout (300 s)"),
        ..m
    };
    let v = run_p2p(&P2pSettings::default(), &m);
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["timeout_seconds"], 300.0);
}

#[test]
fn one_gpu_is_unavailable_for_p2p_but_measures_itself() {
    let v = run_p2p(&P2pSettings::default(), &FakeMachine::pcie(1, 50.0, 100.0));
    assert_eq!(v["status"], "unavailable", "{v}");
    let one = &v["single_gpu"];
    assert_eq!(f(&one["local_copy_gbps"]), 1500.0);
    assert_eq!(f(&one["local_read_latency_us"]), 0.5);
    // the fake's costs at 1 MiB: 6 µs + 2^20 B / 40 GB/s, 14 µs + … / 60
    assert!((f(&one["allreduce"]["custom_us"]) - (6.0 + 1048576.0 / 40e3)).abs() < 1e-3);
    assert!((f(&one["allreduce"]["nccl_us"]) - (14.0 + 1048576.0 / 60e3)).abs() < 1e-3);
    assert_eq!(one["errors"], serde_json::json!({}));
    // a failing primitive is null with its reason
    let m = Failing {
        inner: FakeMachine::pcie(1, 50.0, 100.0),
        latency: None,
        allreduce: Some("NCCL cannot be loaded (libnccl.so.2)"),
        copies: None,
    };
    let v = run_p2p(&P2pSettings::default(), &m);
    assert!(v["single_gpu"]["allreduce"]["nccl_us"].is_null(), "{v}");
    assert!(v["single_gpu"]["errors"]["nccl_us"].is_string(), "{v}");
    assert_eq!(f(&v["single_gpu"]["local_copy_gbps"]), 1500.0);
}
