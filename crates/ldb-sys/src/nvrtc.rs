//! NVRTC, the CUDA run-time compiler, loaded at run time: CUDA C source in,
//! PTX text out (which the driver then loads, see
//! [`crate::cuda::Module::load_ptx`]). Signatures from `nvrtc.h` (checked
//! against the `cudarc` crate's generated bindings): `nvrtcResult` is a C
//! enum (`int`), `nvrtcProgram` an opaque pointer.

use std::ffi::{CString, c_char, c_int};

use libloading::Library;

use crate::cuda::{open_first, static_text, sym};

/// NVRTC's library names, newest first (CUDA 13, 12, an unversioned link).
pub const NVRTC_LIBRARIES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

type Program = *mut std::ffi::c_void;
type NvrtcResult = c_int;

/// The NVRTC functions used, copied out of the library (valid while
/// `_lib` is loaded; same owner).
struct Api {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult,
    error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> NvrtcResult,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    log: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    destroy: unsafe extern "C" fn(*mut Program) -> NvrtcResult,
    /// Present from CUDA 11.2 on.
    num_archs: Option<unsafe extern "C" fn(*mut c_int) -> NvrtcResult>,
    archs: Option<unsafe extern "C" fn(*mut c_int) -> NvrtcResult>,
}

/// NVRTC, loaded.
pub struct Nvrtc {
    api: Api,
    /// The library file that opened.
    pub library: String,
    _lib: Library,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("library", &self.library)
            .finish()
    }
}

/// Destroys the program on every path out of `compile_ptx`.
struct ProgramGuard<'a>(&'a Api, Program);

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is
        // destroyed once, here.
        let _ = unsafe { (self.0.destroy)(&mut self.1) };
    }
}

impl Nvrtc {
    /// NVRTC from its own file names, or first the file named in
    /// `LDB_NVRTC_LIBRARY` (see [`crate::user_library`]).
    pub fn load_from_env() -> Result<Nvrtc, String> {
        let names = crate::user_library::names_from_env(
            crate::user_library::NVRTC_ENV,
            "nvrtc",
            NVRTC_LIBRARIES,
        )?;
        // SAFETY: the names are NVRTC's own file names, or the file the user
        // named as NVRTC in LDB_NVRTC_LIBRARY (documented as the path of
        // NVRTC, and named like it: checked above); that variable is the
        // user's statement that the file is NVRTC, as `load` requires.
        unsafe { Nvrtc::load(&names) }
    }

    /// Load the first of `names` that opens.
    ///
    /// # Safety
    /// Every name that may open must be NVRTC: loading runs the file's
    /// initialisers, and its symbols of NVRTC's names are then called with
    /// `nvrtc.h`'s signatures. A file that merely exports those names (a
    /// wrong library named by the user) makes every later call undefined.
    pub unsafe fn load<S: AsRef<str>>(names: &[S]) -> Result<Nvrtc, String> {
        // SAFETY: forwarded: this function's caller vouched for the names.
        let (lib, library) =
            unsafe { open_first(names) }.map_err(|e| format!("NVRTC cannot be loaded ({e})"))?;
        // SAFETY: `lib` is NVRTC (the caller's promise) and each type below
        // is nvrtc.h's signature for that name; the pointers are stored
        // beside `lib` in `Nvrtc` and die with it.
        let api = unsafe {
            Api {
                version: sym(&lib, "nvrtcVersion")?,
                error_string: sym(&lib, "nvrtcGetErrorString")?,
                create: sym(&lib, "nvrtcCreateProgram")?,
                compile: sym(&lib, "nvrtcCompileProgram")?,
                log_size: sym(&lib, "nvrtcGetProgramLogSize")?,
                log: sym(&lib, "nvrtcGetProgramLog")?,
                ptx_size: sym(&lib, "nvrtcGetPTXSize")?,
                ptx: sym(&lib, "nvrtcGetPTX")?,
                destroy: sym(&lib, "nvrtcDestroyProgram")?,
                num_archs: sym(&lib, "nvrtcGetNumSupportedArchs").ok(),
                archs: sym(&lib, "nvrtcGetSupportedArchs").ok(),
            }
        };
        Ok(Nvrtc {
            api,
            library,
            _lib: lib,
        })
    }

