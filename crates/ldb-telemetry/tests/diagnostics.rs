//! Startup diagnostics with fixture files and fake `nvidia-smi` programs.

use ldb_core::redact::REDACTED;
use ldb_telemetry::{DiagnosticsConfig, collect_startup_diagnostics_with};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn config(fake: &str, params: &str) -> DiagnosticsConfig {
    DiagnosticsConfig {
        nvidia_smi: fixture(&format!("bin/{fake}")),
        params_path: fixture(params),
        modprobe_path: fixture("modprobe/nvidia-p2p-override.conf"),
        use_nvml: false,
        nvml_lib: None,
        command_timeout: Duration::from_millis(1500),
        topo_timeout: Duration::from_millis(1500),
        pcie: ldb_telemetry::pcie_topology::PcieConfig {
            sysfs_root: fixture("pcie/absent"),
            lspci: fixture("pcie/absent/lspci"),
            timeout: Duration::from_millis(1500),
        },
        env: Some(
            [
                ("PATH", "/usr/bin"),
                ("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz"),
                ("VLLM_API_KEY", "plain"),
                ("NCCL_P2P_LEVEL", "NVL"),
                ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
                ("OMP_NUM_THREADS", "8"),
                ("SGLANG_SECRET_SAUCE", "x"),
                ("VLLM_LOGGING_LEVEL", "Bearer abcdefghijkl"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ),
    }
}

fn args() -> Vec<(String, Value)> {
    vec![
        ("concurrency".to_string(), json!("1,2,4")),
        ("contexts".to_string(), json!("0,64k")),
        ("max_tokens".to_string(), json!(1024)),
        ("duration".to_string(), json!(10.0)),
        ("api_key".to_string(), json!("sk-live-0123456789abcdef")),
        ("auth_token_id".to_string(), json!(42)),
    ]
}

#[test]
fn full_diagnostics_on_a_fake_four_gpu_host() {
    let d = collect_startup_diagnostics_with(
        &config("nvidia-smi", "params/effective.txt"),
        &args(),
        "http://user:pw@127.0.0.1:5001",
    );
    let v = d.to_json();
    let keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "version",
            "server_url",
            "hostname",
            "uname",
            "env",
            "args",
            "nvidia_p2p_override",
            "p2pmark",
            "amd_fabric",
            "gpu_inventory",
            "gpu_inventory_source",
            "nvidia_smi_query",
            "nvidia_smi_topo",
            "pcie_topology"
        ]
    );
    // The fake host has no sysfs PCI tree: the fact says so.
    assert_eq!(v["pcie_topology"]["status"], "unavailable", "{v}");
    assert_eq!(v["server_url"], "http://<redacted>@127.0.0.1:5001");
    assert!(!d.hostname.is_empty() && !d.uname.is_empty());
    // Environment: only the five prefixes, secrets redacted.
    let env = &v["env"];
    assert_eq!(env.as_object().map(|m| m.len()), Some(6));
    assert_eq!(env["VLLM_API_KEY"], REDACTED);
    assert_eq!(env["SGLANG_SECRET_SAUCE"], REDACTED);
    assert_eq!(env["VLLM_LOGGING_LEVEL"], REDACTED);
    assert_eq!(env["NCCL_P2P_LEVEL"], "NVL");
    assert!(env.get("HF_TOKEN").is_none() && env.get("PATH").is_none());
    // Arguments keep their JSON types; secrets are redacted.
    assert_eq!(v["args"]["max_tokens"], 1024);
    assert_eq!(v["args"]["duration"], 10.0);
    assert_eq!(v["args"]["concurrency"], "1,2,4");
    assert_eq!(v["args"]["api_key"], REDACTED);
    assert_eq!(v["args"]["auth_token_id"], REDACTED);
    // GPUs and topology from the fake nvidia-smi.
    assert_eq!(d.gpus().len(), 4);
    assert_eq!(v["gpu_inventory_source"], "nvidia-smi");
    assert_eq!(v["nvidia_smi_query"]["returncode"], 0);
    assert!(
        v["nvidia_smi_query"]["cmd"][1]
            .as_str()
            .is_some_and(|s| s.starts_with("--query-gpu=index,name,"))
    );
    assert!(
        v["nvidia_smi_topo"]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("GPU0"))
    );
    assert_eq!(v["nvidia_p2p_override"]["effective"], true);
    assert_eq!(v["nvidia_p2p_override"]["configured"], true);
    assert!(d.nvidia_p2p_override.panel_lines()[0] == "Effective: yes");
}

#[test]
fn no_nvidia_smi_and_missing_p2p_values() {
    let d = collect_startup_diagnostics_with(
        &config("absent-nvidia-smi", "params/missing.txt"),
        &[],
        "http://h:1",
    );
    let v = d.to_json();
    assert_eq!(v["nvidia_smi_error"], "nvidia-smi not found");
    assert!(v.get("nvidia_smi_query").is_none() && v.get("nvidia_smi_topo").is_none());
    assert_eq!(v["gpu_inventory_source"], "none");
    assert_eq!(v["nvidia_p2p_override"]["effective"], false);
    assert_eq!(
        v["nvidia_p2p_override"]["missing"].as_array().map(Vec::len),
        Some(3)
    );
    assert!(
        d.nvidia_p2p_override
            .panel_lines()
            .iter()
            .any(|l| l.starts_with("options nvidia NVreg_RegistryDwords="))
    );
}

#[test]
fn hanging_nvidia_smi_stays_bounded() {
    let mut cfg = config("nvidia-smi-hang", "params/mismatched.txt");
    cfg.command_timeout = Duration::from_millis(300);
    cfg.topo_timeout = Duration::from_millis(300);
    let t = Instant::now();
    let d = collect_startup_diagnostics_with(&cfg, &args(), "http://h:1");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let q = d.nvidia_smi_query.clone().unwrap_or_default();
    assert!(q.timed_out && q.returncode == -1);
    assert_eq!(d.gpu_inventory_source.as_deref(), Some("none"));
    assert_eq!(d.to_json()["nvidia_smi_query"]["timed_out"], true);
    assert_eq!(d.nvidia_p2p_override.mismatched.len(), 3);
}
