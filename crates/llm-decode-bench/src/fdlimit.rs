//! Open files: every stream holds a socket (two when the simulator runs in
//! the same process), so thousands of streams pass the usual soft limit of
//! 1,024. Raise the soft limit up to the hard one when that is enough, and
//! otherwise say what is needed before anything is sent.

use crate::error::AppError;

/// Descriptors besides the streams: the runtime, telemetry, scrapes, files.
pub const BASE_FILES: u64 = 256;

/// Make sure this process may open `needed` files; `what` names the user's
/// request in the error ("C = 10000", "selftest up to 4096 streams").
pub fn ensure_open_files(needed: u64, what: &str) -> Result<(), AppError> {
    #[cfg(unix)]
    {
        let (soft, hard) = rlimit::Resource::NOFILE
            .get()
            .map_err(|e| AppError::config(format!("cannot read the open-file limit: {e}")))?;
        if soft >= needed {
            return Ok(());
        }
        if hard >= needed && rlimit::Resource::NOFILE.set(needed, hard).is_ok() {
            return Ok(());
        }
        Err(AppError::config(format!(
            "{what} needs about {needed} open files, but this process may open only {soft} \
             (hard limit {hard}); raise it (e.g. `ulimit -n {needed}`) or use fewer streams"
        )))
    }
    #[cfg(not(unix))]
    {
        let _ = (needed, what);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_need_is_met_and_an_impossible_one_is_one_line() {
        assert!(ensure_open_files(64, "a test").is_ok());
        if cfg!(unix) {
            let e = ensure_open_files(u64::MAX / 2, "C = huge").expect_err("cannot be met");
            let m = e.to_string();
            assert!(m.starts_with("C = huge needs about"), "{m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }
}
