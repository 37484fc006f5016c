//! GPU peer-to-peer (`--p2pmark`) without a helper binary: a small
//! interface over the primitive measurements ([`P2pBackend`]), the pure
//! arithmetic that turns them into the reference's `data` object
//! ([`assemble`]), a fake machine that replays recorded per-pair figures
//! ([`fake`]), and the real back end ([`cuda::CudaDriver`]), which loads
//! the CUDA driver, NVRTC and NCCL at run time (nothing CUDA is linked at
//! build time; the binary runs where CUDA is absent).
//!
//! Status (docs/fabric.md): without the driver the result is `unavailable`
//! with the reason; with one GPU (or `--p2pmark-max-gpus 1`) it is
//! `unavailable` for peer-to-peer, with the one GPU's local copy bandwidth,
//! local pointer-chase latency and a 1 MiB allreduce of both kinds in
//! `single_gpu`. The GPU code paths have never run on real hardware.

pub mod assemble;
mod collective;
pub mod cuda;
pub mod fake;
mod machine;
pub mod plan;

use std::time::Instant;

use serde_json::{Value, json};

pub use assemble::Allreduce;
pub use cuda::CudaDriver;

use crate::settings::P2pSettings;
use ldb_core::document::FabricStatus;

/// What the P2P measurement needs from the machine. Pairs are (source or
/// reader GPU, destination or owner GPU).
pub trait P2pBackend {
    /// GPUs visible, or why none can be used (driver absent …).
    fn gpu_count(&self) -> Result<usize, String>;
    /// Can `a` access `b`'s memory directly?
    fn peer_access(&self, a: usize, b: usize) -> bool;
    /// One copy `src`→`dst` alone, GB/s (`src == dst`: a local copy).
    fn copy_gbps(&self, src: usize, dst: usize) -> Result<f64, String>;
    /// All `pairs` copying at once: GB/s of each, in order.
    fn concurrent_gbps(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String>;
    /// All `pairs` chasing pointers at once (reader, owner): µs per
    /// dependent read of each, in order.
    fn read_latency_us(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String>;
    /// One allreduce of `bytes` over all GPUs used, µs.
    fn allreduce_us(&self, kind: Allreduce, bytes: u64) -> Result<f64, String>;
    /// What the back end found: driver, GPUs, libraries (`null`: nothing
    /// to say, as for a fake).
    fn describe(&self) -> Value {
        Value::Null
    }
}

/// How a measurement that stopped at `--p2pmark-timeout` begins its
/// error text (the result's status is then `timeout`).
pub const TIMED_OUT: &str = "timed out: ";

/// GPUs used: all, or `--p2pmark-max-gpus`, at most 8 (the reference's cap).
pub fn gpus_used(visible: usize, max_gpus: u64) -> usize {
    let cap = match usize::try_from(max_gpus).unwrap_or(usize::MAX) {
        0 => visible,
        m => m.min(visible),
    };
    cap.min(8)
}

/// One GPU's own figures, when peer-to-peer is impossible: local copy
/// GB/s, local pointer-chase µs per read, and a 1 MiB allreduce of each
/// kind (over the one GPU: it shows the kernel and NCCL work). Each figure
/// is `null` with its reason in `errors` when it could not be measured.
fn single_gpu(backend: &dyn P2pBackend) -> Value {
    let mut errors = serde_json::Map::new();
    let mut keep = |key: &str, r: Result<f64, String>| match r {
        Ok(x) => json!((x * 1000.0).round() / 1000.0),
        Err(e) => {
            errors.insert(key.into(), json!(e));
            Value::Null
        }
    };
    let copy = keep("local_copy_gbps", backend.copy_gbps(0, 0));
    let lat = keep(
        "local_read_latency_us",
        backend.read_latency_us(&[(0, 0)]).and_then(|v| {
            v.first()
                .copied()
                .ok_or_else(|| "no latency measured".to_string())
        }),
    );
    let bytes = cuda::SINGLE_GPU_ALLREDUCE_BYTES;
    let custom = keep("custom_us", backend.allreduce_us(Allreduce::Custom, bytes));
    let nccl = keep("nccl_us", backend.allreduce_us(Allreduce::Nccl, bytes));
    json!({
        "gpu": 0,
        "local_copy_gbps": copy,
        "local_read_latency_us": lat,
        "allreduce": {"size_bytes": bytes, "custom_us": custom, "nccl_us": nccl},
        "errors": errors,
    })
}

/// The status of a measured run from its blocks' errors: `ok` when every
/// block asked for was measured or at least one was (the failures are in
/// `data.errors`), `timeout` when the run stopped at its limit, `error`
/// when nothing could be measured.
fn status_of(errors: &serde_json::Map<String, Value>, blocks_asked: usize) -> FabricStatus {
    let timed_out = errors
        .values()
        .any(|e| e.as_str().is_some_and(|t| t.starts_with(TIMED_OUT)));
    if timed_out {
        FabricStatus::Timeout
    } else if !errors.is_empty() && errors.len() >= blocks_asked {
        FabricStatus::Error
    } else {
        FabricStatus::Ok
    }
}

/// Run the P2P diagnostic on `backend`: the result object.
pub fn run_p2p(s: &P2pSettings, backend: &dyn P2pBackend) -> Value {
    let started = Instant::now();
    let elapsed = || (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    let mut v = json!({"binary": "native", "mode": s.mode});
    let visible = match backend.gpu_count() {
        Ok(n) => n,
        Err(e) => {
            v["status"] = json!(FabricStatus::Unavailable.as_str());
            v["reason"] = json!(e);
            return v;
        }
    };
    let used = gpus_used(visible, s.max_gpus);
    if used < 2 {
        v["status"] = json!(FabricStatus::Unavailable.as_str());
        v["reason"] = json!(format!(
            "peer-to-peer needs at least 2 GPUs; {visible} visible, {used} to be used"
        ));
        if visible >= 1 {
            v["single_gpu"] = single_gpu(backend);
            v["elapsed_seconds"] = json!(elapsed());
        }
    } else {
        match assemble::measure(s, backend, visible, used) {
            Ok(data) => {
                let none = serde_json::Map::new();
                let errors = data["errors"].as_object().unwrap_or(&none);
                let asked = if s.mode == "all" { 3 } else { 1 };
                let status = status_of(errors, asked);
                v["status"] = json!(status.as_str());
                if status != FabricStatus::Ok {
                    let text: Vec<String> = errors
                        .iter()
                        .map(|(k, e)| format!("{k}: {}", e.as_str().unwrap_or("")))
                        .collect();
                    v["error"] = json!(text.join("; "));
                }
                if status == FabricStatus::Timeout {
                    v["timeout_seconds"] = json!(s.timeout_s);
                }
                v["elapsed_seconds"] = json!(elapsed());
                v["data"] = data;
            }
            Err(e) => {
                v["status"] = json!(FabricStatus::Error.as_str());
                v["error"] = json!(e);
            }
        }
    }
    let about = backend.describe();
    if !about.is_null() {
        v["machine"] = about;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_or_a_second_gpu_the_status_says_why() {
        let s = P2pSettings::default();
        let one = fake::FakeMachine::pcie(1, 50.0, 100.0);
        let v = run_p2p(&s, &one);
        assert_eq!(v["status"], "unavailable");
        assert!(
            v["reason"]
                .as_str()
                .unwrap_or("")
                .contains("at least 2 GPUs"),
            "{v}"
        );
        let v = run_p2p(
            &P2pSettings { max_gpus: 1, ..s },
            &fake::FakeMachine::pcie(4, 50.0, 100.0),
        );
        assert!(
            v["reason"]
                .as_str()
                .unwrap_or("")
                .contains("4 visible, 1 to be used"),
            "{v}"
        );
    }

    #[test]
    fn the_gpu_cap_holds() {
        assert_eq!(gpus_used(12, 0), 8);
        assert_eq!(gpus_used(4, 2), 2);
        assert_eq!(gpus_used(2, 9), 2);
    }

    #[test]
    fn this_machine_never_crashes_the_real_back_end() {
        // CI has no GPU: the real back end must answer with a status.
        let s = P2pSettings::default();
        let v = run_p2p(&s, &CudaDriver::new(&s));
        let status = v["status"].as_str().unwrap_or("");
        if std::path::Path::new("/dev/nvidiactl").exists() {
            // a GPU machine: whatever it measured, it answered
            assert!(!status.is_empty(), "{v}");
            return;
        }
        assert_eq!(status, "unavailable", "{v}");
        let reason = v["reason"].as_str().unwrap_or("");
        assert!(
            reason.contains("the CUDA driver cannot be loaded") && reason.contains("libcuda"),
            "{v}"
        );
        assert!(v.get("single_gpu").is_none(), "{v}");
    }
}
