//! Errors of the report crate.

use std::io;
use std::path::PathBuf;

/// Why a result file could not be written.
///
/// The message is one line that names the file and the operating-system
/// reason, ready to print as is.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file-system step of the atomic write failed.
    #[error("cannot {action} result file {}: {cause}", path.display())]
    Io {
        /// What was being done (`create a temporary file for`, `write`, `replace`, …).
        action: &'static str,
        /// The result file the write was for.
        path: PathBuf,
        /// The operating-system error.
        cause: io::Error,
    },
    /// The target path has no file name (it ends in `..` or is a root).
    #[error("cannot write result file {}: the path does not name a file", path.display())]
    NotAFile {
        /// The path as given.
        path: PathBuf,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, ReportError>;