    fn check(&self, rc: NvrtcResult, call: &str) -> Result<(), String> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: returns a pointer to a static string (or null) for any
        // code, which `static_text` reads at once.
        let text = unsafe { static_text((self.api.error_string)(rc)) };
        Err(format!("{call}: {text} ({rc})"))
    }

    /// NVRTC's (major, minor) version.
    pub fn version(&self) -> Result<(i32, i32), String> {
        let (mut a, mut b): (c_int, c_int) = (0, 0);
        // SAFETY: NVRTC writes two ints into our locals.
        let rc = unsafe { (self.api.version)(&mut a, &mut b) };
        self.check(rc, "nvrtcVersion")?;
        Ok((a, b))
    }

    /// The architectures this NVRTC compiles for (e.g. 75, 80, 86, 89, 90);
    /// empty when it cannot say (before CUDA 11.2).
    pub fn supported_archs(&self) -> Result<Vec<i32>, String> {
        let (Some(num), Some(get)) = (self.api.num_archs, self.api.archs) else {
            return Ok(Vec::new());
        };
        let mut n: c_int = 0;
        // SAFETY: NVRTC writes one int into our local.
        let rc = unsafe { num(&mut n) };
        self.check(rc, "nvrtcGetNumSupportedArchs")?;
        let mut v: Vec<c_int> = vec![0; usize::try_from(n).unwrap_or(0)];
        if v.is_empty() {
            return Ok(v);
        }
        // SAFETY: `v` has room for the `n` ints NVRTC said it will write.
        let rc = unsafe { get(v.as_mut_ptr()) };
        self.check(rc, "nvrtcGetSupportedArchs")?;
        Ok(v)
    }

    /// Compile `source` (named `name` in messages) with `options` to PTX
    /// text; on a compile error, the error with NVRTC's log.
    pub fn compile_ptx(
        &self,
        source: &str,
        name: &str,
        options: &[String],
    ) -> Result<CString, String> {
        let src = CString::new(source).map_err(|_| "kernel source contains NUL".to_string())?;
        let cname = CString::new(name).map_err(|_| "program name contains NUL".to_string())?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).map_err(|_| format!("option {o:?} contains NUL")))
            .collect::<Result<_, _>>()?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: source and name are NUL-terminated and live; no headers
        // (count 0, null arrays); NVRTC writes one handle into our local.
        let rc = unsafe {
            (self.api.create)(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check(rc, "nvrtcCreateProgram")?;
        let guard = ProgramGuard(&self.api, prog);
        let n = c_int::try_from(opt_ptrs.len()).map_err(|_| "too many options".to_string())?;
        // SAFETY: `opt_ptrs` holds `n` pointers to live NUL-terminated
        // strings (`opts` outlives the call).
        let rc = unsafe { (self.api.compile)(guard.1, n, opt_ptrs.as_ptr()) };
        if let Err(e) = self.check(rc, "nvrtcCompileProgram") {
            return Err(format!("{e}\n{}", self.program_log(guard.1)));
        }
        let mut size = 0usize;
        // SAFETY: NVRTC writes one size into our local.
        let rc = unsafe { (self.api.ptx_size)(guard.1, &mut size) };
        self.check(rc, "nvrtcGetPTXSize")?;
        // the size includes the terminating NUL
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: `buf` has the `size` bytes NVRTC says the PTX needs.
        let rc = unsafe { (self.api.ptx)(guard.1, buf.as_mut_ptr().cast::<c_char>()) };
        self.check(rc, "nvrtcGetPTX")?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf.truncate(end);
        CString::new(buf).map_err(|_| "PTX contains NUL".to_string())
    }

    /// The compiler's log for `prog` (empty when unavailable).
    fn program_log(&self, prog: Program) -> String {
        let mut size = 0usize;
        // SAFETY: NVRTC writes one size into our local.
        if unsafe { (self.api.log_size)(prog, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has the `size` bytes NVRTC says the log needs.
        if unsafe { (self.api.log)(prog, buf.as_mut_ptr().cast::<c_char>()) } != 0 {
            return String::new();
        }
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .trim()
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_nvrtc_is_an_error_with_the_name_tried() {
        // SAFETY: no such file: nothing is loaded.
        let e = unsafe { Nvrtc::load(&["libnvrtc-not-here-ldb.so.99"]) }.expect_err("absent");
        assert!(e.contains("NVRTC cannot be loaded"), "{e}");
        assert!(e.contains("libnvrtc-not-here-ldb.so.99"), "{e}");
        // a library without NVRTC's symbols names the first one missing
        // SAFETY: libc is loaded already (initialisers ran) and has no
        // symbol of NVRTC's names, so the table is never built or called.
        let e = unsafe { Nvrtc::load(&["libc.so.6"]) }.expect_err("not NVRTC");
        assert!(e.starts_with("nvrtcVersion"), "{e}");
    }
}
