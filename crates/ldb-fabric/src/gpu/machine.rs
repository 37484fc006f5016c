//! The real GPUs behind [`super::P2pBackend`]: GPUs opened on first use,
//! peer access enabled where the driver allows it, and the copy and
//! pointer-chase primitives. Buffers, streams and events are made the
//! first time a pair needs them and kept for the run (so every pattern
//! reuses them instead of allocating inside a timed region).
//!
//! - **Copies**: pair (s, d) has its own stream on GPU s, two events, a
//!   `size` source buffer on s and a `size` destination slot on d for s.
//!   Warm-up copies on every stream of the pattern, all streams drained,
//!   then on each stream: start event, `iters` copies, stop event. GB/s of
//!   a pair = size × iters / (its stop − its start). The streams start
//!   within the microseconds the host takes to enqueue them; a 64 MiB copy
//!   takes milliseconds, so they overlap.
//! - **Pointer chase**: each owner holds one chain (see [`plan`]); reader r
//!   runs the one-thread `ldb_chase` kernel on its stream for (r, o),
//!   through the peer path, and the kernel times itself with the GPU's
//!   nanosecond timer. Concurrent chases start at different points.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use ldb_sys::cuda::api::{
    ATTR_CC_MAJOR, ATTR_CC_MINOR, ATTR_L2_CACHE_SIZE, ATTR_MULTIPROCESSOR_COUNT,
};
use ldb_sys::cuda::kernel_buffers::ChaseChain;
use ldb_sys::cuda::kernels::{BuiltinPtx, FabricKernels, pick_arch};
use ldb_sys::cuda::{DeviceBuffer, Driver, Event, Gpu, Stream};
use ldb_sys::nvrtc::Nvrtc;

use super::plan;

type Pair = (usize, usize);

/// One owner's pointer-chase chain.
pub(crate) struct Chain {
    chain: Rc<ChaseChain>,
    slots: usize,
}

/// A pair's stream and timing events.
pub(crate) struct Lane {
    pub(crate) stream: Stream,
    pub(crate) start: Event,
    pub(crate) stop: Event,
}

/// The opened machine.
pub(crate) struct Machine {
    pub(crate) driver: Rc<Driver>,
    pub(crate) visible: usize,
    copy_bytes: usize,
    iters: u64,
    warmup: u64,
    latency_reads: u64,
    gpus: RefCell<Vec<Option<Gpu>>>,
    peer: RefCell<HashMap<Pair, bool>>,
    lanes: RefCell<HashMap<Pair, Rc<Lane>>>,
    sources: RefCell<HashMap<usize, Rc<DeviceBuffer>>>,
    slots: RefCell<HashMap<Pair, Rc<DeviceBuffer>>>,
    chains: RefCell<HashMap<usize, Rc<Chain>>>,
    chase_out: RefCell<HashMap<Pair, Rc<DeviceBuffer>>>,
    nvrtc: RefCell<Option<Rc<Nvrtc>>>,
    ptx: RefCell<HashMap<(i32, i32), Rc<BuiltinPtx>>>,
    kernels: RefCell<HashMap<usize, Rc<FabricKernels>>>,
    chase_calls: Cell<u64>,
}

impl Machine {
    /// Load the driver and count GPUs.
    pub(crate) fn open(
        copy_mib: u64,
        iters: u64,
        warmup: u64,
        latency_reads: u64,
    ) -> Result<Machine, String> {
        let driver = Driver::load_system()?;
        let visible = driver.device_count()?;
        let copy_bytes = usize::try_from(copy_mib)
            .ok()
            .and_then(|m| m.checked_mul(1 << 20))
            .ok_or_else(|| format!("--p2pmark-size-mb {copy_mib} is too large"))?;
        Ok(Machine {
            driver,
            visible,
            copy_bytes,
            iters: iters.max(1),
            warmup,
            latency_reads: latency_reads.max(1),
            gpus: RefCell::new(vec![None; visible]),
            peer: RefCell::default(),
            lanes: RefCell::default(),
            sources: RefCell::default(),
            slots: RefCell::default(),
            chains: RefCell::default(),
            chase_out: RefCell::default(),
            nvrtc: RefCell::default(),
            ptx: RefCell::default(),
            kernels: RefCell::default(),
            chase_calls: Cell::new(0),
        })
    }

