//! The fabric diagnostic's three GPU kernels: their CUDA C source
//! (compiled at run time by NVRTC) and one typed launcher per kernel. The
//! launchers live beside the source because `cuLaunchKernel` reads one
//! argument per declared kernel parameter: a launcher whose arguments did
//! not match the source would make the driver read past them. Keeping both
//! here, with their parameter lists written side by side, is what makes the
//! launchers sound to call from safe code.
//!
//! - `ldb_chase`: one thread follows a chain of word indices (`at =
//!   chain[at]`) with volatile loads (not cached in L1, so every read goes
//!   to the owner's memory), `warm` reads untimed, then `reads` timed by the
//!   GPU's global nanosecond timer (`%globaltimer`), so launch overhead is
//!   not in the figure. Writes (elapsed ns, last index) to `out`.
//! - `ldb_barrier`: GPU `rank`'s thread t stores `epoch` into GPU t's flag
//!   slot `rank`, then waits until its own slot t reaches `epoch` (GPU t
//!   has arrived), giving up after `timeout_ns` (sets `*failed`), so a
//!   missing peer can never hang the run; once `*failed` is set, later
//!   barriers return at once.
//! - `ldb_oneshot_sum`: every thread takes 16-byte packs (8 fp16 values)
//!   at index i from each of the `n` inputs named in `table` (peers'
//!   memory, read directly over the peer path), sums them in fp32 and
//!   stores fp16 to `out`: the one-shot allreduce after the barrier.
//!
//! `table` (on the launching GPU): words 0..8 the input buffers' addresses
//! (index = rank), words 8..16 the flag buffers' addresses.
//!
//! The launchers are sound only for these kernels, so a [`FabricKernels`]
//! is made only from [`BuiltinPtx`], which only NVRTC's compilation of
//! [`KERNEL_SOURCE`] produces; the chain and the table they follow are the
//! checked types of [`super::kernel_buffers`], and each launch checks its
//! sizes and indices first ([`super::launch_checks`]).

use std::ffi::{CString, c_int, c_uint, c_void};
use std::rc::Rc;

use super::api::CuFunction;
use super::kernel_buffers::{ChaseChain, PeerTable};
use super::launch_checks::{check_barrier, check_chase, check_sum};
use super::{DeviceBuffer, Gpu, Module, Stream};
use crate::nvrtc::Nvrtc;

/// Most GPUs the one-shot allreduce and the barrier address (the
/// reference's cap too).
pub const MAX_GPUS: usize = 8;

/// Words in the `table` buffer the barrier and the sum read.
pub const TABLE_WORDS: usize = 2 * MAX_GPUS;

/// The kernels' CUDA C source.
pub const KERNEL_SOURCE: &str = r#"
// llm-decode-bench fabric kernels (NVRTC, compiled at run time)
typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ u64 ldb_now() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}

extern "C" __global__ void ldb_chase(const u64* chain, u64 start, u64 warm,
                                     u64 reads, u64* out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const volatile u64* c = chain;
    u64 at = start;
    for (u64 i = 0; i < warm; ++i) at = c[at];
    const u64 t0 = ldb_now();
    for (u64 i = 0; i < reads; ++i) at = c[at];
    const u64 t1 = ldb_now();
    out[0] = t1 - t0;
    out[1] = at;
}

extern "C" __global__ void ldb_barrier(const u64* table, int n, int rank,
                                       u32 epoch, u64 timeout_ns, int* failed) {
    const int t = threadIdx.x;
    if (blockIdx.x != 0 || t >= n) return;
    if (*(volatile int*)failed) return;  // an earlier step gave up: do not wait again
    volatile u32* theirs = (volatile u32*)table[8 + t];
    volatile u32* mine = (volatile u32*)table[8 + rank];
    __threadfence_system();
    theirs[rank] = epoch;
    const u64 t0 = ldb_now();
    while (mine[t] < epoch) {
        if (ldb_now() - t0 > timeout_ns) { atomicExch(failed, 1); return; }
    }
}

