//! The one way this program replaces a file: write a new, exclusively
//! created temporary file in the same folder, flush it to disk, rename it
//! over the target, then sync the folder. A reader (or a process killed at
//! any moment) sees the previous complete file or the new complete file,
//! never a truncated one; a failed step removes the temporary file and
//! leaves the old file as it was.
//!
//! Why here: every crate that writes a file (the report's exporters, the
//! runner's caches, shard records and downloads) depends on this crate, and
//! the file-system edge belongs with the other operating-system calls.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an atomic write (or the check before one) failed.
#[derive(Debug)]
pub enum AtomicWriteError {
    /// The target has no file name (it ends in `..` or is a root).
    NotAFile,
    /// A file-system step failed.
    Io {
        /// The step, worded to follow "cannot …": `create a temporary file
        /// for`, `write`, `flush`, `replace`, `create the directory of`,
        /// `create`.
        action: &'static str,
        /// The operating-system error.
        cause: io::Error,
    },
}

impl AtomicWriteError {
    /// The error as an [`io::Error`] (callers whose messages are the
    /// operating system's own).
    pub fn into_io(self) -> io::Error {
        match self {
            AtomicWriteError::NotAFile => {
                io::Error::new(io::ErrorKind::InvalidInput, "the path does not name a file")
            }
            AtomicWriteError::Io { cause, .. } => cause,
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The file name and the folder of `path` (`.` for a bare name).
fn split(path: &Path) -> Result<(PathBuf, String), AtomicWriteError> {
    let name = path
        .file_name()
        .ok_or(AtomicWriteError::NotAFile)?
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// Replaces `path` with what `fill` writes, atomically (see the module
/// doc). The folder must exist. A replaced file takes the default
/// permissions of a new file.
pub fn write(
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<(), AtomicWriteError> {
    let (dir, name) = split(path)?;
    let err = |action, cause| AtomicWriteError::Io { action, cause };
    let (tmp, mut file) =
        create_temp(&dir, &name).map_err(|e| err("create a temporary file for", e))?;
    let written = fill(&mut file)
        .map_err(|e| err("write", e))
        .and_then(|()| file.sync_all().map_err(|e| err("flush", e)));
    drop(file);
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path).map_err(|e| err("replace", e))) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(&dir);
    Ok(())
}

/// Replaces `path` with `bytes` (see [`write`]).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    write(path, |f| io::Write::write_all(f, bytes))
}

/// Tells, before anything is measured, whether [`write`] can succeed at
/// `path`: it must name a file (not a folder); its folder is created when
/// missing; and this process must be able to create files there. The check
/// creates a temporary file and removes it again, so it leaves no file.
pub fn prepare(path: &Path) -> Result<(), AtomicWriteError> {
    let err = |action, cause| AtomicWriteError::Io { action, cause };
    if path.is_dir() {
        return Err(AtomicWriteError::NotAFile);
    }
    let (dir, name) = split(path)?;
    if !dir.is_dir() {
        fs::create_dir_all(&dir).map_err(|e| err("create the directory of", e))?;
    }
    let (tmp, file) = create_temp(&dir, &name).map_err(|e| err("create", e))?;
    drop(file);
    fs::remove_file(&tmp).map_err(|e| err("create", e))
}

/// A new, exclusively created `.<name>.<pid>.<n>.tmp` in `dir`.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Makes the rename durable where the platform allows syncing a folder.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        // Best effort: some platforms and file systems refuse fsync on a folder.
        let _ = d.sync_all();
    }
}
