//! Finding, verifying and reading dataset files (the I/O half of dataset
//! profiles; parsing is `ldb_eval::datasets`).
//!
//! Order: `--dataset-file PATH` (read as is: its sha256 and record count are
//! recorded, a difference from the pin is a note) → the dataset cache
//! directory (a file there must match its pin) → with `--allow-download`
//! only, the pinned public location. Nothing is ever fetched silently.

use std::path::{Path, PathBuf};

use ldb_eval::datasets::DatasetKind;
use ldb_eval::sha256::sha256_hex;
use ldb_eval::task::DatasetInfo;

use super::{ProfileRequest, TaskError, download};

/// Where a dataset comes from and what it must look like.
#[derive(Debug, Clone, Copy)]
pub struct Pin {
    /// File name in the cache directory.
    pub file: &'static str,
    /// Records the published file has.
    pub rows: usize,
    /// sha256 of the file as cached, when pinned.
    pub sha256: Option<&'static str>,
    /// Public location of exactly that file (what `--allow-download`
    /// fetches), when one is pinned.
    pub url: Option<&'static str>,
    /// The file is published only inside an archive (GPQA): obtaining it is
    /// a manual step.
    pub archive: Option<Archive>,
}

/// A published archive a dataset file is extracted from.
#[derive(Debug, Clone, Copy)]
pub struct Archive {
    /// Public location of the archive at a fixed revision.
    pub url: &'static str,
    /// sha256 of the archive as reported by the reference tool (not
    /// verified by this project: see docs/completion-stats.md § Datasets).
    pub sha256: &'static str,
    /// The member to extract.
    pub member: &'static str,
}

/// The pin of each dataset. Sources and how each sha256 was checked are in
/// docs/completion-stats.md § Datasets.
pub fn pin(kind: DatasetKind) -> Pin {
    match kind {
        // openai/grade-school-math test split, verbatim; the sha256 is of the
        // blob at that commit (unchanged since the release commit).
        DatasetKind::Gsm8k => Pin {
            file: "gsm8k_test.jsonl",
            rows: 1319,
            sha256: Some("3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"),
            url: Some(
                "https://raw.githubusercontent.com/openai/grade-school-math/\
                 3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl",
            ),
            archive: None,
        },
        // The reference tool's stratified 1000-question subset of the
        // TIGER-Lab MMLU-Pro test split, as committed in its repository.
        DatasetKind::MmluPro => Pin {
            file: "mmlu_pro_1000.jsonl",
            rows: 1000,
            sha256: Some("a229ed37f28bea012bf08e81d8ae3358dda17ef7370dca360f632952e3bdcaca"),
            url: Some(
                "https://raw.githubusercontent.com/local-inference-lab/llm-inference-bench/\
                 dfebb74babd6014316058517c66cf32c52cc2412/data/mmlu_pro_1000.jsonl",
            ),
            archive: None,
        },
        // Published only inside a password-protected zip whose authors ask
        // that the plain text is not republished: no file URL, and the CSV's
        // own sha256 could not be checked here, so only the row count is.
        DatasetKind::GpqaDiamond => Pin {
            file: "gpqa_diamond.csv",
            rows: 198,
            sha256: None,
            url: None,
            archive: Some(Archive {
                url: "https://raw.githubusercontent.com/idavidrein/gpqa/\
                      56686c06f5e19865c153de0fdb11be3890014df7/dataset.zip",
                sha256: "461ae7329f15a3e35f8184d2dac24b990f34fdf12f366ca4062d8e6638cd08dc",
                member: "dataset/gpqa_diamond.csv",
            }),
        },
    }
}

/// The pin `request` uses for `kind` (its test override, else the real one).
pub fn pin_for(kind: DatasetKind, request: &ProfileRequest) -> Pin {
    request.pin_override.unwrap_or_else(|| pin(kind))
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
    let p = pin_for(kind, request);
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
    if !request.allow_download {
        let flag = if p.url.is_some() && p.sha256.is_some() {
            " (--allow-download fetches it)"
        } else {
            ""
        };
        return Err(TaskError(format!(
            "dataset {} is not cached at {}; {}, or pass --dataset-file PATH{flag}",
            kind.name(),
            cached.display(),
            how_to_get(&p, &cached)
        )));
    }
    let (Some(url), Some(want)) = (p.url, p.sha256) else {
        return Err(TaskError(format!(
            "dataset {} cannot be downloaded by this tool; {}, or pass --dataset-file PATH",
            kind.name(),
            how_to_get(&p, &cached)
        )));
    };
    let bytes = download::fetch_verified(url, want, &cached)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| TaskError(format!("{}: not UTF-8 text", cached.display())))?;
    Ok(ReadDataset {
        text,
        info: DatasetInfo {
            name: kind.name().to_owned(),
            path: cached.display().to_string(),
            source: "download".to_owned(),
            sha256: want.to_owned(),
            items_total: 0,
            note: String::new(),
        },
    })
}

/// The manual step that puts the published file at `cached`.
fn how_to_get(p: &Pin, cached: &Path) -> String {
    match (p.url, p.archive) {
        (Some(url), _) => format!("download {url} to {}", cached.display()),
        (None, Some(a)) => format!(
            "download {} (sha256 {}…), extract {} with the password given in the GPQA README, and \
             save it as {}",
            a.url,
            &a.sha256[..16],
            a.member,
            cached.display()
        ),
        (None, None) => format!("place the published file at {}", cached.display()),
    }
}
