//! Allreduce over the GPUs used, two ways, on the same buffers: NCCL's
//! fp16 sum, and the one-shot kernel (a barrier kernel, then every GPU
//! reads all peers' inputs over the peer path and sums them in one pass).
//! Each GPU has one stream, an input and an output buffer of the largest
//! size of the sweep (inputs filled with fp16 1.05859375, so the sum is
//! exact and checked after every size), a flag array for the barrier and
//! a table of the peers' addresses.
//!
//! Timing: `warmup` untimed operations, all streams drained, then on every
//! GPU a start event, `iters` operations, a stop event; µs per operation =
//! the slowest GPU's stop − start over `iters` (an allreduce is done when
//! its last GPU is).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ldb_sys::cuda::DeviceBuffer;
use ldb_sys::cuda::kernel_buffers::PeerTable;
use ldb_sys::cuda::kernels::{BarrierGroup, MAX_GPUS};
use ldb_sys::nccl::{Comms, Nccl};

use super::Allreduce;
use super::machine::{Lane, Machine};
use super::plan;

/// One GPU's part.
struct Rank {
    lane: Rc<Lane>,
    input: Rc<DeviceBuffer>,
    output: Rc<DeviceBuffer>,
    table: Rc<PeerTable>,
    failed: Rc<DeviceBuffer>,
    /// Multiprocessors (asked once: no driver query inside timed loops).
    sms: i32,
}

/// NCCL loaded and its communicators over the group.
type NcclSetup = (Rc<Nccl>, Rc<Comms>);

/// The allreduce group over GPUs 0..n.
pub(crate) struct Group {
    // first, so the communicators go before the buffers and contexts
    nccl: RefCell<Option<Result<NcclSetup, String>>>,
    n: usize,
    capacity: usize,
    ranks: Vec<Rank>,
    epoch: Cell<u32>,
}