    /// GPU `i`, opened (primary context retained) on first use.
    pub(crate) fn gpu(&self, i: usize) -> Result<Gpu, String> {
        let mut gpus = self.gpus.borrow_mut();
        let slot = gpus
            .get_mut(i)
            .ok_or_else(|| format!("GPU {i} is not visible ({} are)", self.visible))?;
        if slot.is_none() {
            *slot = Some(Gpu::open(&self.driver, i).map_err(|e| format!("GPU {i}: {e}"))?);
        }
        slot.clone().ok_or_else(|| format!("GPU {i} did not open"))
    }

    /// `bytes` on GPU `i`, after checking they fit with a margin: one line
    /// saying how much is free otherwise.
    pub(crate) fn alloc(&self, i: usize, bytes: usize, what: &str) -> Result<DeviceBuffer, String> {
        let gpu = self.gpu(i)?;
        let (free, _) = gpu.memory()?;
        if bytes.saturating_add(plan::MEMORY_MARGIN_BYTES) > free {
            return Err(format!(
                "GPU {i}: the {what} needs {} MiB but only {} MiB are free",
                plan::mib(bytes),
                plan::mib(free)
            ));
        }
        DeviceBuffer::alloc(&gpu, bytes).map_err(|e| format!("GPU {i}: {e}"))
    }

    /// Can `a` read and write `b`'s memory directly? Asked once per pair;
    /// where the driver says yes, access is enabled (a refusal to enable
    /// counts as no).
    pub(crate) fn peer(&self, a: usize, b: usize) -> bool {
        if a == b {
            return true;
        }
        if let Some(&known) = self.peer.borrow().get(&(a, b)) {
            return known;
        }
        let ok = (|| -> Result<bool, String> {
            let (ga, gb) = (self.gpu(a)?, self.gpu(b)?);
            Ok(ga.can_access_peer(&gb)? && ga.enable_peer_access(&gb).is_ok())
        })()
        .unwrap_or(false);
        self.peer.borrow_mut().insert((a, b), ok);
        ok
    }

    /// The stream and events of pair (a, b), on GPU a.
    pub(crate) fn lane(&self, a: usize, b: usize) -> Result<Rc<Lane>, String> {
        if let Some(l) = self.lanes.borrow().get(&(a, b)) {
            return Ok(Rc::clone(l));
        }
        let g = self.gpu(a)?;
        let lane = Rc::new(Lane {
            stream: Stream::new(&g)?,
            start: Event::new(&g)?,
            stop: Event::new(&g)?,
        });
        self.lanes.borrow_mut().insert((a, b), Rc::clone(&lane));
        Ok(lane)
    }

    fn source(&self, s: usize) -> Result<Rc<DeviceBuffer>, String> {
        if let Some(b) = self.sources.borrow().get(&s) {
            return Ok(Rc::clone(b));
        }
        let b = Rc::new(self.alloc(s, self.copy_bytes, "copy source buffer")?);
        b.fill(0x5a)?;
        self.sources.borrow_mut().insert(s, Rc::clone(&b));
        Ok(b)
    }

    fn slot(&self, s: usize, d: usize) -> Result<Rc<DeviceBuffer>, String> {
        if let Some(b) = self.slots.borrow().get(&(s, d)) {
            return Ok(Rc::clone(b));
        }
        let b = Rc::new(self.alloc(d, self.copy_bytes, "copy destination buffer")?);
        self.slots.borrow_mut().insert((s, d), Rc::clone(&b));
        Ok(b)
    }

