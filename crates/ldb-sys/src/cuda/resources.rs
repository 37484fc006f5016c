//! Owned CUDA resources, each freed when dropped: device memory
//! ([`DeviceBuffer`]), streams ([`Stream`]) with the one copy the fabric
//! diagnostic needs, timing events ([`Event`]) and loaded modules
//! ([`Module`]). Each holds a clone of its [`Gpu`], so its context is
//! alive when it is released. Bounds are checked here, before the driver
//! sees an address, so no call can reach past an allocation. Work queued on
//! a [`Stream`] runs after the call returns, so the stream holds a share of
//! everything that work touches until it is synchronised: dropping a buffer
//! early cannot free memory a copy or a kernel still uses.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_void};
use std::rc::Rc;

use super::Gpu;
use super::api::{
    CU_EVENT_DEFAULT, CU_STREAM_NON_BLOCKING, CuDevicePtr, CuEvent, CuFunction, CuModule, CuStream,
};

/// Device memory on one GPU.
#[derive(Debug)]
pub struct DeviceBuffer {
    gpu: Gpu,
    ptr: CuDevicePtr,
    bytes: usize,
}

impl DeviceBuffer {
    /// `bytes` of device memory on `gpu` (contents undefined).
    pub fn alloc(gpu: &Gpu, bytes: usize) -> Result<DeviceBuffer, String> {
        gpu.make_current()?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: the driver writes one device address into our local; the
        // allocation is freed once, in `drop`.
        let rc = unsafe { (gpu.driver().api.mem_alloc)(&mut ptr, bytes.max(1)) };
        gpu.driver().check(rc, "cuMemAlloc_v2")?;
        Ok(DeviceBuffer {
            gpu: gpu.clone(),
            ptr,
            bytes,
        })
    }

    /// The device address (unified: valid in every context with peer
    /// access to this GPU).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Size, bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Zero bytes?
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The GPU it lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn check_range(&self, offset: usize, len: usize, what: &str) -> Result<(), String> {
        match offset.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(format!(
                "{what}: {len} bytes at offset {offset} do not fit in a {}-byte buffer",
                self.bytes
            )),
        }
    }

    /// Set every byte to `value` (synchronous with respect to the host).
    pub fn fill(&self, value: u8) -> Result<(), String> {
        self.gpu.make_current()?;
        // SAFETY: the range is exactly this allocation.
        let rc = unsafe { (self.gpu.driver().api.memset_d8)(self.ptr, value, self.bytes) };
        self.gpu.driver().check(rc, "cuMemsetD8_v2")?;
        self.gpu.synchronize()
    }

    /// Copy `words` from the host to `offset` bytes into the buffer;
    /// returns when the data is on the device (the driver may return
    /// earlier for pageable memory, so the context is synchronised: work
    /// on non-blocking streams would not wait for it otherwise).
    pub fn upload(&self, offset: usize, words: &[u64]) -> Result<(), String> {
        let len = std::mem::size_of_val(words);
        self.check_range(offset, len, "cuMemcpyHtoD_v2")?;
        self.gpu.make_current()?;
        // SAFETY: the host range is `words` (live, `len` bytes); the device
        // range is inside this allocation (checked above).
        let rc = unsafe {
            (self.gpu.driver().api.memcpy_htod)(
                self.ptr + offset as u64,
                words.as_ptr().cast::<c_void>(),
                len,
            )
        };
        self.gpu.driver().check(rc, "cuMemcpyHtoD_v2")?;
        self.gpu.synchronize()
    }

    /// Copy from `offset` bytes into the buffer to the host (returns when
    /// the copy is done; it does not wait for non-blocking streams, so
    /// callers synchronise the stream that wrote the data first).
    pub fn download(&self, offset: usize, words: &mut [u64]) -> Result<(), String> {
        let len = std::mem::size_of_val(words);
        self.check_range(offset, len, "cuMemcpyDtoH_v2")?;
        self.gpu.make_current()?;
        // SAFETY: the host range is `words` (live, writable, `len` bytes;
        // any bit pattern is a valid u64); the device range is inside this
        // allocation (checked above).
        let rc = unsafe {
            (self.gpu.driver().api.memcpy_dtoh)(
                words.as_mut_ptr().cast::<c_void>(),
                self.ptr + offset as u64,
                len,
            )
        };
        self.gpu.driver().check(rc, "cuMemcpyDtoH_v2")
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.gpu.make_current().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc_v2 in this (still
            // retained) context and is freed only here.
            let _ = unsafe { (self.gpu.driver().api.mem_free)(self.ptr) };
        }
    }
}

