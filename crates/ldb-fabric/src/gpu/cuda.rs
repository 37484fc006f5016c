//! [`CudaDriver`]: the [`P2pBackend`] of the real machine. The CUDA driver
//! is loaded on the first question (so constructing one costs nothing and
//! fails nowhere); NVRTC when the first kernel is needed; NCCL at the first
//! NCCL allreduce. Every failure is the reason as text, and the run's
//! `--p2pmark-timeout` is checked before each measurement (GPU work that
//! has started is not interrupted: the check is between measurements).

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::collective::Group;
use super::machine::Machine;
use super::{Allreduce, P2pBackend, TIMED_OUT, gpus_used};
use crate::gpu::assemble::allreduce_sizes;
use crate::settings::P2pSettings;

/// Size of the allreduce a one-GPU machine runs to show NCCL and the
/// kernel work (1 MiB, the top of the default sweep).
pub const SINGLE_GPU_ALLREDUCE_BYTES: u64 = 1 << 20;

/// The real machine: the CUDA driver, NVRTC and NCCL loaded at run time.
pub struct CudaDriver {
    settings: P2pSettings,
    deadline: Option<Instant>,
    // the group before the machine: dropped first
    group: RefCell<Option<Result<Rc<Group>, String>>>,
    machine: OnceCell<Result<Machine, String>>,
}

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Default for CudaDriver {
    fn default() -> Self {
        CudaDriver::new(&P2pSettings::default())
    }
}

impl CudaDriver {
    /// A back end measuring with `s`'s sizes and counts; the timeout runs
    /// from now.
    pub fn new(s: &P2pSettings) -> CudaDriver {
        CudaDriver {
            settings: s.clone(),
            deadline: Duration::try_from_secs_f64(s.timeout_s)
                .ok()
                .and_then(|d| Instant::now().checked_add(d)),
            machine: OnceCell::new(),
            group: RefCell::new(None),
        }
    }

    fn machine(&self) -> Result<&Machine, String> {
        let s = &self.settings;
        self.machine
            .get_or_init(|| Machine::open(s.size_mb, s.iters, s.warmup, s.latency_iters))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The machine, unless the run is past its timeout.
    fn ready(&self) -> Result<&Machine, String> {
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(format!(
                "{TIMED_OUT}the native P2P run passed --p2pmark-timeout ({} s)",
                self.settings.timeout_s
            ));
        }
        self.machine()
    }

    /// The allreduce group over the GPUs used, made on first use with
    /// buffers for the largest size of the sweep.
    fn group(&self, m: &Machine) -> Result<Rc<Group>, String> {
        if self.group.borrow().is_none() {
            let n = gpus_used(m.visible, self.settings.max_gpus).max(1);
            let largest = allreduce_sizes(&self.settings.allreduce_sizes)
                .into_iter()
                .chain([SINGLE_GPU_ALLREDUCE_BYTES])
                .max()
                .unwrap_or(SINGLE_GPU_ALLREDUCE_BYTES);
            let capacity =
                usize::try_from(largest).map_err(|_| "allreduce size too large".to_string());
            let made = capacity.and_then(|c| Group::new(m, n, c).map(Rc::new));
            *self.group.borrow_mut() = Some(made);
        }
        match self.group.borrow().as_ref() {
            Some(Ok(g)) => Ok(Rc::clone(g)),
            Some(Err(e)) => Err(e.clone()),
            None => Err("the allreduce group was not set up".into()),
        }
    }
}

impl P2pBackend for CudaDriver {
    fn gpu_count(&self) -> Result<usize, String> {
        self.machine().map(|m| m.visible)
    }
    fn peer_access(&self, a: usize, b: usize) -> bool {
        self.machine().is_ok_and(|m| m.peer(a, b))
    }
    fn copy_gbps(&self, src: usize, dst: usize) -> Result<f64, String> {
        let g = self.ready()?.copies(&[(src, dst)])?;
        g.first().copied().ok_or_else(|| "no copy measured".into())
    }
    fn concurrent_gbps(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        self.ready()?.copies(pairs)
    }
    fn read_latency_us(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        self.ready()?.chases(pairs)
    }
    fn allreduce_us(&self, kind: Allreduce, bytes: u64) -> Result<f64, String> {
        let m = self.ready()?;
        let s = &self.settings;
        self.group(m)?.time(m, kind, bytes, s.iters, s.warmup)
    }
    fn describe(&self) -> Value {
        let Some(Ok(m)) = self.machine.get() else {
            return Value::Null;
        };
        let driver = match m.driver.version() {
            Ok(v) => format!("{} (CUDA {}.{})", m.driver.library, v / 1000, v % 1000 / 10),
            Err(_) => m.driver.library.clone(),
        };
        let nccl = match self.group.borrow().as_ref() {
            Some(Ok(g)) => g.nccl_description(),
            Some(Err(e)) => Some(format!("not reached: {e}")),
            None => None,
        };
        json!({
            "cuda_driver": driver,
            "gpus": m.describe_gpus(),
            "nvrtc": m.nvrtc_description().unwrap_or_else(|| "not loaded".into()),
            "nccl": nccl.unwrap_or_else(|| "not loaded".into()),
        })
    }
}
