//! Snapshots of the fabric console reports, rendered from result blocks in
//! the recorded shape: a 2-socket / 8-node EPYC machine (`amd_fabric`) and
//! four PCIe GPUs with one peer path missing (`p2pmark`). The fixture
//! numbers are synthetic (tests/fabric/README.md), not from real hardware.

use ldb_core::document::FabricBlock;
use ldb_report::text::fabric::FabricTextOptions;
use serde_json::{Value, json};

/// The report of two blocks as read from a file.
fn render(p2pmark: &Value, amd_fabric: &Value, o: &FabricTextOptions) -> String {
    let (p, c) = (
        FabricBlock::from_value(p2pmark),
        FabricBlock::from_value(amd_fabric),
    );
    ldb_report::text::fabric::render(&p, &c, o)
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fabric/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON")
}

fn opts(detail: bool) -> FabricTextOptions {
    FabricTextOptions {
        width: 120,
        p2p_detail: detail,
        cpu_detail: detail,
    }
}

fn not_run() -> Value {
    json!({"status": "not_run"})
}

#[test]
fn cpu_fabric_compact() {
    let r = render(&not_run(), &fixture("amd_fabric_2s8n.json"), &opts(false));
    assert!(r.contains("local=10, remote=12/32"), "{r}");
    assert!(r.contains("N7->N0"));
    insta::assert_snapshot!(r);
}

#[test]
fn cpu_fabric_detail() {
    insta::assert_snapshot!(render(
        &not_run(),
        &fixture("amd_fabric_2s8n.json"),
        &opts(true)
    ));
}

#[test]
fn p2p_compact() {
    let r = render(&fixture("p2pmark_4gpu.json"), &not_run(), &opts(false));
    assert!(r.contains("11/12 enabled; missing G2->G3"), "{r}");
    assert!(r.contains("CUDA peer access issues"));
    insta::assert_snapshot!(r);
}

#[test]
fn p2p_detail() {
    insta::assert_snapshot!(render(
        &fixture("p2pmark_4gpu.json"),
        &not_run(),
        &opts(true)
    ));
}

#[test]
fn failures_are_panels_with_their_reason() {
    let p2p = json!({"status": "unavailable", "binary": "native", "mode": "all",
        "reason": "the CUDA driver cannot be loaded (libcuda.so.1: cannot open shared object file: No such file or directory)"});
    let cpu = json!({"status": "missing_binary", "binary": "/x/llm_amd_fabric",
        "error": "amd_fabric binary not found or not executable: /x/llm_amd_fabric",
        "suggestion": "build it with: make -C tools/amd_fabric"});
    let r = render(&p2p, &cpu, &opts(false));
    assert!(
        r.contains("No such file or directory"),
        "long reasons wrap, not cut: {r}"
    );
    insta::assert_snapshot!(r);
    assert_eq!(render(&not_run(), &not_run(), &opts(false)), "");
}

#[test]
fn the_report_reads_what_the_p2p_arithmetic_assembles() {
    use ldb_fabric::gpu::fake::FakeMachine;
    let mut m = FakeMachine::pcie(4, 50.0, 100.0);
    m.access[2][3] = false;
    let v = ldb_fabric::gpu::run_p2p(&ldb_fabric::P2pSettings::default(), &m);
    let r = render(&v, &not_run(), &opts(false));
    assert!(r.contains("GPUs: 4 used / 4 visible, mode all"), "{r}");
    assert!(r.contains("11/12 enabled; missing G2->G3"), "{r}");
    assert!(r.contains("ring avg: 50.0 GB/s"), "{r}");
    assert!(r.contains("all-to-all total: 400.0 GB/s"), "{r}");
    assert!(r.contains("Allreduce: custom PCIe vs NCCL"), "{r}");
    assert!(r.contains("│ 256 B "), "{r}");
}

#[test]
fn the_built_in_back_ends_extras_are_shown() {
    // one GPU: unavailable for P2P, its own figures and what was found
    let one = json!({
        "status": "unavailable",
        "binary": "native",
        "mode": "all",
        "reason": "peer-to-peer needs at least 2 GPUs; 1 visible, 1 to be used",
        "single_gpu": {
            "gpu": 0,
            "local_copy_gbps": 1612.5,
            "local_read_latency_us": 0.712,
            "allreduce": {"size_bytes": 1048576, "custom_us": 9.5, "nccl_us": null},
            "errors": {"nccl_us": "NCCL cannot be loaded (libnccl.so.2: cannot open shared object file)"}
        },
        "machine": {
            "cuda_driver": "libcuda.so.1 (CUDA 12.4)",
            "gpus": ["GPU 0: NVIDIA H200 (sm_90, 132 SMs)"],
            "nvrtc": "libnvrtc.so.12 (12.4)",
            "nccl": "not loaded"
        }
    });
    let r = render(&one, &not_run(), &opts(false));
    assert!(r.contains("status: unavailable"), "{r}");
    assert!(
        r.contains("GPU 0: local copy 1612.5 GB/s, local read 0.712 us"),
        "{r}"
    );
    assert!(
        r.contains("allreduce 1 MiB on one GPU: one-shot kernel 9.5 us, NCCL - us"),
        "{r}"
    );
    assert!(r.contains("nccl_us: NCCL cannot be loaded"), "{r}");
    assert!(r.contains("GPU 0: NVIDIA H200 (sm_90, 132 SMs)"), "{r}");
    // a measured run with one block missing names it under the report
    let mut v = fixture("p2pmark_4gpu.json");
    v["data"]["errors"] =
        json!({"latency": "GPU 2 cannot read GPU 3's memory directly (no peer access)"});
    let r = render(&v, &not_run(), &opts(false));
    assert!(r.contains("P2P memcpy bandwidth GB/s"), "{r}");
    assert!(
        r.contains("not measured: latency: GPU 2 cannot read GPU 3's memory"),
        "{r}"
    );
    // a helper's result has none of these: no extra card
    let r = render(&fixture("p2pmark_4gpu.json"), &not_run(), &opts(false));
    assert!(!r.contains("P2P built-in back end"), "{r}");
}
