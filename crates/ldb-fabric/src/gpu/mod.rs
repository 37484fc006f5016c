//! GPU peer-to-peer (`--p2pmark`) without a helper binary: a small
//! interface over the primitive measurements ([`P2pBackend`]), the pure
//! arithmetic that turns them into the reference's `data` object
//! ([`assemble`]), a fake machine that replays recorded per-pair figures
//! ([`fake`]), and the real back end, which loads the CUDA driver at run
//! time (nothing CUDA is linked at build time; the binary runs where CUDA
//! is absent).
//!
//! Status (docs/fabric.md): the real back end loads the driver and counts
//! GPUs (`cuInit`, `cuDeviceGetCount`); without the driver, or with fewer
//! than two GPUs, the result is `unavailable` with the reason. Its copy,
//! latency and allreduce primitives (CUDA copies, an NVRTC kernel, NCCL)
//! are not written yet: with two or more GPUs it answers `unavailable` and
//! points at `--p2pmark-bin`.

pub mod assemble;
pub mod fake;

use std::time::Instant;

use serde_json::{Value, json};

pub use assemble::Allreduce;

use crate::settings::P2pSettings;
use crate::status::FabricStatus;

/// The CUDA driver's names, in the order the loader is asked.
pub const CUDA_DRIVER: &[&str] = &["libcuda.so.1", "libcuda.so"];

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
}

/// The real machine: the CUDA driver loaded at run time.
#[derive(Debug, Default)]
pub struct CudaDriver;

const NOT_YET: &str = "the native CUDA/NCCL P2P measurement is not implemented in this build; \
     run a helper with --p2pmark-bin PATH";

impl P2pBackend for CudaDriver {
    fn gpu_count(&self) -> Result<usize, String> {
        ldb_sys::cuda_device_count(CUDA_DRIVER)
    }
    fn peer_access(&self, _: usize, _: usize) -> bool {
        false
    }
    fn copy_gbps(&self, _: usize, _: usize) -> Result<f64, String> {
        Err(NOT_YET.into())
    }
    fn concurrent_gbps(&self, _: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        Err(NOT_YET.into())
    }
    fn read_latency_us(&self, _: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        Err(NOT_YET.into())
    }
    fn allreduce_us(&self, _: Allreduce, _: u64) -> Result<f64, String> {
        Err(NOT_YET.into())
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
    match assemble::measure(s, backend, visible, used) {
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
        let v = run_p2p(&P2pSettings::default(), &CudaDriver);
        assert_eq!(v["status"], "unavailable", "{v}");
        assert!(v["reason"].is_string(), "{v}");
    }
}
