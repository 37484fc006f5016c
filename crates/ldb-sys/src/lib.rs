//! The workspace's only unsafe code, kept small: pinning the calling thread
//! to a set of CPUs (`sched_setaffinity`), checking whether a shared
//! library can be loaded at run time (`dlopen`), and safe wrappers over the
//! CUDA driver ([`cuda`]), NVRTC ([`nvrtc`]) and NCCL ([`nccl`]), all loaded
//! at run time so that nothing CUDA is linked at build time. Everything
//! above this crate stays `unsafe_code = "forbid"`. It also holds the one
//! function that starts a program ([`child::command`], no unsafe): the
//! operating-system edge, where the benchmark's secrets are kept from
//! children. And the one way a file is replaced ([`atomic_file`], no
//! unsafe): temporary file, flush, rename.
//!
//! What keeps the safe API sound (docs/security.md, "Manifests and
//! ldb-sys"): a loader that would trust the signatures of any file is an
//! `unsafe fn`, reached from safe code only with the library's own names or
//! the file the user named for it ([`user_library`]); the kernels launch
//! only from PTX compiled from the built-in source
//! ([`cuda::kernels::BuiltinPtx`]); every address and index a kernel
//! follows is checked before the launch ([`cuda::launch_checks`], pure
//! functions tested without a device); and whatever a stream's queued work
//! touches stays alive until that stream is synchronised
//! ([`cuda::Stream::synchronize`]).

pub mod atomic_file;
pub mod child;
pub mod clock_sync;
pub mod cuda;
pub mod nccl;
pub mod nvrtc;
pub mod user_library;

use std::io;

/// Pin the calling thread to `cpus` (Linux CPU numbers). An empty list, a
/// CPU number past the kernel's set size, or a refusal by the kernel is an
/// error; the thread's affinity is then unchanged.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to pin to",
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid empty set
    // (what CPU_ZERO would produce).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &cpu in cpus {
        if cpu >= max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the affinity mask size ({max})"),
            ));
        }
        // SAFETY: `cpu` < the set's bit count, checked above; CPU_SET writes
        // one bit inside `set`, which we own.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 means the calling thread; the pointer and size describe
    // `set`, a live, initialised cpu_set_t on our stack that the kernel only
    // reads.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Send SIGKILL to the process group `pgid` (a helper started as the leader
/// of its own group, so that its children die with it and release the
/// pipes we read).
pub fn kill_process_group(pgid: u32) -> io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid)
        .ok()
        .filter(|&p| p > 1)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a process group"))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a
    // negative pid addresses exactly the group `pgid` (> 1, checked above, so
    // never -1 = "every process we may signal").
    let rc = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The first of `names` that the dynamic loader can open, or the loader's
/// error for the last one. The library is closed again before returning:
/// this only answers "is it installed here".
pub fn probe_library(names: &[&str]) -> Result<String, String> {
    let mut last = String::from("no library name given");
    for name in names {
        // SAFETY: loading a shared library runs its initialisers. The names
        // passed here are the CUDA driver, NVRTC and NCCL, whose initialisers
        // only set up their own state; nothing of the library is called and
        // no symbol is kept past the drop below.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => {
                drop(lib);
                return Ok((*name).to_string());
            }
            // the loader's message starts with the name it tried
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_to_cpu_zero_works_and_nonsense_is_refused() {
        // CPU 0 is online on every Linux machine the tests run on.
        std::thread::spawn(|| pin_current_thread(&[0]))
            .join()
            .expect("thread")
            .expect("pin to CPU 0");
        assert!(pin_current_thread(&[]).is_err());
        assert!(pin_current_thread(&[1 << 20]).is_err());
    }

    #[test]
    fn a_missing_library_is_an_error_with_its_name() {
        let e = probe_library(&["libdoes-not-exist-ldb.so.9"]).expect_err("absent");
        assert!(e.contains("libdoes-not-exist-ldb.so.9"), "{e}");
        assert!(probe_library(&["libc.so.6"]).is_ok());
    }

    #[test]
    fn process_group_one_and_zero_are_refused() {
        assert!(kill_process_group(0).is_err());
        assert!(kill_process_group(1).is_err());
    }
}
