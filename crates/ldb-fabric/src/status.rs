//! The status values of `p2pmark_status` / `amd_fabric_status` and of each
//! block's `status` key (the reference's, plus `unavailable`).

/// What became of one fabric diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricStatus {
    /// Not asked for.
    NotRun,
    /// Measured (or the helper exited 0 and its JSON line parsed).
    Ok,
    /// The helper exited non-zero or printed no JSON line we could read.
    Failed,
    /// The helper ran past its timeout and was killed.
    Timeout,
    /// The helper could not be started, or the native run hit an OS error.
    Error,
    /// The helper path is missing or not executable.
    MissingBinary,
    /// Not possible on this machine (no CUDA driver, fewer than two GPUs,
    /// no NUMA information); the block's `reason` says which.
    Unavailable,
}

impl FabricStatus {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FabricStatus::NotRun => "not_run",
            FabricStatus::Ok => "ok",
            FabricStatus::Failed => "failed",
            FabricStatus::Timeout => "timeout",
            FabricStatus::Error => "error",
            FabricStatus::MissingBinary => "missing_binary",
            FabricStatus::Unavailable => "unavailable",
        }
    }
}
