//! GPU peer-to-peer (`--p2pmark`) without a helper binary: a small
//! interface over what the measurement needs from the machine, so that the
//! flow is tested with a fake that replays a recorded result, and the real
//! back end loads the CUDA driver at run time (nothing CUDA is linked at
//! build time; the binary runs where CUDA is absent).
//!
//! Status today (docs/fabric.md): the driver is probed at run time and a
//! machine without it, or with fewer than two GPUs, gets `unavailable` with
//! the reason. The native CUDA/NCCL measurement kernels are not written
//! yet; a machine with two or more GPUs is told to use `--p2pmark-bin`.

use std::time::Instant;

use serde_json::{Value, json};

use crate::settings::P2pSettings;
use crate::status::FabricStatus;

/// The CUDA driver's names, in the order the loader is asked.
pub const CUDA_DRIVER: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// What the P2P run needs from the machine.
pub trait P2pBackend {
    /// GPUs visible, or why none can be used (driver absent …).
    fn gpu_count(&self) -> Result<usize, String>;
    /// Run the measurement on `gpus` GPUs; the `data` object of the result
    /// (the reference's keys).
    fn measure(&self, s: &P2pSettings, gpus: usize) -> Result<Value, String>;
}

/// The real machine: the CUDA driver loaded at run time.
#[derive(Debug, Default)]
pub struct CudaDriver;

impl P2pBackend for CudaDriver {
    fn gpu_count(&self) -> Result<usize, String> {
        ldb_sys::probe_library(CUDA_DRIVER)
            .map_err(|e| format!("the CUDA driver cannot be loaded ({e})"))?;
        // Counting devices needs cuInit/cuDeviceGetCount through the loaded
        // library; until that binding exists, count the driver's device
        // nodes, which the NVIDIA driver creates one per GPU.
        let n = std::fs::read_dir("/dev")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|s| s.strip_prefix("nvidia"))
                    .is_some_and(|rest| {
                        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
                    })
            })
            .count();
        Ok(n)
    }

    fn measure(&self, _s: &P2pSettings, _gpus: usize) -> Result<Value, String> {
        Err(
            "the native CUDA/NCCL P2P measurement is not implemented in this build; \
             run a helper with --p2pmark-bin PATH"
                .into(),
        )
    }
}

/// Replays a recorded `data` object (tests, and reports of recorded runs).
#[derive(Debug, Clone)]
pub struct Replay {
    /// GPUs the recorded machine had.
    pub gpus: usize,
    /// The recorded `data`.
    pub data: Value,
}

impl P2pBackend for Replay {
    fn gpu_count(&self) -> Result<usize, String> {
        Ok(self.gpus)
    }

    fn measure(&self, _s: &P2pSettings, _gpus: usize) -> Result<Value, String> {
        Ok(self.data.clone())
    }
}

/// GPUs used: all, or `--p2pmark-max-gpus`, at most 8 (the reference's cap).
pub fn gpus_used(visible: usize, max_gpus: u64) -> usize {
    let cap = match usize::try_from(max_gpus).unwrap_or(usize::MAX) {
        0 => visible,
        m => m.min(visible),
    };
    cap.min(8)
}

/// Run the P2P diagnostic on `backend`: the result object.
pub fn run_p2p(s: &P2pSettings, backend: &dyn P2pBackend) -> Value {
    let started = Instant::now();
    let unavailable = |reason: String| {
        json!({
            "status": FabricStatus::Unavailable.as_str(),
            "binary": "native",
            "mode": s.mode,
            "reason": reason,
        })
    };
    let visible = match backend.gpu_count() {
        Ok(n) => n,
        Err(e) => return unavailable(e),
    };
    let used = gpus_used(visible, s.max_gpus);
    if used < 2 {
        return unavailable(format!(
            "peer-to-peer needs at least 2 GPUs; {visible} visible, {used} to be used"
        ));
    }
    match backend.measure(s, used) {
        Ok(data) => json!({
            "status": FabricStatus::Ok.as_str(),
            "binary": "native",
            "mode": s.mode,
            "elapsed_seconds": (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            "data": data,
        }),
        Err(e) => unavailable(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoDriver;
    impl P2pBackend for NoDriver {
        fn gpu_count(&self) -> Result<usize, String> {
            Err("the CUDA driver cannot be loaded (libcuda.so.1: not found)".into())
        }
        fn measure(&self, _: &P2pSettings, _: usize) -> Result<Value, String> {
            unreachable!("never measured without a driver")
        }
    }

    #[test]
    fn without_a_driver_or_a_second_gpu_the_status_says_why() {
        let s = P2pSettings::default();
        let v = run_p2p(&s, &NoDriver);
        assert_eq!(v["status"], "unavailable");
        assert!(v["reason"].as_str().unwrap_or("").contains("CUDA driver"));
        let one = Replay {
            gpus: 1,
            data: json!({}),
        };
        let v = run_p2p(&s, &one);
        assert_eq!(v["status"], "unavailable");
        assert!(
            v["reason"]
                .as_str()
                .unwrap_or("")
                .contains("at least 2 GPUs")
        );
    }

    #[test]
    fn a_replayed_machine_gives_its_data_and_the_gpu_cap_holds() {
        let r = Replay {
            gpus: 4,
            data: json!({"gpu_count": 4}),
        };
        let v = run_p2p(&P2pSettings::default(), &r);
        assert_eq!(
            (v["status"].as_str(), &v["data"]["gpu_count"]),
            (Some("ok"), &json!(4))
        );
        assert_eq!(gpus_used(12, 0), 8);
        assert_eq!(gpus_used(4, 2), 2);
        assert_eq!(gpus_used(2, 9), 2);
    }

    #[test]
    fn this_machine_never_crashes_the_real_back_end() {
        // CI has no GPU: the real back end must answer with a status.
        let v = run_p2p(&P2pSettings::default(), &CudaDriver);
        assert!(
            ["unavailable", "ok"].contains(&v["status"].as_str().unwrap_or("")),
            "{v}"
        );
    }
}