/// A non-blocking stream on one GPU.
pub struct Stream {
    gpu: Gpu,
    raw: CuStream,
    /// What the queued work uses, released when the stream is synchronised
    /// (or dropped, which synchronises first).
    in_flight: RefCell<Vec<Rc<dyn Any>>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("gpu", &self.gpu)
            .field("in_flight", &self.in_flight.borrow().len())
            .finish()
    }
}

impl Stream {
    /// A new stream in `gpu`'s context.
    pub fn new(gpu: &Gpu) -> Result<Stream, String> {
        gpu.make_current()?;
        let mut raw: CuStream = std::ptr::null_mut();
        // SAFETY: the driver writes one stream handle into our local; it is
        // destroyed once, in `drop`.
        let rc = unsafe { (gpu.driver().api.stream_create)(&mut raw, CU_STREAM_NON_BLOCKING) };
        gpu.driver().check(rc, "cuStreamCreate")?;
        Ok(Stream {
            gpu: gpu.clone(),
            raw,
            in_flight: RefCell::default(),
        })
    }

    /// The GPU whose context owns it.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub(crate) fn raw(&self) -> CuStream {
        self.raw
    }

    /// Keep `what` alive until the work queued so far is done (the next
    /// [`Stream::synchronize`]). Each allocation is held once.
    pub(crate) fn hold<T: Any>(&self, what: &Rc<T>) {
        let what: Rc<dyn Any> = Rc::<T>::clone(what);
        let mut held = self.in_flight.borrow_mut();
        let same = |h: &Rc<dyn Any>| std::ptr::addr_eq(Rc::as_ptr(h), Rc::as_ptr(&what));
        if !held.iter().any(same) {
            held.push(what);
        }
    }

    /// Allocations held for queued work (see [`Stream::synchronize`]).
    pub fn held(&self) -> usize {
        self.in_flight.borrow().len()
    }

    /// Enqueue a copy of `bytes` from `src` (at `src_off`) to `dst` (at
    /// `dst_off`); the buffers may live on any GPUs (the driver goes
    /// through the host where there is no peer path). Both stay alive until
    /// the stream is synchronised.
    pub fn copy(
        &self,
        dst: &Rc<DeviceBuffer>,
        dst_off: usize,
        src: &Rc<DeviceBuffer>,
        src_off: usize,
        bytes: usize,
    ) -> Result<(), String> {
        dst.check_range(dst_off, bytes, "cuMemcpyPeerAsync (destination)")?;
        src.check_range(src_off, bytes, "cuMemcpyPeerAsync (source)")?;
        self.gpu.make_current()?;
        // SAFETY: both device ranges are inside live allocations (checked
        // above), both contexts are retained, the stream is live; the
        // buffers outlive the copy: the stream holds them (below) until it
        // is synchronised.
        let rc = unsafe {
            (self.gpu.driver().api.memcpy_peer_async)(
                dst.ptr + dst_off as u64,
                dst.gpu.ctx(),
                src.ptr + src_off as u64,
                src.gpu.ctx(),
                bytes,
                self.raw,
            )
        };
        self.gpu.driver().check(rc, "cuMemcpyPeerAsync")?;
        self.hold(dst);
        self.hold(src);
        Ok(())
    }

    /// Wait until everything enqueued so far has finished, then let go of
    /// what it used. On an error nothing is let go: the work may still run.
    pub fn synchronize(&self) -> Result<(), String> {
        // SAFETY: the stream handle is live.
        let rc = unsafe { (self.gpu.driver().api.stream_synchronize)(self.raw) };
        self.gpu.driver().check(rc, "cuStreamSynchronize")?;
        self.in_flight.borrow_mut().clear();
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // the held buffers are freed after this, with the fields: wait for
        // the work that uses them first
        let _ = self.synchronize();
        if self.gpu.make_current().is_ok() {
            // SAFETY: created by cuStreamCreate, destroyed only here.
            let _ = unsafe { (self.gpu.driver().api.stream_destroy)(self.raw) };
        }
    }
}

