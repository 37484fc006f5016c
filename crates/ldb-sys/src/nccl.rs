//! NCCL loaded at run time: one communicator per GPU of this process
//! (`ncclCommInitAll`) and an fp16 sum allreduce over all of them in one
//! group. Signatures from `nccl.h` (checked against the `cudarc` crate's
//! generated bindings): `ncclResult_t`, `ncclDataType_t` and `ncclRedOp_t`
//! are C enums (`int`), `ncclComm_t` and `cudaStream_t` opaque pointers (a
//! driver `CUstream` is a `cudaStream_t`).

use std::ffi::{c_char, c_int, c_void};
use std::rc::Rc;

use libloading::Library;

use crate::cuda::{DeviceBuffer, Stream};
use crate::cuda::{open_first, static_text, sym};

/// NCCL's library names.
pub const NCCL_LIBRARIES: &[&str] = &["libnccl.so.2", "libnccl.so"];

type Comm = *mut c_void;
type NcclResult = c_int;
/// `ncclFloat16`.
const NCCL_FLOAT16: c_int = 6;
/// `ncclSum`.
const NCCL_SUM: c_int = 0;

struct Api {
    version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> NcclResult,
    destroy: unsafe extern "C" fn(Comm) -> NcclResult,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        *mut c_void,
    ) -> NcclResult,
}

/// NCCL, loaded.
pub struct Nccl {
    api: Api,
    /// The library file that opened.
    pub library: String,
    _lib: Library,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("library", &self.library)
            .finish()
    }
}

impl Nccl {
    /// NCCL from its own file names, or first the file named in
    /// `LDB_NCCL_LIBRARY` (see [`crate::user_library`]).
    pub fn load_from_env() -> Result<Nccl, String> {
        let names = crate::user_library::names_from_env(
            crate::user_library::NCCL_ENV,
            "nccl",
            NCCL_LIBRARIES,
        )?;
        // SAFETY: the names are NCCL's own file names, or the file the user
        // named as NCCL in LDB_NCCL_LIBRARY (documented as the path of NCCL,
        // and named like it: checked above); that variable is the user's
        // statement that the file is NCCL, as `load` requires.
        unsafe { Nccl::load(&names) }
    }

    /// Load the first of `names` that opens.
    ///
    /// # Safety
    /// Every name that may open must be NCCL 2: loading runs the file's
    /// initialisers, and its symbols of NCCL's names are then called with
    /// `nccl.h`'s signatures. A file that merely exports those names (a
    /// wrong library named by the user) makes every later call undefined.
    pub unsafe fn load<S: AsRef<str>>(names: &[S]) -> Result<Nccl, String> {
        // SAFETY: forwarded: this function's caller vouched for the names.
        let (lib, library) =
            unsafe { open_first(names) }.map_err(|e| format!("NCCL cannot be loaded ({e})"))?;
        // SAFETY: `lib` is NCCL (the caller's promise) and each type below
        // is nccl.h's signature for that name; the pointers are stored
        // beside `lib` in `Nccl` and die with it.
        let api = unsafe {
            Api {
                version: sym(&lib, "ncclGetVersion")?,
                error_string: sym(&lib, "ncclGetErrorString")?,
                init_all: sym(&lib, "ncclCommInitAll")?,
                destroy: sym(&lib, "ncclCommDestroy")?,
                group_start: sym(&lib, "ncclGroupStart")?,
                group_end: sym(&lib, "ncclGroupEnd")?,
                all_reduce: sym(&lib, "ncclAllReduce")?,
            }
        };
        Ok(Nccl {
            api,
            library,
            _lib: lib,
        })
    }

    fn check(&self, rc: NcclResult, call: &str) -> Result<(), String> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: returns a pointer to a static string (or null) for any
        // code, which `static_text` reads at once.
        let text = unsafe { static_text((self.api.error_string)(rc)) };
        Err(format!("{call}: {text} ({rc})"))
    }

    /// NCCL's version code (e.g. 22105 for 2.21.5).
    pub fn version(&self) -> Result<i32, String> {
        let mut v: c_int = 0;
        // SAFETY: NCCL writes one int into our local.
        let rc = unsafe { (self.api.version)(&mut v) };
        self.check(rc, "ncclGetVersion")?;
        Ok(v)
    }
}

/// One communicator per GPU 0..n of this process, destroyed on drop.
pub struct Comms {
    nccl: Rc<Nccl>,
    comms: Vec<Comm>,
}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Comms({})", self.comms.len())
    }
}

