//! Finding, verifying and reading dataset files (the I/O half of dataset
//! profiles; parsing is `ldb_core::eval::datasets`).
//!
//! Order: `--dataset-file PATH` (read as is: its sha256 and record count are
//! recorded, a difference from the pin is a note) → the dataset cache
//! directory (a file there must match its pin) → with `--allow-download`
//! only, the pinned public location. Nothing is ever fetched silently.

use std::path::{Path, PathBuf};

use ldb_core::eval::datasets::DatasetKind;
use ldb_core::eval::sha256::sha256_hex;
use ldb_core::eval::task::DatasetInfo;

use super::{ProfileRequest, TaskError};

/// Where a dataset comes from and what it must look like.
#[derive(Debug, Clone, Copy)]
pub struct Pin {
    /// File name in the cache directory.
    pub file: &'static str,
    /// Records the published file has.
    pub rows: usize,
    /// sha256 of the published file, when pinned.
    pub sha256: Option<&'static str>,
    /// Public location of the published file, when one is pinned.
    pub url: Option<&'static str>,
}

/// The pin of each dataset.
pub fn pin(kind: DatasetKind) -> Pin {
    match kind {
        DatasetKind::Gsm8k => Pin {
            file: "gsm8k_test.jsonl",
            rows: 1319,
            sha256: None,
            url: Some(
                "https://raw.githubusercontent.com/openai/grade-school-math/\
                 3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl",
            ),
        },
        DatasetKind::MmluPro => Pin {
            file: "mmlu_pro_1000.jsonl",
            rows: 1000,
            sha256: None,
            url: None,
        },
        DatasetKind::GpqaDiamond => Pin {
            file: "gpqa_diamond.csv",
            rows: 198,
            sha256: None,
            url: None,
        },
    }
}

/// The default dataset cache: `$XDG_CACHE_HOME/llm-decode-bench/datasets`,
/// else `~/.cache/llm-decode-bench/datasets`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("llm-decode-bench").join("datasets"))
}

/// A dataset file as read, with its provenance (`items_total` is filled in
/// by the caller once the records are parsed).
pub struct ReadDataset {
    /// The file's text.
    pub text: String,
    /// Provenance for the result.
    pub info: DatasetInfo,
}

fn read(path: &Path) -> Result<(String, String), TaskError> {
    let bytes = std::fs::read(path).map_err(|e| TaskError(format!("{}: {e}", path.display())))?;
    let sha = sha256_hex(&bytes);
    let text = String::from_utf8(bytes)
        .map_err(|_| TaskError(format!("{}: not UTF-8 text", path.display())))?;
    Ok((text, sha))
}

/// Locate and read the file of `kind` as `request` allows.
pub fn read_dataset(kind: DatasetKind, request: &ProfileRequest) -> Result<ReadDataset, TaskError> {
    let p = pin(kind);
    if let Some(path) = &request.dataset_file {
        let (text, sha) = read(path)?;
        let note = match p.sha256 {
            Some(want) if want != sha => format!(
                "not the pinned {} file (sha256 {}…); results compare only with runs on the same file",
                kind.name(),
                &sha[..16]
            ),
            None => {
                "no pinned sha256 to compare with; the file's own sha256 is recorded".to_owned()
            }
            _ => String::new(),
        };
        return Ok(ReadDataset {
            text,
            info: DatasetInfo {
                name: kind.name().to_owned(),
                path: path.display().to_string(),
                source: "dataset-file".to_owned(),
                sha256: sha,
                items_total: 0,
                note,
            },
        });
    }
    let dir = request
        .cache_dir
        .clone()
        .or_else(default_cache_dir)
        .ok_or_else(|| TaskError("no dataset cache directory (HOME is not set)".to_owned()))?;
    let cached = dir.join(p.file);
    if cached.is_file() {
        let (text, sha) = read(&cached)?;
        if let Some(want) = p.sha256
            && want != sha
        {
            return Err(TaskError(format!(
                "{}: sha256 {sha} does not match the pinned {want}; delete it or pass --dataset-file",
                cached.display()
            )));
        }
        return Ok(ReadDataset {
            text,
            info: DatasetInfo {
                name: kind.name().to_owned(),
                path: cached.display().to_string(),
                source: "pinned-cache".to_owned(),
                sha256: sha,
                items_total: 0,
                note: String::new(),
            },
        });
    }
    let hint = match p.url {
        Some(url) => format!("download it from {url}"),
        None => "obtain the published file".to_owned(),
    };
    if request.allow_download {
        return Err(TaskError(format!(
            "dataset {} is not cached at {} and this build cannot download it; {hint} to that path, or pass --dataset-file PATH",
            kind.name(),
            cached.display()
        )));
    }
    Err(TaskError(format!(
        "dataset {} is not cached at {}; pass --dataset-file PATH ({hint})",
        kind.name(),
        cached.display()
    )))
}