impl Group {
    /// Buffers for `n` GPUs and sizes up to `capacity` bytes.
    pub(crate) fn new(m: &Machine, n: usize, capacity: usize) -> Result<Group, String> {
        if n == 0 || n > MAX_GPUS {
            return Err(format!(
                "allreduce over {n} GPUs (1 to {MAX_GPUS} supported)"
            ));
        }
        let capacity = capacity.div_ceil(16).max(1) * 16;
        let (mut inputs, mut flags) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let input = m.alloc(i, capacity, "allreduce input")?;
            input.fill(plan::ALLREDUCE_FILL_BYTE)?;
            inputs.push(Rc::new(input));
            let f = DeviceBuffer::alloc(&m.gpu(i)?, 4 * MAX_GPUS)?;
            f.fill(0)?;
            flags.push(Rc::new(f));
        }
        let mut ranks = Vec::with_capacity(n);
        for (i, input) in inputs.iter().enumerate() {
            let output = m.alloc(i, capacity, "allreduce output")?;
            let failed = DeviceBuffer::alloc(&m.gpu(i)?, 8)?;
            failed.fill(0)?;
            ranks.push(Rank {
                sms: m.sms(i)?,
                // a lane of its own ((i, usize::MAX) is never a copy pair)
                lane: m.lane(i, usize::MAX)?,
                input: Rc::clone(input),
                output: Rc::new(output),
                // every GPU's table names every GPU's input and flags
                table: Rc::new(PeerTable::new(&m.gpu(i)?, &inputs, &flags)?),
                failed: Rc::new(failed),
            });
        }
        Ok(Group {
            n,
            capacity,
            ranks,
            epoch: Cell::new(0),
            nccl: RefCell::new(None),
        })
    }

    /// NCCL and its communicators, set up on first use.
    fn comms(&self) -> Result<Rc<Comms>, String> {
        if self.nccl.borrow().is_none() {
            let made = Nccl::load_from_env().and_then(|lib| {
                let lib = Rc::new(lib);
                let comms = Comms::init_all(&lib, self.n)?;
                Ok((lib, Rc::new(comms)))
            });
            *self.nccl.borrow_mut() = Some(made);
        }
        match self.nccl.borrow().as_ref() {
            Some(Ok((_, c))) => Ok(Rc::clone(c)),
            Some(Err(e)) => Err(e.clone()),
            None => Err("NCCL was not set up".into()),
        }
    }

    /// "libnccl.so.2 (22105)" once loaded, or why it could not be.
    pub(crate) fn nccl_description(&self) -> Option<String> {
        self.nccl.borrow().as_ref().map(|r| match r {
            Ok((lib, _)) => match lib.version() {
                Ok(v) => format!("{} (version code {v})", lib.library),
                Err(_) => lib.library.clone(),
            },
            Err(e) => e.clone(),
        })
    }

    /// One allreduce of `bytes` enqueued on every GPU.
    fn step(&self, m: &Machine, kind: Allreduce, bytes: usize) -> Result<(), String> {
        match kind {
            Allreduce::Nccl => {
                let comms = self.comms()?;
                let bufs: Vec<_> = self
                    .ranks
                    .iter()
                    .map(|r| (&r.input, &r.output, &r.lane.stream))
                    .collect();
                comms.all_reduce_f16(&bufs, bytes / 2)
            }
            Allreduce::Custom => {
                let epoch = self.epoch.get() + 1;
                self.epoch.set(epoch);
                let packs = (bytes / 16) as u64;
                for (i, r) in self.ranks.iter().enumerate() {
                    let k = m.kernels(i)?;
                    let group = BarrierGroup {
                        table: &r.table,
                        failed: &r.failed,
                        n: self.n,
                        rank: i,
                    };
                    k.barrier(&r.lane.stream, &group, epoch, plan::BARRIER_TIMEOUT_NS)?;
                    let grid = plan::sum_grid(packs, r.sms);
                    k.oneshot_sum(&r.lane.stream, &r.table, self.n, packs, &r.output, grid)?;
                }
                Ok(())
            }
        }
    }

    /// µs per allreduce of `bytes` (a multiple of 16, at most the
    /// capacity), the result checked.
    pub(crate) fn time(
        &self,
        m: &Machine,
        kind: Allreduce,
        bytes: u64,
        iters: u64,
        warmup: u64,
    ) -> Result<f64, String> {
        let bytes = usize::try_from(bytes).map_err(|_| "size too large".to_string())?;
        if bytes == 0 || bytes % 16 != 0 || bytes > self.capacity {
            return Err(format!(
                "allreduce size {bytes} B: must be a positive multiple of 16 up to {} B",
                self.capacity
            ));
        }
        if kind == Allreduce::Custom {
            for a in 0..self.n {
                for b in 0..self.n {
                    if !m.peer(a, b) {
                        return Err(format!(
                            "the one-shot allreduce needs peer access between every pair of GPUs; GPU {a} cannot reach GPU {b}"
                        ));
                    }
                }
            }
        }
        for r in &self.ranks {
            r.output.fill(0)?;
        }
        for _ in 0..warmup {
            self.step(m, kind, bytes)?;
        }
        for r in &self.ranks {
            r.lane.stream.synchronize()?;
        }
        for r in &self.ranks {
            r.lane.start.record(&r.lane.stream)?;
        }
        for _ in 0..iters.max(1) {
            self.step(m, kind, bytes)?;
        }
        for r in &self.ranks {
            r.lane.stop.record(&r.lane.stream)?;
        }
        let mut ms = Vec::with_capacity(self.n);
        for r in &self.ranks {
            r.lane.stop.synchronize()?;
            ms.push(r.lane.start.elapsed_ms(&r.lane.stop)?);
        }
        self.verify(kind)?;
        plan::us_per_op(&ms, iters.max(1))
    }

    /// The barrier never timed out and every GPU's first output word holds
    /// the expected sum.
    fn verify(&self, kind: Allreduce) -> Result<(), String> {
        for (i, r) in self.ranks.iter().enumerate() {
            let mut w = [0u64; 1];
            r.failed.download(0, &mut w)?;
            if w[0] & 0xffff_ffff != 0 {
                return Err(format!(
                    "one-shot allreduce: GPU {i} waited over {} s at the barrier for a peer",
                    plan::BARRIER_TIMEOUT_NS / 1_000_000_000
                ));
            }
            r.output.download(0, &mut w)?;
            plan::check_allreduce_word(w[0], self.n).map_err(|e| {
                let what = match kind {
                    Allreduce::Custom => "one-shot kernel",
                    Allreduce::Nccl => "NCCL",
                };
                format!("{what} on GPU {i}: {e}")
            })?;
        }
        Ok(())
    }
}