struct alignas(16) ldb_pack { u32 w[4]; };

__device__ __forceinline__ float ldb_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short ldb_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

extern "C" __global__ void ldb_oneshot_sum(const u64* table, int n, u64 packs,
                                           ldb_pack* out) {
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += step) {
        float acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
        for (int j = 0; j < n; ++j) {
            const ldb_pack p = ((const ldb_pack*)table[j])[i];
            for (int k = 0; k < 4; ++k) {
                acc[2 * k] += ldb_h2f((unsigned short)(p.w[k] & 0xffffu));
                acc[2 * k + 1] += ldb_h2f((unsigned short)(p.w[k] >> 16));
            }
        }
        ldb_pack o;
        for (int k = 0; k < 4; ++k)
            o.w[k] = (u32)ldb_f2h(acc[2 * k]) | ((u32)ldb_f2h(acc[2 * k + 1]) << 16);
        out[i] = o;
    }
}
"#;

/// The kernels' `extern "C"` names, in the order of the launchers below.
pub const KERNEL_NAMES: [&str; 3] = ["ldb_chase", "ldb_barrier", "ldb_oneshot_sum"];

/// The architecture to compile for on a device of compute capability
/// `major.minor`: its own when NVRTC supports it, else the newest NVRTC
/// supports below it (PTX runs on later devices), else its own (an NVRTC
/// that cannot list them, or a device older than all: the compile error
/// then says so).
pub fn pick_arch(major: i32, minor: i32, supported: &[i32]) -> i32 {
    let device = major * 10 + minor;
    supported
        .iter()
        .copied()
        .filter(|&a| a <= device)
        .max()
        .unwrap_or(device)
}

/// NVRTC options for architecture `arch` (e.g. 90): PTX for its virtual
/// architecture (the driver finishes it for the device).
pub fn nvrtc_options(arch: i32) -> Vec<String> {
    vec![format!("--gpu-architecture=compute_{arch}")]
}

/// PTX text compiled from [`KERNEL_SOURCE`], and from nothing else: the
/// field is private and [`BuiltinPtx::compile`] is its only maker, so the
/// launchers never run a kernel whose parameters they do not know.
///
/// ```compile_fail
/// // PTX from elsewhere cannot pass for the built-in kernels:
/// let ptx = ldb_sys::cuda::kernels::BuiltinPtx { ptx: std::ffi::CString::default(), arch: 90 };
/// ```
#[derive(Debug)]
pub struct BuiltinPtx {
    ptx: CString,
    arch: i32,
}

impl BuiltinPtx {
    /// The kernels compiled by `nvrtc` for architecture `arch` (see
    /// [`pick_arch`]).
    pub fn compile(nvrtc: &Nvrtc, arch: i32) -> Result<BuiltinPtx, String> {
        let ptx =
            nvrtc.compile_ptx(KERNEL_SOURCE, "ldb_fabric_kernels.cu", &nvrtc_options(arch))?;
        Ok(BuiltinPtx { ptx, arch })
    }

    /// The architecture it was compiled for.
    pub fn arch(&self) -> i32 {
        self.arch
    }
}

/// One GPU's place in the barrier: its `table` (see the module doc), its
/// failure flag (one int), the GPU count and its rank.
#[derive(Debug, Clone, Copy)]
pub struct BarrierGroup<'a> {
    /// The launching GPU's table.
    pub table: &'a Rc<PeerTable>,
    /// One int on the launching GPU, set to 1 when a peer never arrived.
    pub failed: &'a Rc<DeviceBuffer>,
    /// GPUs in the group.
    pub n: usize,
    /// This GPU's index among them.
    pub rank: usize,
}

/// The three kernels loaded on one GPU (the functions are valid while
/// `module` is loaded; they are kept together).
#[derive(Debug)]
pub struct FabricKernels {
    module: Module,
    chase: CuFunction,
    barrier: CuFunction,
    sum: CuFunction,
}

