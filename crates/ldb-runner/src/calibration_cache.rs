//! The calibration cache file (`--calibration-cache`): one entry per
//! engine, model and prompt template, so a server that cannot count tokens
//! is calibrated once. The file is a JSON object `{key: entry}`; entries
//! this build cannot read (another version's) are kept as they are.

use std::path::Path;

use ldb_core::prompt::SizeModel;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One calibrated chars-per-token model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// Padding characters per token.
    pub chars_per_token: f64,
    /// Tokens of the prompt's framing.
    pub overhead_tokens: f64,
    /// When it was written (RFC 3339, local time).
    #[serde(default)]
    pub updated_at: String,
}

/// The cache file's contents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CalibrationCache {
    entries: Map<String, Value>,
}

impl CalibrationCache {
    /// The file's contents; empty when it is missing or not a JSON object.
    pub fn read(path: &Path) -> CalibrationCache {
        let entries = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<Map<String, Value>>(&t).ok())
            .unwrap_or_default();
        CalibrationCache { entries }
    }

    /// The model cached under `key`, when its entry is readable.
    pub fn model(&self, key: &str) -> Option<SizeModel> {
        let e: CacheEntry = serde_json::from_value(self.entries.get(key)?.clone()).ok()?;
        Some(SizeModel {
            chars_per_token: e.chars_per_token,
            overhead_tokens: e.overhead_tokens,
        })
    }

    /// Sets the entry of `key`.
    pub fn set(&mut self, key: &str, entry: &CacheEntry) {
        let v = serde_json::to_value(entry).unwrap_or(Value::Null);
        self.entries.insert(key.to_string(), v);
    }

    /// Writes the file atomically (a temporary file renamed over it); a
    /// failure is silent, as a cache may be read-only.
    pub fn write(&self, path: &Path) {
        let text = Value::Object(self.entries.clone()).to_string();
        let _ = ldb_sys::atomic_file::write_bytes(path, text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_unknown_ones_are_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cache.json");
        assert_eq!(CalibrationCache::read(&path), CalibrationCache::default());
        std::fs::write(&path, r#"{"old": {"something": "else"}}"#).expect("write");
        let mut cache = CalibrationCache::read(&path);
        assert_eq!(cache.model("old"), None);
        let entry = CacheEntry {
            chars_per_token: 4.25,
            overhead_tokens: 41.0,
            updated_at: "2026-12-04T11:00:00+00:00".into(),
        };
        cache.set("vllm:m:abc", &entry);
        cache.write(&path);
        let back = CalibrationCache::read(&path);
        assert_eq!(
            back.model("vllm:m:abc"),
            Some(SizeModel {
                chars_per_token: 4.25,
                overhead_tokens: 41.0
            })
        );
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with(r#"{"old":{"something":"else"},"vllm:m:abc":{"chars_per_token":4.25"#),
            "{text}"
        );
        std::fs::write(&path, "[1, 2]").expect("write");
        assert_eq!(CalibrationCache::read(&path).model("vllm:m:abc"), None);
    }
}
