//! The one error type of the command path: each variant is a documented exit
//! code, and its text is the one line printed after `error: `.

use std::fmt;

/// Process exit codes (see `cli::EXIT_CODES`).
pub mod exit {
    /// All cells valid.
    pub const OK: i32 = 0;
    /// `compare` only: a regression beyond the threshold.
    pub const REGRESSION: i32 = 1;
    /// Bad flags or configuration.
    pub const CONFIG: i32 = 2;
    /// Server unreachable or rejecting.
    pub const SERVER: i32 = 3;
    /// Some cells invalid.
    pub const INVALID_CELLS: i32 = 4;
    /// Result file not written.
    pub const OUTPUT: i32 = 5;
    /// `--shards`: a follower lost its leader (its own record is saved), or
    /// the leader stopped the run after losing a follower (`--on-shard-loss stop`).
    pub const SHARD_LOST: i32 = 6;
    /// Interrupted by the user.
    pub const INTERRUPTED: i32 = 130;
}

/// Why the command could not do its job.
#[derive(Debug)]
pub enum AppError {
    /// Bad flags, scenario or configuration (exit 2).
    Config(String),
    /// The server could not be reached or refused us (exit 3).
    Server(String),
    /// The result file could not be written (exit 5).
    Output(String),
}

impl AppError {
    /// The process exit code of this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Config(_) => exit::CONFIG,
            AppError::Server(_) => exit::SERVER,
            AppError::Output(_) => exit::OUTPUT,
        }
    }

    /// A configuration error from anything printable.
    pub fn config(e: impl fmt::Display) -> AppError {
        AppError::Config(e.to_string())
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Config(m) | AppError::Server(m) | AppError::Output(m) => f.write_str(m),
        }
    }
}

/// Print the error as one line and turn it into the exit code. URL
/// credentials and secret query parameters in it are redacted: an error
/// often quotes the URL it failed on (docs/security.md).
pub fn exit_with(r: Result<i32, AppError>) -> i32 {
    r.unwrap_or_else(|e| {
        eprintln!("error: {}", ldb_core::redact::redact_text(&e.to_string()));
        e.exit_code()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_documented_code() {
        assert_eq!(AppError::config("x").exit_code(), 2);
        assert_eq!(AppError::Server("x".into()).exit_code(), 3);
        assert_eq!(AppError::Output("x".into()).exit_code(), 5);
        assert_eq!(exit_with(Ok(4)), 4);
        assert_eq!(exit_with(Err(AppError::config("bad"))), 2);
    }
}