    /// All `pairs` copying at once: GB/s of each.
    pub(crate) fn copies(&self, pairs: &[Pair]) -> Result<Vec<f64>, String> {
        let mut work = Vec::with_capacity(pairs.len());
        for &(s, d) in pairs {
            // where there is no peer path the driver stages through the
            // host; that is what such a pair's figure then measures
            let _ = self.peer(s, d);
            work.push((self.lane(s, d)?, self.source(s)?, self.slot(s, d)?));
        }
        let n = self.copy_bytes;
        for (lane, src, dst) in &work {
            for _ in 0..self.warmup {
                lane.stream.copy(dst, 0, src, 0, n)?;
            }
        }
        for (lane, _, _) in &work {
            lane.stream.synchronize()?;
        }
        for (lane, src, dst) in &work {
            lane.start.record(&lane.stream)?;
            for _ in 0..self.iters {
                lane.stream.copy(dst, 0, src, 0, n)?;
            }
            lane.stop.record(&lane.stream)?;
        }
        work.iter()
            .map(|(lane, _, _)| {
                lane.stop.synchronize()?;
                plan::gbps(n, self.iters, lane.start.elapsed_ms(&lane.stop)?)
            })
            .collect()
    }

    /// NVRTC, loaded on first use.
    fn nvrtc(&self) -> Result<Rc<Nvrtc>, String> {
        if let Some(n) = self.nvrtc.borrow().as_ref() {
            return Ok(Rc::clone(n));
        }
        let n = Rc::new(Nvrtc::load_from_env()?);
        *self.nvrtc.borrow_mut() = Some(Rc::clone(&n));
        Ok(n)
    }

    /// The fabric kernels on GPU `i`: compiled by NVRTC once per compute
    /// capability, loaded once per GPU.
    pub(crate) fn kernels(&self, i: usize) -> Result<Rc<FabricKernels>, String> {
        if let Some(k) = self.kernels.borrow().get(&i) {
            return Ok(Rc::clone(k));
        }
        let g = self.gpu(i)?;
        let cc = (g.attribute(ATTR_CC_MAJOR)?, g.attribute(ATTR_CC_MINOR)?);
        let cached = self.ptx.borrow().get(&cc).cloned();
        let ptx = match cached {
            Some(p) => p,
            None => {
                let nvrtc = self.nvrtc()?;
                let arch = pick_arch(cc.0, cc.1, &nvrtc.supported_archs().unwrap_or_default());
                let p = Rc::new(BuiltinPtx::compile(&nvrtc, arch)?);
                self.ptx.borrow_mut().insert(cc, Rc::clone(&p));
                p
            }
        };
        let k = Rc::new(ldb_sys::cuda::kernels::load(&g, &ptx).map_err(|e| {
            let hint = if e.contains("UNSUPPORTED_PTX_VERSION") {
                " (NVRTC is newer than the driver: use the NVRTC of the driver's CUDA version)"
            } else {
                ""
            };
            format!("GPU {i}: {e}{hint}")
        })?);
        self.kernels.borrow_mut().insert(i, Rc::clone(&k));
        Ok(k)
    }

    /// Multiprocessors of GPU `i`.
    pub(crate) fn sms(&self, i: usize) -> Result<i32, String> {
        self.gpu(i)?.attribute(ATTR_MULTIPROCESSOR_COUNT)
    }