/// A timing event.
#[derive(Debug)]
pub struct Event {
    gpu: Gpu,
    raw: CuEvent,
}

impl Event {
    /// A new timing event in `gpu`'s context.
    pub fn new(gpu: &Gpu) -> Result<Event, String> {
        gpu.make_current()?;
        let mut raw: CuEvent = std::ptr::null_mut();
        // SAFETY: the driver writes one event handle into our local; it is
        // destroyed once, in `drop`.
        let rc = unsafe { (gpu.driver().api.event_create)(&mut raw, CU_EVENT_DEFAULT) };
        gpu.driver().check(rc, "cuEventCreate")?;
        Ok(Event {
            gpu: gpu.clone(),
            raw,
        })
    }

    /// Record the event on `stream` (which must be of the same GPU, as the
    /// driver requires).
    pub fn record(&self, stream: &Stream) -> Result<(), String> {
        if stream.gpu.ordinal() != self.gpu.ordinal() {
            return Err("cuEventRecord: event and stream belong to different GPUs".into());
        }
        self.gpu.make_current()?;
        // SAFETY: both handles are live and of the same context.
        let rc = unsafe { (self.gpu.driver().api.event_record)(self.raw, stream.raw) };
        self.gpu.driver().check(rc, "cuEventRecord")
    }

    /// Wait for the event.
    pub fn synchronize(&self) -> Result<(), String> {
        // SAFETY: the event handle is live.
        let rc = unsafe { (self.gpu.driver().api.event_synchronize)(self.raw) };
        self.gpu.driver().check(rc, "cuEventSynchronize")
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64, String> {
        let mut ms: f32 = 0.0;
        // SAFETY: both handles are live; the driver writes one float.
        let rc = unsafe { (self.gpu.driver().api.event_elapsed_time)(&mut ms, self.raw, end.raw) };
        self.gpu.driver().check(rc, "cuEventElapsedTime")?;
        Ok(f64::from(ms))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.gpu.make_current().is_ok() {
            // SAFETY: created by cuEventCreate, destroyed only here.
            let _ = unsafe { (self.gpu.driver().api.event_destroy)(self.raw) };
        }
    }
}

/// A module loaded from PTX text.
#[derive(Debug)]
pub struct Module {
    gpu: Gpu,
    raw: CuModule,
}

impl Module {
    /// Load `ptx` (NUL-terminated PTX text, e.g. NVRTC's output) into
    /// `gpu`'s context; the driver compiles it for the device.
    pub fn load_ptx(gpu: &Gpu, ptx: &CStr) -> Result<Module, String> {
        gpu.make_current()?;
        let mut raw: CuModule = std::ptr::null_mut();
        // SAFETY: `ptx` is a NUL-terminated string, which is what the
        // driver reads for PTX images; the handle is unloaded in `drop`.
        let rc =
            unsafe { (gpu.driver().api.module_load_data)(&mut raw, ptx.as_ptr().cast::<c_void>()) };
        gpu.driver().check(rc, "cuModuleLoadData")?;
        Ok(Module {
            gpu: gpu.clone(),
            raw,
        })
    }

    /// The GPU it is loaded on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The kernel named `name` (an `extern "C"` name).
    pub(crate) fn function(&self, name: &str) -> Result<CuFunction, String> {
        let c = CString::new(name).map_err(|_| format!("bad kernel name {name:?}"))?;
        let mut f: CuFunction = std::ptr::null_mut();
        // SAFETY: the module handle is live; the name is NUL-terminated;
        // the driver writes one handle into our local. The handle is valid
        // while the module is loaded; callers keep it beside the module.
        let rc =
            unsafe { (self.gpu.driver().api.module_get_function)(&mut f, self.raw, c.as_ptr()) };
        self.gpu
            .driver()
            .check(rc, &format!("cuModuleGetFunction({name})"))?;
        Ok(f)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.gpu.make_current().is_ok() {
            // SAFETY: loaded by cuModuleLoadData, unloaded only here.
            let _ = unsafe { (self.gpu.driver().api.module_unload)(self.raw) };
        }
    }
}
