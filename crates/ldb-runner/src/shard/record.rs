//! A shard's own record on disk: what it measured, cell by cell, written
//! after every cell (atomically) so a shard that loses its leader still
//! leaves its measurements. Offline shards (`--start-at`) write the same
//! file, and `merge` reads it (`docs/shards.md`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::wire::ShardCellData;

/// The file's format version.
pub const RECORD_VERSION: u32 = 1;

/// One shard's record file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShardRecordFile {
    /// Format version ([`RECORD_VERSION`]).
    pub shard_record_version: u32,
    /// `coordinated` (a follower of a leader) or `offline` (`--start-at`).
    pub mode: String,
    /// `--shards`.
    pub shards: u32,
    /// `--shard-index`.
    pub shard_index: u32,
    /// Digest of the benchmark flags.
    pub flags_digest: String,
    /// `--start-at` (offline shards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at: Option<f64>,
    /// Model name, engine and server label (offline shards: for the merge).
    #[serde(default)]
    pub model: String,
    /// Engine name.
    #[serde(default)]
    pub engine: String,
    /// Offline shards: `--max-error-rate` (the merge's error rule).
    #[serde(default)]
    pub max_error_rate: f64,
    /// Offline shards: the requests asked to ignore end-of-sequence.
    #[serde(default)]
    pub ignore_eos: bool,
    /// Offline shards: the run's metadata as this shard planned it (the
    /// merged result takes shard 0's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ldb_core::document::Metadata>,
    /// Offline shards: what this host's kernel said of its clock's
    /// synchronisation, the worst of the readings at the start and after
    /// each cell (absent in records from before 7 Dec 2026).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_clock: Option<ldb_core::host_clock::HostClock>,
    /// How the shard ended: `finished`, `leader_lost`, or still `running`.
    pub ended: String,
    /// The cells, in the order run.
    pub cells: Vec<ShardCellData>,
}

/// `out.json` → `out.shard-2.json`: where shard `index` writes its record.
pub fn record_path(output: &Path, index: u32) -> PathBuf {
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "result".into());
    let name = match output.extension() {
        Some(ext) => format!("{stem}.shard-{index}.{}", ext.to_string_lossy()),
        None => format!("{stem}.shard-{index}"),
    };
    output.with_file_name(name)
}

/// Write the record atomically (a temporary file renamed over the old one).
pub fn write_record(path: &Path, rec: &ShardRecordFile) -> std::io::Result<()> {
    let text = serde_json::to_string(rec).map_err(std::io::Error::other)?;
    ldb_sys::atomic_file::write_bytes(path, text.as_bytes()).map_err(|e| e.into_io())
}

/// This host's clock-sync state now, from the kernel (`adjtimex`).
pub fn host_clock_now() -> ldb_core::host_clock::HostClock {
    use ldb_core::host_clock::HostClock;
    match ldb_sys::clock_sync::kernel_clock() {
        Ok(k) => HostClock {
            source: "adjtimex".into(),
            synchronised: k.synchronised,
            est_error_s: k.est_error_us as f64 * 1e-6,
            max_error_s: k.max_error_us as f64 * 1e-6,
            read_error: String::new(),
        },
        Err(e) => HostClock {
            read_error: e.to_string(),
            ..HostClock::default()
        },
    }
}

/// Fold a new reading of this host's clock into the record.
pub fn note_host_clock(rec: &mut ShardRecordFile) {
    let now = host_clock_now();
    rec.host_clock = Some(match &rec.host_clock {
        Some(before) => before.worse(&now),
        None => now,
    });
}

/// Read a record file.
pub fn read_record(path: &Path) -> Result<ShardRecordFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rec: ShardRecordFile = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a shard record: {e}", path.display()))?;
    if rec.shard_record_version != RECORD_VERSION {
        return Err(format!(
            "{}: shard record version {} (this program reads {RECORD_VERSION})",
            path.display(),
            rec.shard_record_version
        ));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_followers_file_takes_its_index_before_the_extension() {
        assert_eq!(
            record_path(Path::new("/r/out.json"), 2),
            Path::new("/r/out.shard-2.json")
        );
        assert_eq!(record_path(Path::new("out"), 1), Path::new("out.shard-1"));
    }

    #[test]
    fn a_record_round_trips() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("r.json");
        let rec = ShardRecordFile {
            shard_record_version: RECORD_VERSION,
            mode: "offline".into(),
            shards: 2,
            shard_index: 1,
            ended: "finished".into(),
            cells: vec![ShardCellData::default()],
            ..ShardRecordFile::default()
        };
        write_record(&p, &rec).expect("write");
        let back = read_record(&p).expect("read");
        assert_eq!(back.cells.len(), 1);
        assert_eq!(back.shard_index, 1);
    }
}
