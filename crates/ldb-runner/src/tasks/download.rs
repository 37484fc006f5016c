//! `--allow-download`: fetch one pinned dataset file, check its sha256, and
//! only then move it into the cache. A file that does not match is never
//! cached, so a later run cannot pick up a bad copy.

use std::path::Path;
use std::time::Duration;

use ldb_eval::sha256::sha256_hex;

use super::TaskError;

/// Whole-request limit (connect, redirects, body).
const TIMEOUT: Duration = Duration::from_secs(180);
/// The pinned files are under 1 MiB; anything far larger is not one of them.
const MAX_BYTES: usize = 64 << 20;

/// Download `url` (following redirects), require sha256 `want`, and write it
/// atomically to `dest`. Returns the bytes.
pub(super) fn fetch_verified(url: &str, want: &str, dest: &Path) -> Result<Vec<u8>, TaskError> {
    // Profiles are resolved from synchronous code that may itself run on a
    // Tokio worker; a private thread with its own runtime works from either.
    let owned = url.to_owned();
    let bytes = std::thread::spawn(move || get(&owned))
        .join()
        .map_err(|_| TaskError(format!("download from {url} failed")))??;
    let got = sha256_hex(&bytes);
    if got != want {
        return Err(TaskError(format!(
            "download from {url}: sha256 {got} does not match the pinned {want}; nothing was cached"
        )));
    }
    store(&bytes, dest)?;
    Ok(bytes)
}

fn get(url: &str) -> Result<Vec<u8>, TaskError> {
    let fail = |what: String| TaskError(format!("download from {url}: {what}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(10))
            .user_agent(concat!("llm-decode-bench/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let mut resp = client
            .get(url)
            .send()
            .await
            .map_err(|e| fail(one_line(&e)))?;
        if !resp.status().is_success() {
            return Err(fail(format!("HTTP {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| fail(one_line(&e)))? {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(fail(format!(
                    "larger than {} MiB, not the pinned file",
                    MAX_BYTES >> 20
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    })
}

/// reqwest errors chain their causes; keep them on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s.replace('\n', " ")
}

/// Write next to `dest` and rename, so the cache never holds a partial file.
fn store(bytes: &[u8], dest: &Path) -> Result<(), TaskError> {
    let fail = |e: std::io::Error| TaskError(format!("{}: {e}", dest.display()));
    let dir = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    ldb_sys::atomic_file::write_bytes(dest, bytes).map_err(|e| fail(e.into_io()))
}
