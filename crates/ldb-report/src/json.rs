//! Atomic writing of the result JSON.
//!
//! The run rewrites its result file after every cell. [`write_atomic`] writes
//! the whole document to a temporary file next to the target, flushes it to
//! disk and renames it over the target, so a reader (or a run killed at any
//! moment) only ever sees the previous complete file or the new complete file,
//! never a truncated one. [`prepare_output`] tells before a run whether
//! writes can succeed at all. The protocol itself is `ldb_sys::atomic_file`,
//! the one file-replacing helper of the program; this module words its
//! errors for a result file.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use ldb_core::document::ResultDocument;
use ldb_sys::atomic_file::{self, AtomicWriteError};

use crate::error::{ReportError, Result};

/// Writes `doc` as pretty JSON to `path`, replacing the file atomically.
///
/// The temporary file lives in the same directory (so the rename never
/// crosses file systems) and is removed again if any step fails. A replaced
/// file takes the default permissions of a new file.
pub fn write_atomic(path: &Path, doc: &ResultDocument) -> Result<()> {
    let text = doc.to_json_string();
    write_bytes_atomic(path, |f| f.write_all(text.as_bytes()))
}

/// Writes `doc` as pretty JSON to any writer (for `--output -` style use).
pub fn write_to(w: &mut impl Write, doc: &ResultDocument) -> io::Result<()> {
    w.write_all(doc.to_json_string().as_bytes())
}

/// The atomic-replace protocol around a `fill` step that writes the contents.
pub(crate) fn write_bytes_atomic(
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> Result<()> {
    atomic_file::write(path, fill).map_err(|e| worded(path, e))
}

/// Prepares, before a run sends anything, the writing of the result file
/// at `path`: the path must name a file (not a directory); its directory is
/// created when missing (the run's output goes there); and this process must
/// be able to create files in it. The check creates a temporary file and
/// removes it again, so it leaves no file behind.
pub fn prepare_output(path: &Path) -> Result<()> {
    atomic_file::prepare(path).map_err(|e| worded(path, e))
}

/// The one-line error naming the result file.
fn worded(path: &Path, e: AtomicWriteError) -> ReportError {
    match e {
        AtomicWriteError::NotAFile => ReportError::NotAFile {
            path: path.to_path_buf(),
        },
        AtomicWriteError::Io { action, cause } => ReportError::Io {
            action,
            path: path.to_path_buf(),
            cause,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".tmp"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn failed_fill_keeps_the_old_file_and_cleans_up()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("out.json");
        fs::write(&path, "{\"old\": true}\n")?;
        let res = write_bytes_atomic(&path, |f| {
            f.write_all(b"{\"new\": tr")?;
            Err(io::Error::other("disk full (injected)"))
        });
        let msg = res.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("out.json") && msg.contains("injected"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
        assert_eq!(fs::read_to_string(&path)?, "{\"old\": true}\n");
        assert!(leftovers(dir.path()).is_empty());
        Ok(())
    }

    #[test]
    fn missing_directories_are_created_and_no_file_is_left()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("a/b/out.json");
        prepare_output(&path)?;
        let b = dir.path().join("a/b");
        assert!(b.is_dir());
        assert_eq!(fs::read_dir(&b)?.count(), 0, "the probe file is gone");
        write_atomic(&path, &ResultDocument::default())?;
        assert!(path.is_file());
        Ok(())
    }

    #[test]
    fn unwritable_paths_fail_the_check_and_leave_nothing()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // A parent that is a file can never be created, whoever runs this.
        let file = dir.path().join("plain");
        fs::write(&file, "x")?;
        let msg = prepare_output(&file.join("sub/out.json"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.starts_with("cannot create the directory of result file")
                && msg.contains("plain/sub/out.json"),
            "{msg}"
        );
        // A directory is not a file.
        let msg = prepare_output(dir.path()).err().map(|e| e.to_string());
        assert!(
            msg.is_some_and(|m| m.contains("does not name a file")),
            "a directory passed"
        );
        prepare_output(&dir.path().join("out.json"))?;
        let names: Vec<_> = fs::read_dir(dir.path())?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("plain")]);
        Ok(())
    }

    /// A save that fails after earlier ones leaves the last complete file.
    #[test]
    fn a_later_failed_save_keeps_the_previous_file()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("out.json");
        let mut doc = ResultDocument::default();
        doc.metadata.model = "first".into();
        write_atomic(&path, &doc)?;
        let before = fs::read_to_string(&path)?;
        let res = write_bytes_atomic(&path, |f| {
            f.write_all(b"{\"metadata\": ")?;
            Err(io::Error::from_raw_os_error(28))
        });
        assert!(res.is_err());
        assert_eq!(fs::read_to_string(&path)?, before);
        assert!(ResultDocument::from_json_str(&before).is_ok());
        assert!(leftovers(dir.path()).is_empty());
        Ok(())
    }

    #[test]
    fn rename_failure_cleans_up() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("busy");
        fs::create_dir(&target)?;
        fs::write(target.join("keep"), "x")?;
        let res = write_bytes_atomic(&target, |f| f.write_all(b"{}"));
        let msg = res.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.starts_with("cannot replace result file") && msg.contains("busy"),
            "{msg}"
        );
        assert!(leftovers(dir.path()).is_empty());
        assert_eq!(fs::read_to_string(target.join("keep"))?, "x");
        Ok(())
    }
}
