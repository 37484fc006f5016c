//! The kernel's view of this host's clock synchronisation, read with
//! `adjtimex(2)` in read-only mode (modes = 0: nothing is set).
//!
//! Offline shards (`--start-at`) on several hosts compare windows that each
//! host computed from the same grid on its own clock, so a merge can only be
//! as good as the hosts' clocks. What NTP/PTP daemons (chrony, ntpd,
//! systemd-timesyncd, ptp4l via phc2sys) tell the kernel is the one
//! host-local evidence there is: whether the clock is synchronised
//! (`STA_UNSYNC` clear and a clock state other than `TIME_ERROR`), and the
//! estimated and maximum error they last reported.

use std::io;

/// What the kernel says about the system clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelClock {
    /// A synchronisation daemon keeps the clock in sync: `STA_UNSYNC` is
    /// clear and the clock state is not `TIME_ERROR`.
    pub synchronised: bool,
    /// Estimated error, microseconds (`esterror`, as the daemon set it).
    pub est_error_us: i64,
    /// Maximum error, microseconds (`maxerror`; the kernel grows it by
    /// 500 ppm between daemon updates, up to 16 s).
    pub max_error_us: i64,
    /// The raw status bits (`STA_*`).
    pub status: i32,
    /// The clock state adjtimex returned (`TIME_OK` = 0 … `TIME_ERROR` = 5).
    pub state: i32,
}

/// Read the kernel's clock-sync state. Errors where the system call fails
/// or the platform has none.
#[cfg(target_os = "linux")]
pub fn kernel_clock() -> io::Result<KernelClock> {
    // SAFETY: `timex` is a plain C struct of integers; all-zero is a valid
    // value and `modes = 0` (zeroed) asks adjtimex only to read.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to `tx`, a live, initialised timex on our
    // stack; with modes = 0 the kernel only writes the current values into it.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(KernelClock {
        synchronised: tx.status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
        // c_long: i64 on 64-bit Linux, i32 on 32-bit.
        est_error_us: tx.esterror as i64,
        max_error_us: tx.maxerror as i64,
        status: tx.status,
        state,
    })
}

/// No adjtimex outside Linux.
#[cfg(not(target_os = "linux"))]
pub fn kernel_clock() -> io::Result<KernelClock> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "adjtimex is Linux only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any Linux host answers a read-only adjtimex (unprivileged), with
    /// errors that are not negative; what it says depends on the host.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_answers_a_read_only_query() {
        let k = kernel_clock().expect("adjtimex reads");
        assert!(k.est_error_us >= 0 && k.max_error_us >= 0, "{k:?}");
        assert!((0..=5).contains(&k.state), "{k:?}");
        if k.state == libc::TIME_ERROR {
            assert!(!k.synchronised);
        }
    }
}