impl Comms {
    /// `ncclCommInitAll` over GPUs `0..n` (the CUDA ordinals).
    pub fn init_all(nccl: &Rc<Nccl>, n: usize) -> Result<Comms, String> {
        let nd = c_int::try_from(n).map_err(|_| format!("{n} GPUs"))?;
        let devs: Vec<c_int> = (0..nd).collect();
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); n];
        // SAFETY: `comms` has room for `n` handles and `devs` holds `n`
        // ordinals; NCCL writes the handles, destroyed in `drop`.
        let rc = unsafe { (nccl.api.init_all)(comms.as_mut_ptr(), nd, devs.as_ptr()) };
        nccl.check(rc, "ncclCommInitAll")?;
        Ok(Comms {
            nccl: Rc::clone(nccl),
            comms,
        })
    }

    /// Enqueue one fp16 sum allreduce of `count` elements: GPU i sums
    /// `bufs[i].0` into `bufs[i].1` on stream `bufs[i].2` (stream i must
    /// be GPU i's, buffers of at least `2 × count` bytes on GPU i). Each
    /// stream holds its buffers until it is synchronised.
    pub fn all_reduce_f16(
        &self,
        bufs: &[(&Rc<DeviceBuffer>, &Rc<DeviceBuffer>, &Stream)],
        count: usize,
    ) -> Result<(), String> {
        if bufs.len() != self.comms.len() {
            return Err(format!(
                "ncclAllReduce: {} buffers for {} GPUs",
                bufs.len(),
                self.comms.len()
            ));
        }
        let bytes = count
            .checked_mul(2)
            .ok_or("ncclAllReduce: size overflows")?;
        for (i, (send, recv, stream)) in bufs.iter().enumerate() {
            let on_i = |g: &crate::cuda::Gpu| g.ordinal() == i;
            if !(on_i(send.gpu()) && on_i(recv.gpu()) && on_i(stream.gpu())) {
                return Err(format!(
                    "ncclAllReduce: rank {i}'s buffers or stream are on another GPU"
                ));
            }
            if send.len() < bytes || recv.len() < bytes {
                return Err(format!(
                    "ncclAllReduce: rank {i}'s buffers are smaller than {bytes} bytes"
                ));
            }
        }
        // SAFETY: no arguments; opens a group closed below on every path.
        let rc = unsafe { (self.nccl.api.group_start)() };
        self.nccl.check(rc, "ncclGroupStart")?;
        let mut first_err = Ok(());
        for ((send, recv, stream), &comm) in bufs.iter().zip(&self.comms) {
            // SAFETY: the buffers are live device allocations of at least
            // `bytes` on this rank's GPU and the stream is that GPU's
            // (checked above); the communicator is live; the streams hold
            // the buffers (below) until they are synchronised.
            let rc = unsafe {
                (self.nccl.api.all_reduce)(
                    send.ptr() as *const c_void,
                    recv.ptr() as *mut c_void,
                    count,
                    NCCL_FLOAT16,
                    NCCL_SUM,
                    comm,
                    stream.raw(),
                )
            };
            if first_err.is_ok() {
                first_err = self.nccl.check(rc, "ncclAllReduce");
            }
        }
        // SAFETY: closes the group opened above.
        let rc = unsafe { (self.nccl.api.group_end)() };
        let end = self.nccl.check(rc, "ncclGroupEnd");
        // held whatever the outcome: part of the group may have been queued
        for (send, recv, stream) in bufs {
            stream.hold(send);
            stream.hold(recv);
        }
        first_err.and(end)
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        for &c in &self.comms {
            // SAFETY: each handle came from ncclCommInitAll and is
            // destroyed once, here.
            let _ = unsafe { (self.nccl.api.destroy)(c) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_nccl_is_an_error_with_the_name_tried() {
        // SAFETY: no such file: nothing is loaded.
        let e = unsafe { Nccl::load(&["libnccl-not-here-ldb.so.2"]) }.expect_err("absent");
        assert!(e.contains("NCCL cannot be loaded"), "{e}");
        // SAFETY: libc is loaded already (initialisers ran) and has no
        // symbol of NCCL's names, so the table is never built or called.
        let e = unsafe { Nccl::load(&["libc.so.6"]) }.expect_err("not NCCL");
        assert!(e.starts_with("ncclGetVersion"), "{e}");
    }
}
