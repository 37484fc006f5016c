//! The atomic JSON writer: valid output, one-line errors, never a truncated file.

mod common;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ldb_report::json::{write_atomic, write_to};
use serde_json::Value;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn temp_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn writes_the_document_as_valid_json() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("benchmark_results.json");
    let doc = common::seed_doc();
    write_atomic(&path, &doc)?;
    let text = fs::read_to_string(&path)?;
    assert_eq!(text, doc.to_json_string());
    let v: Value = serde_json::from_str(&text)?;
    assert_eq!(v["results"].as_array().map(Vec::len), Some(6));
    assert_eq!(v["metadata"]["run_status"], "complete");
    assert!(temp_files(dir.path()).is_empty());
    Ok(())
}

#[test]
fn a_shorter_document_replaces_a_longer_one_completely() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("out.json");
    write_atomic(&path, &common::seed_doc())?;
    let small = ldb_core::document::ResultDocument::default();
    write_atomic(&path, &small)?;
    let v: Value = serde_json::from_str(&fs::read_to_string(&path)?)?;
    assert_eq!(v["results"], Value::Array(vec![]));
    Ok(())
}

#[test]
fn a_missing_directory_gives_a_one_line_error_naming_the_path() {
    let path = Path::new("/nonexistent-ldb-dir/sub/results.json");
    let err = write_atomic(path, &common::seed_doc()).err();
    let msg = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.contains("/nonexistent-ldb-dir/sub/results.json"),
        "{msg}"
    );
    assert!(
        msg.starts_with("cannot create a temporary file for result file"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn a_path_without_file_name_is_rejected() {
    let err = write_atomic(Path::new("/"), &common::seed_doc()).err();
    let msg = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("does not name a file"), "{msg}");
}

#[cfg(unix)]
#[test]
fn a_read_only_directory_keeps_the_old_file() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("out.json");
    write_atomic(&path, &common::seed_doc())?;
    let before = fs::read_to_string(&path)?;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o555))?;
    // Root ignores directory permissions; there is nothing to check then.
    let probe = dir.path().join("probe");
    let writable = fs::write(&probe, "x").is_ok();
    let res = write_atomic(&path, &common::burst_doc());
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))?;
    if writable {
        let _ = fs::remove_file(&probe);
        return Ok(());
    }
    let msg = res.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("out.json"), "{msg}");
    assert_eq!(fs::read_to_string(&path)?, before);
    assert!(temp_files(dir.path()).is_empty());
    Ok(())
}

#[test]
fn a_concurrent_reader_only_ever_sees_complete_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("live.json");
    let big = common::seed_doc();
    let small = common::interrupted_doc();
    write_atomic(&path, &small)?;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, done) = (path.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !done.load(Ordering::Relaxed) {
                let text = fs::read_to_string(&path).unwrap_or_default();
                if serde_json::from_str::<Value>(&text).is_err() {
                    return Err(format!("partial file seen after {reads} reads"));
                }
                reads += 1;
            }
            Ok(reads)
        })
    };
    for i in 0..200 {
        write_atomic(&path, if i % 2 == 0 { &big } else { &small })?;
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().map_err(|_| "reader panicked")??;
    assert!(reads > 0);
    assert!(temp_files(dir.path()).is_empty());
    Ok(())
}

#[test]
fn write_to_emits_the_same_text() -> TestResult {
    let doc = common::problems_doc();
    let mut buf = Vec::new();
    write_to(&mut buf, &doc)?;
    assert_eq!(String::from_utf8(buf)?, doc.to_json_string());
    Ok(())
}
