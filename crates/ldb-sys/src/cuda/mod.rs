//! The CUDA driver, loaded at run time (nothing CUDA is linked at build
//! time), behind a small safe API: [`Driver`] (the library and its function
//! table), [`Gpu`] (a device and its retained primary context), and the
//! owned resources in [`resources`] (device memory, streams, events,
//! modules), each released when dropped. Every failure is a `String` that
//! names the call and the driver's error (`cuMemAlloc_v2:
//! CUDA_ERROR_OUT_OF_MEMORY (2): out of memory`).
//!
//! Threading: a CUDA context is current per thread, and these types hold
//! raw handles, so none of them is `Send`: one thread uses them all. Every
//! method that needs a context makes its own current first, so the order
//! of calls never depends on which context another call left current
//! (NCCL, for one, changes it).

pub mod api;
pub mod kernel_buffers;
pub mod kernels;
pub mod launch_checks;
pub mod resources;

use std::ffi::{CStr, c_char, c_int};
use std::rc::Rc;

use libloading::Library;

use api::{CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, CUDA_SUCCESS, CuContext, CuDevice, DriverApi};
pub use resources::{DeviceBuffer, Event, Module, Stream};

/// The CUDA driver's file names, in the order the loader is asked.
pub const DRIVER_LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// Open the first of `names` the dynamic loader finds; otherwise the
/// loader's error for the first name, and the other names tried.
///
/// # Safety
/// Every name that may open must be a library whose initialisers are safe
/// to run here (the CUDA driver, NVRTC or NCCL): the loaders' own contract.
pub(crate) unsafe fn open_first<S: AsRef<str>>(names: &[S]) -> Result<(Library, String), String> {
    let mut first: Option<String> = None;
    for name in names {
        let name = name.as_ref();
        // SAFETY: loading a shared library runs its initialisers: the
        // caller promised (this function's `# Safety`) that the names are
        // the CUDA driver, NVRTC or NCCL, whose initialisers set up only
        // their own state.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, name.to_string())),
            Err(e) => {
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let others: Vec<&str> = names.iter().skip(1).map(AsRef::as_ref).collect();
    match (first, others.is_empty()) {
        (None, _) => Err("no library name given".into()),
        (Some(e), true) => Err(e),
        (Some(e), false) => Err(format!("{e}; also tried {}", others.join(", "))),
    }
}

/// Look `name` up in `lib` as a `T`.
///
/// # Safety
/// `T` must be the symbol's true type, and the copy must not be used after
/// `lib` is unloaded.
pub(crate) unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    let c = format!("{name}\0");
    // SAFETY: forwarded to the caller (type and lifetime).
    unsafe { lib.get::<T>(c.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{name}: {e}"))
}

/// The text of a library's error code: the status-string functions of NCCL
/// and NVRTC return a pointer to a static string, or null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn static_text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated and alive: forwarded to the caller.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// The loaded CUDA driver, initialised (`cuInit`).
pub struct Driver {
    /// Function table; valid while `_lib` is loaded (same owner, same life).
    pub(crate) api: DriverApi,
    /// The library file that opened (e.g. `libcuda.so.1`).
    pub library: String,
    _lib: Library,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("library", &self.library)
            .finish()
    }
}

impl Driver {
    /// The CUDA driver from its own file names ([`DRIVER_LIBRARIES`]).
    pub fn load_system() -> Result<Rc<Driver>, String> {
        // SAFETY: these are the CUDA driver's own file names, as installed
        // with the NVIDIA driver on the loader's path.
        unsafe { Driver::load(DRIVER_LIBRARIES) }
    }

    /// Load the first of `names` that opens, look the API up and call
    /// `cuInit(0)`.
    ///
    /// # Safety
    /// Every name that may open must be the CUDA driver (`libcuda`): loading
    /// runs its initialisers, and its symbols of the driver's names are then
    /// called with `cuda.h`'s signatures.
    pub unsafe fn load<S: AsRef<str>>(names: &[S]) -> Result<Rc<Driver>, String> {
        // SAFETY: forwarded: this function's caller vouched for the names.
        let (lib, library) = unsafe { open_first(names) }
            .map_err(|e| format!("the CUDA driver cannot be loaded ({e})"))?;
        // SAFETY: `lib` is the CUDA driver (the caller's promise); the
        // table's signatures are cuda.h's. The table and the library are
        // stored together in `Driver`, so the pointers never outlive the
        // library.
        let api = unsafe { DriverApi::load(&lib) }?;
        let d = Driver {
            api,
            library,
            _lib: lib,
        };
        // SAFETY: cuInit takes a flags integer (must be 0) and touches no
        // memory of ours.
        d.check(unsafe { (d.api.init)(0) }, "cuInit")?;
        Ok(Rc::new(d))
    }

    /// `Ok` for `CUDA_SUCCESS`, else the call's name and the driver's
    /// description of `rc`.
    pub fn check(&self, rc: c_int, call: &str) -> Result<(), String> {
        if rc == CUDA_SUCCESS {
            return Ok(());
        }
        let text = |f: unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int| {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: the driver writes a pointer to a static string (or
            // leaves it null for an unknown code) into our local `p`.
            let ok = unsafe { f(rc, &mut p) } == CUDA_SUCCESS && !p.is_null();
            // SAFETY: a non-null answer points at a NUL-terminated static
            // string owned by the driver, valid for the library's life.
            ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        let name = text(self.api.get_error_name).unwrap_or_else(|| "CUDA error".into());
        let what = text(self.api.get_error_string).unwrap_or_default();
        Err(format!("{call}: {name} ({rc}): {what}"))
    }

    /// `cuDriverGetVersion`: e.g. 12040 for CUDA 12.4.
    pub fn version(&self) -> Result<i32, String> {
        let mut v: c_int = 0;
        // SAFETY: the driver writes one int into our local.
        let rc = unsafe { (self.api.driver_get_version)(&mut v) };
        self.check(rc, "cuDriverGetVersion")?;
        Ok(v)
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<usize, String> {
        let mut n: c_int = 0;
        // SAFETY: the driver writes one int into our local.
        let rc = unsafe { (self.api.device_get_count)(&mut n) };
        self.check(rc, "cuDeviceGetCount")?;
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

/// One GPU with its primary context retained (released on drop of the
/// last clone). Resources allocated on it hold a clone, so the context
/// outlives them.
#[derive(Clone)]
pub struct Gpu(Rc<GpuInner>);

/// What a [`Gpu`] clone shares.
pub(crate) struct GpuInner {
    pub(crate) driver: Rc<Driver>,
    pub(crate) ordinal: usize,
    pub(crate) device: CuDevice,
    pub(crate) ctx: CuContext,
}

impl Drop for GpuInner {
    fn drop(&mut self) {
        // SAFETY: the primary context was retained once in `Gpu::open`;
        // this is the matching release. Every resource made in it holds a
        // clone of the `Gpu`, so none is left when this runs.
        let _ = unsafe { (self.driver.api.primary_ctx_release)(self.device) };
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu({})", self.0.ordinal)
    }
}

impl Gpu {
    /// GPU `ordinal` (as the driver counts them) with its primary context.
    pub fn open(driver: &Rc<Driver>, ordinal: usize) -> Result<Gpu, String> {
        let ord = c_int::try_from(ordinal).map_err(|_| format!("GPU {ordinal}: no such device"))?;
        let mut device: CuDevice = 0;
        // SAFETY: the driver writes one device handle into our local.
        let rc = unsafe { (driver.api.device_get)(&mut device, ord) };
        driver.check(rc, "cuDeviceGet")?;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: the driver writes one context handle into our local; the
        // retain is released by `GpuInner::drop`.
        let rc = unsafe { (driver.api.primary_ctx_retain)(&mut ctx, device) };
        driver.check(rc, "cuDevicePrimaryCtxRetain")?;
        Ok(Gpu(Rc::new(GpuInner {
            driver: Rc::clone(driver),
            ordinal,
            device,
            ctx,
        })))
    }

    /// The driver's ordinal of this GPU.
    pub fn ordinal(&self) -> usize {
        self.0.ordinal
    }

    pub(crate) fn driver(&self) -> &Driver {
        &self.0.driver
    }

    pub(crate) fn ctx(&self) -> CuContext {
        self.0.ctx
    }

    /// Make this GPU's context current on the calling thread.
    pub fn make_current(&self) -> Result<(), String> {
        // SAFETY: the context is retained (alive) for as long as `self`.
        let rc = unsafe { (self.driver().api.ctx_set_current)(self.0.ctx) };
        self.driver().check(rc, "cuCtxSetCurrent")
    }

    /// Wait for all work in this GPU's context.
    pub fn synchronize(&self) -> Result<(), String> {
        self.make_current()?;
        // SAFETY: no arguments; waits on the current (our) context.
        let rc = unsafe { (self.driver().api.ctx_synchronize)() };
        self.driver().check(rc, "cuCtxSynchronize")
    }

    /// The device's marketing name.
    pub fn name(&self) -> Result<String, String> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` (255) bytes into our
        // 256-byte buffer, so its last byte stays the zero it starts as.
        let rc =
            unsafe { (self.driver().api.device_get_name)(buf.as_mut_ptr(), 255, self.0.device) };
        self.driver().check(rc, "cuDeviceGetName")?;
        // SAFETY: the buffer's last byte is zero (see above), so a
        // terminator exists within it.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// `cuDeviceGetAttribute` for one of the `api::ATTR_*` codes.
    pub fn attribute(&self, attr: c_int) -> Result<i32, String> {
        let mut v: c_int = 0;
        // SAFETY: the driver writes one int into our local.
        let rc = unsafe { (self.driver().api.device_get_attribute)(&mut v, attr, self.0.device) };
        self.driver().check(rc, "cuDeviceGetAttribute")?;
        Ok(v)
    }

    /// Can this GPU access `peer`'s memory directly?
    pub fn can_access_peer(&self, peer: &Gpu) -> Result<bool, String> {
        let mut can: c_int = 0;
        // SAFETY: the driver writes one int into our local.
        let rc = unsafe {
            (self.driver().api.device_can_access_peer)(&mut can, self.0.device, peer.0.device)
        };
        self.driver().check(rc, "cuDeviceCanAccessPeer")?;
        Ok(can != 0)
    }

    /// Let kernels and copies in this context read and write `peer`'s
    /// memory. Enabling twice is not an error.
    pub fn enable_peer_access(&self, peer: &Gpu) -> Result<(), String> {
        self.make_current()?;
        // SAFETY: both contexts are retained and alive; flags must be 0.
        let rc = unsafe { (self.driver().api.ctx_enable_peer_access)(peer.0.ctx, 0) };
        if rc == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        self.driver().check(rc, "cuCtxEnablePeerAccess")
    }

    /// (free, total) device memory, bytes.
    pub fn memory(&self) -> Result<(usize, usize), String> {
        self.make_current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: the driver writes two sizes into our locals.
        let rc = unsafe { (self.driver().api.mem_get_info)(&mut free, &mut total) };
        self.driver().check(rc, "cuMemGetInfo_v2")?;
        Ok((free, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_an_error_with_the_name_tried() {
        // SAFETY: no such file: nothing is loaded.
        let e = unsafe { Driver::load(&["libcuda-not-here-ldb.so.1"]) }.expect_err("absent");
        assert!(e.contains("the CUDA driver cannot be loaded"), "{e}");
        assert!(e.contains("libcuda-not-here-ldb.so.1"), "{e}");
        // a library without the driver's symbols names the first missing
        // SAFETY: libc is loaded already (initialisers ran) and has no
        // symbol of the driver's names, so the table is never built or
        // called.
        let e = unsafe { Driver::load(&["libc.so.6"]) }.expect_err("not a driver");
        assert!(e.starts_with("cuInit"), "{e}");
    }
}
