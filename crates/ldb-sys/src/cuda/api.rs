//! The CUDA driver API functions the fabric diagnostic calls, looked up by
//! name in `libcuda` at run time. Each signature is the one in the driver's
//! `cuda.h` (checked against the generated bindings of the `cudarc` crate,
//! CUDA 12.x): `CUresult` is a C enum (an `int`), `CUdevice` an `int`,
//! `CUdeviceptr` an `unsigned long long` (64-bit builds), and contexts,
//! streams, events, modules and functions are opaque pointers. Where the
//! header maps a name to a versioned symbol (`cuMemAlloc` →
//! `cuMemAlloc_v2`), the versioned symbol is looked up, as `cuda.h` would
//! have the compiler do.

use std::ffi::{c_char, c_int, c_uint, c_void};

use libloading::Library;

/// `CUresult`.
pub type CuResult = c_int;
/// `CUdevice`.
pub type CuDevice = c_int;
/// `CUdeviceptr` (64-bit builds).
pub type CuDevicePtr = u64;
/// `CUcontext`.
pub type CuContext = *mut c_void;
/// `CUstream`.
pub type CuStream = *mut c_void;
/// `CUevent`.
pub type CuEvent = *mut c_void;
/// `CUmodule`.
pub type CuModule = *mut c_void;
/// `CUfunction`.
pub type CuFunction = *mut c_void;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`: enabling twice is not a fault.
pub const CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: CuResult = 704;
/// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
pub const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
/// `CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE` (bytes).
pub const ATTR_L2_CACHE_SIZE: c_int = 38;
/// `CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`.
pub const ATTR_UNIFIED_ADDRESSING: c_int = 41;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
pub const ATTR_CC_MAJOR: c_int = 75;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
pub const ATTR_CC_MINOR: c_int = 76;
/// `CU_STREAM_NON_BLOCKING`: no implicit ordering with the legacy default
/// stream (NCCL and our copies never wait on each other by accident).
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DEFAULT`: a timing event.
pub const CU_EVENT_DEFAULT: c_uint = 0;

/// Declares the function table and its loader in one place, so that each
/// symbol's name and signature are written once.
macro_rules! driver_api {
    ($($field:ident = $sym:literal : fn($($arg:ty),*);)*) => {
        /// The driver functions, copied out of the loaded library. Valid
        /// while the [`Library`] they came from is loaded; the owner
        /// ([`super::Driver`]) keeps both together.
        #[allow(non_snake_case)]
        pub struct DriverApi {
            $(
                #[doc = concat!("`", $sym, "`.")]
                pub $field: unsafe extern "C" fn($($arg),*) -> CuResult,
            )*
        }

        impl DriverApi {
            /// Look every function up; the first missing one is the error.
            ///
            /// # Safety
            /// `lib` must be the CUDA driver, whose symbols of these names
            /// have the signatures declared here, and must stay loaded as
            /// long as the table is used.
            pub unsafe fn load(lib: &Library) -> Result<DriverApi, String> {
                Ok(DriverApi {
                    $(
                        // SAFETY: the caller guarantees the symbol has this
                        // signature; the pointer is copied out and used only
                        // while `lib` stays loaded (the owner keeps it).
                        $field: unsafe {
                            *lib.get::<unsafe extern "C" fn($($arg),*) -> CuResult>(
                                concat!($sym, "\0").as_bytes(),
                            )
                            .map_err(|e| format!("{}: {e}", $sym))?
                        },
                    )*
                })
            }
        }
    };
}

driver_api! {
    init = "cuInit": fn(c_uint);
    driver_get_version = "cuDriverGetVersion": fn(*mut c_int);
    get_error_name = "cuGetErrorName": fn(CuResult, *mut *const c_char);
    get_error_string = "cuGetErrorString": fn(CuResult, *mut *const c_char);
    device_get_count = "cuDeviceGetCount": fn(*mut c_int);
    device_get = "cuDeviceGet": fn(*mut CuDevice, c_int);
    device_get_name = "cuDeviceGetName": fn(*mut c_char, c_int, CuDevice);
    device_get_attribute = "cuDeviceGetAttribute": fn(*mut c_int, c_int, CuDevice);
    device_can_access_peer = "cuDeviceCanAccessPeer": fn(*mut c_int, CuDevice, CuDevice);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CuContext, CuDevice);
    primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(CuDevice);
    ctx_set_current = "cuCtxSetCurrent": fn(CuContext);
    ctx_synchronize = "cuCtxSynchronize": fn();
    ctx_enable_peer_access = "cuCtxEnablePeerAccess": fn(CuContext, c_uint);
    mem_get_info = "cuMemGetInfo_v2": fn(*mut usize, *mut usize);
    mem_alloc = "cuMemAlloc_v2": fn(*mut CuDevicePtr, usize);
    mem_free = "cuMemFree_v2": fn(CuDevicePtr);
    memset_d8 = "cuMemsetD8_v2": fn(CuDevicePtr, u8, usize);
    memcpy_htod = "cuMemcpyHtoD_v2": fn(CuDevicePtr, *const c_void, usize);
    memcpy_dtoh = "cuMemcpyDtoH_v2": fn(*mut c_void, CuDevicePtr, usize);
    memcpy_peer_async = "cuMemcpyPeerAsync":
        fn(CuDevicePtr, CuContext, CuDevicePtr, CuContext, usize, CuStream);
    stream_create = "cuStreamCreate": fn(*mut CuStream, c_uint);
    stream_destroy = "cuStreamDestroy_v2": fn(CuStream);
    stream_synchronize = "cuStreamSynchronize": fn(CuStream);
    event_create = "cuEventCreate": fn(*mut CuEvent, c_uint);
    event_destroy = "cuEventDestroy_v2": fn(CuEvent);
    event_record = "cuEventRecord": fn(CuEvent, CuStream);
    event_synchronize = "cuEventSynchronize": fn(CuEvent);
    event_elapsed_time = "cuEventElapsedTime": fn(*mut f32, CuEvent, CuEvent);
    module_load_data = "cuModuleLoadData": fn(*mut CuModule, *const c_void);
    module_unload = "cuModuleUnload": fn(CuModule);
    module_get_function = "cuModuleGetFunction": fn(*mut CuFunction, CuModule, *const c_char);
    launch_kernel = "cuLaunchKernel": fn(
        CuFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
        CuStream, *mut *mut c_void, *mut *mut c_void
    );
}