fn same_gpu(a: &Stream, b: &Gpu, what: &str) -> Result<(), String> {
    if a.gpu().ordinal() == b.ordinal() {
        Ok(())
    } else {
        Err(format!("{what} must live on the launching GPU"))
    }
}

impl FabricKernels {
    /// The kernels of `module`, which was loaded from [`BuiltinPtx`].
    fn new(module: Module) -> Result<FabricKernels, String> {
        let [c, b, s] = KERNEL_NAMES;
        Ok(FabricKernels {
            chase: module.function(c)?,
            barrier: module.function(b)?,
            sum: module.function(s)?,
            module,
        })
    }

    /// Launch on `stream`; `args` holds one pointer per kernel parameter.
    fn launch(
        &self,
        f: CuFunction,
        grid: u32,
        block: u32,
        stream: &Stream,
        args: &mut [*mut c_void],
    ) -> Result<(), String> {
        if stream.gpu().ordinal() != self.module.gpu().ordinal() {
            return Err("kernel launched on another GPU's stream".into());
        }
        stream.gpu().make_current()?;
        let d = stream.gpu().driver();
        // SAFETY: `f` belongs to the live module on this GPU, loaded from
        // BuiltinPtx, so it is one of KERNEL_SOURCE's kernels; `args` holds
        // exactly one pointer per parameter of the kernel (each caller below
        // builds it from the kernel's declaration in KERNEL_SOURCE, types
        // matching in size: u64/pointers 8 bytes, int/u32 4 bytes); the
        // values they point at live until this call returns (the driver
        // copies them at launch). What the kernel then follows was checked
        // by the caller (launch_checks) and is held by the stream until it
        // is synchronised.
        d.check(
            unsafe {
                (d.api.launch_kernel)(
                    f,
                    grid,
                    1,
                    1,
                    block,
                    1,
                    1,
                    0,
                    stream.raw(),
                    args.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            "cuLaunchKernel",
        )
    }

    /// `ldb_chase(chain, start, warm, reads, out)`: `chain` may be a peer's
    /// (peer access enabled by the caller); `start` a word index in it;
    /// `out` two words on this GPU. Both stay alive until `stream` is
    /// synchronised.
    pub fn chase(
        &self,
        stream: &Stream,
        chain: &Rc<ChaseChain>,
        start: u64,
        warm: u64,
        reads: u64,
        out: &Rc<DeviceBuffer>,
    ) -> Result<(), String> {
        same_gpu(stream, out.gpu(), "the chase's output")?;
        check_chase(chain.words(), start, out.len())?;
        let (mut a0, mut a1, mut a2, mut a3, mut a4) = (chain.ptr(), start, warm, reads, out.ptr());
        let mut args: [*mut c_void; 5] = [
            (&raw mut a0).cast(),
            (&raw mut a1).cast(),
            (&raw mut a2).cast(),
            (&raw mut a3).cast(),
            (&raw mut a4).cast(),
        ];
        self.launch(self.chase, 1, 1, stream, &mut args)?;
        stream.hold(chain);
        stream.hold(out);
        Ok(())
    }

    /// `ldb_barrier(table, n, rank, epoch, timeout_ns, failed)`.
    pub fn barrier(
        &self,
        stream: &Stream,
        group: &BarrierGroup<'_>,
        epoch: u32,
        timeout_ns: u64,
    ) -> Result<(), String> {
        let BarrierGroup {
            table,
            failed,
            n,
            rank,
        } = *group;
        same_gpu(stream, table.gpu(), "the barrier's table")?;
        same_gpu(stream, failed.gpu(), "the barrier's failure flag")?;
        check_barrier(table.gpus(), n, rank, failed.len())?;
        let mut a0 = table.ptr();
        let mut a1 = c_int::try_from(n).map_err(|_| "n")?;
        let mut a2 = c_int::try_from(rank).map_err(|_| "rank")?;
        let mut a3: c_uint = epoch;
        let mut a4 = timeout_ns;
        let mut a5 = failed.ptr();
        let mut args: [*mut c_void; 6] = [
            (&raw mut a0).cast(),
            (&raw mut a1).cast(),
            (&raw mut a2).cast(),
            (&raw mut a3).cast(),
            (&raw mut a4).cast(),
            (&raw mut a5).cast(),
        ];
        self.launch(self.barrier, 1, 32, stream, &mut args)?;
        stream.hold(table);
        stream.hold(failed);
        Ok(())
    }

    /// `ldb_oneshot_sum(table, n, packs, out)` on `grid` blocks of 256
    /// threads; every input and `out` hold at least `packs` 16-byte packs.
    pub fn oneshot_sum(
        &self,
        stream: &Stream,
        table: &Rc<PeerTable>,
        n: usize,
        packs: u64,
        out: &Rc<DeviceBuffer>,
        grid: u32,
    ) -> Result<(), String> {
        same_gpu(stream, table.gpu(), "the sum's table")?;
        same_gpu(stream, out.gpu(), "the sum's output")?;
        check_sum(table.gpus(), table.input_bytes(), n, packs, out.len(), grid)?;
        let mut a0 = table.ptr();
        let mut a1 = c_int::try_from(n).map_err(|_| "n")?;
        let mut a2 = packs;
        let mut a3 = out.ptr();
        let mut args: [*mut c_void; 4] = [
            (&raw mut a0).cast(),
            (&raw mut a1).cast(),
            (&raw mut a2).cast(),
            (&raw mut a3).cast(),
        ];
        self.launch(self.sum, grid, 256, stream, &mut args)?;
        stream.hold(table);
        stream.hold(out);
        Ok(())
    }
}

/// Load the built-in kernels on `gpu`.
pub fn load(gpu: &Gpu, ptx: &BuiltinPtx) -> Result<FabricKernels, String> {
    FabricKernels::new(Module::load_ptx(gpu, &ptx.ptx)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameter list of `name` in the source, as written.
    fn params(name: &str) -> String {
        let at = KERNEL_SOURCE.find(&format!("void {name}(")).expect(name);
        let rest = &KERNEL_SOURCE[at..];
        let open = rest.find('(').expect("(");
        let close = rest.find(')').expect(")");
        rest[open + 1..close]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_source_declares_what_the_launchers_pass() {
        for name in KERNEL_NAMES {
            assert!(KERNEL_SOURCE.contains(&format!("extern \"C\" __global__ void {name}(")));
        }
        // the launchers pass 5, 6 and 4 arguments of these types in order
        assert_eq!(
            params("ldb_chase"),
            "const u64* chain, u64 start, u64 warm, u64 reads, u64* out"
        );
        assert_eq!(
            params("ldb_barrier"),
            "const u64* table, int n, int rank, u32 epoch, u64 timeout_ns, int* failed"
        );
        assert_eq!(
            params("ldb_oneshot_sum"),
            "const u64* table, int n, u64 packs, ldb_pack* out"
        );
        // the table layout the kernels index: inputs at 0.., flags at 8..
        assert!(KERNEL_SOURCE.contains("table[8 + t]"));
        assert_eq!(TABLE_WORDS, 16);
    }

    #[test]
    fn nvrtc_targets_the_devices_virtual_architecture() {
        assert_eq!(nvrtc_options(90), ["--gpu-architecture=compute_90"]);
        let nvrtc_12_4 = [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];
        assert_eq!(pick_arch(9, 0, &nvrtc_12_4), 90);
        assert_eq!(pick_arch(8, 9, &nvrtc_12_4), 89);
        // a device newer than this NVRTC: the newest PTX it can write
        assert_eq!(pick_arch(12, 0, &nvrtc_12_4), 90);
        // NVRTC cannot list its architectures: the device's own
        assert_eq!(pick_arch(10, 0, &[]), 100);
        assert_eq!(pick_arch(3, 5, &nvrtc_12_4), 35);
    }
}