    /// Owner `o`'s chain, built and uploaded on first use.
    fn chain(&self, o: usize) -> Result<Rc<Chain>, String> {
        if let Some(c) = self.chains.borrow().get(&o) {
            return Ok(Rc::clone(c));
        }
        let g = self.gpu(o)?;
        let l2 = usize::try_from(g.attribute(ATTR_L2_CACHE_SIZE)?).unwrap_or(0);
        let (free, _) = g.memory()?;
        let bytes = plan::chain_bytes(l2, free).ok_or_else(|| {
            format!(
                "GPU {o}: the pointer-chase chain needs {} MiB (a quarter of free memory at most) but only {} MiB are free",
                plan::mib(plan::CHAIN_MIN_BYTES),
                plan::mib(free)
            )
        })?;
        let slots = bytes / plan::CHAIN_STRIDE_BYTES;
        let next = plan::chain_cycle(slots, 0x1db0 + o as u64);
        let chain = Rc::new(ChaseChain::from_buffer(self.alloc(
            o,
            bytes,
            "pointer-chase chain",
        )?)?);
        // upload in 16 MiB pieces so the host never holds the whole chain
        let chunk_slots = (16 << 20) / plan::CHAIN_STRIDE_BYTES;
        let mut words = vec![0u64; chunk_slots * plan::CHAIN_STRIDE_WORDS];
        for first in (0..slots).step_by(chunk_slots) {
            let count = chunk_slots.min(slots - first);
            let piece = &mut words[..count * plan::CHAIN_STRIDE_WORDS];
            plan::fill_chain_words(&next, first, piece);
            chain.write(first * plan::CHAIN_STRIDE_WORDS, piece)?;
        }
        let c = Rc::new(Chain { chain, slots });
        self.chains.borrow_mut().insert(o, Rc::clone(&c));
        Ok(c)
    }

    fn chase_out(&self, r: usize, o: usize) -> Result<Rc<DeviceBuffer>, String> {
        if let Some(b) = self.chase_out.borrow().get(&(r, o)) {
            return Ok(Rc::clone(b));
        }
        let g = self.gpu(r)?;
        let b = Rc::new(DeviceBuffer::alloc(&g, 16)?);
        self.chase_out.borrow_mut().insert((r, o), Rc::clone(&b));
        Ok(b)
    }

    /// All `pairs` (reader, owner) chasing at once: µs per dependent read.
    pub(crate) fn chases(&self, pairs: &[Pair]) -> Result<Vec<f64>, String> {
        let mut work = Vec::with_capacity(pairs.len());
        for &(r, o) in pairs {
            if !self.peer(r, o) {
                return Err(format!(
                    "GPU {r} cannot read GPU {o}'s memory directly (no peer access), so its remote-read latency cannot be measured"
                ));
            }
            work.push((
                self.lane(r, o)?,
                self.kernels(r)?,
                self.chain(o)?,
                self.chase_out(r, o)?,
            ));
        }
        let call = self.chase_calls.get();
        self.chase_calls.set(call + 1);
        let warm = plan::CHASE_WARM_READS.min(self.latency_reads);
        for (i, (lane, k, chain, out)) in work.iter().enumerate() {
            let start = plan::chase_start(call, i, chain.slots);
            k.chase(
                &lane.stream,
                &chain.chain,
                start,
                warm,
                self.latency_reads,
                out,
            )?;
        }
        work.iter()
            .map(|(lane, _, _, out)| {
                lane.stream.synchronize()?;
                let mut w = [0u64; 2];
                out.download(0, &mut w)?;
                plan::us_per_read(w[0], self.latency_reads)
            })
            .collect()
    }

    /// "GPU 0: NVIDIA H200 (sm_90, 132 SMs)" for every GPU opened.
    pub(crate) fn describe_gpus(&self) -> Vec<String> {
        let gpus = self.gpus.borrow().clone();
        gpus.iter()
            .flatten()
            .map(|g| {
                let name = g.name().unwrap_or_else(|e| e);
                let cc = (g.attribute(ATTR_CC_MAJOR), g.attribute(ATTR_CC_MINOR));
                let sms = g.attribute(ATTR_MULTIPROCESSOR_COUNT).unwrap_or(0);
                match cc {
                    (Ok(a), Ok(b)) => format!("GPU {}: {name} (sm_{a}{b}, {sms} SMs)", g.ordinal()),
                    _ => format!("GPU {}: {name}", g.ordinal()),
                }
            })
            .collect()
    }

    /// "libnvrtc.so.12 (12.4)" once loaded.
    pub(crate) fn nvrtc_description(&self) -> Option<String> {
        self.nvrtc.borrow().as_ref().map(|n| match n.version() {
            Ok((a, b)) => format!("{} ({a}.{b})", n.library),
            Err(_) => n.library.clone(),
        })
    }
}
