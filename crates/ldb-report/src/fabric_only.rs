//! The fabric-only file (`--p2pmark-only`, `--amd-fabric-only`: the fabric
//! diagnostics without a server) as a typed document, written through
//! `export::Json` and read back by `report` and `compare`. Its layout is
//! the one the file always had: `metadata`, the NVIDIA P2P override check,
//! then the two fabric blocks (docs/fabric.md).

use ldb_core::document::FabricBlock;
use ldb_core::hardware::p2p::P2pOverride;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `metadata` of a fabric-only file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FabricOnlyMetadata {
    /// This tool's version.
    pub version: String,
    /// `p2pmark_only`, `amd_fabric_only` or `p2pmark_amd_fabric_only`.
    pub mode: String,
    /// When the diagnostics ran (local time).
    pub timestamp: String,
    /// Always `llm-decode-bench`.
    pub tool: String,
}

/// The whole fabric-only file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FabricOnlyDocument {
    /// What ran, when, by which version.
    #[serde(default)]
    pub metadata: FabricOnlyMetadata,
    /// The NVIDIA P2P override check (always written by this tool; an
    /// older or foreign file's `{}` or `null` reads as `None`).
    #[serde(default, deserialize_with = "ldb_core::document::none_if_empty")]
    pub nvidia_p2p_override: Option<P2pOverride>,
    /// The GPU peer-to-peer block (`{"status": "not_run"}` when not asked for).
    #[serde(default)]
    pub p2pmark: FabricBlock,
    /// The CPU/NUMA fabric block (as `p2pmark`).
    #[serde(default)]
    pub amd_fabric: FabricBlock,
}

impl FabricOnlyDocument {
    /// True when `mode` names a fabric-only run.
    pub fn is_fabric_only_mode(mode: &str) -> bool {
        mode.ends_with("_only") && (mode.contains("p2pmark") || mode.contains("amd_fabric"))
    }

    /// The document of a JSON file, when it is a fabric-only file (its
    /// `metadata.mode` says so); `None` for any other file, which the
    /// result loader then reads or refuses. Lenient like the blocks
    /// themselves: a key of an unexpected type reads as absent.
    pub fn from_file_value(v: &Value) -> Option<FabricOnlyDocument> {
        let md = &v["metadata"];
        let mode = md["mode"].as_str()?;
        if !Self::is_fabric_only_mode(mode) {
            return None;
        }
        let text = |k: &str| md[k].as_str().unwrap_or_default().to_owned();
        let p2p = &v["nvidia_p2p_override"];
        Some(FabricOnlyDocument {
            metadata: FabricOnlyMetadata {
                version: text("version"),
                mode: mode.to_owned(),
                timestamp: text("timestamp"),
                tool: text("tool"),
            },
            nvidia_p2p_override: p2p
                .as_object()
                .filter(|o| !o.is_empty())
                .and_then(|_| serde_json::from_value(p2p.clone()).ok()),
            p2pmark: FabricBlock::from_value(&v["p2pmark"]),
            amd_fabric: FabricBlock::from_value(&v["amd_fabric"]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{Exporter, Json};
    use serde_json::json;

    fn doc() -> FabricOnlyDocument {
        FabricOnlyDocument {
            metadata: FabricOnlyMetadata {
                version: "1.2.3".into(),
                mode: "p2pmark_amd_fabric_only".into(),
                timestamp: "2026-12-07T23:00:00.000000".into(),
                tool: "llm-decode-bench".into(),
            },
            nvidia_p2p_override: Some(P2pOverride::default()),
            p2pmark: FabricBlock::from_value(&json!({
                "status": "unavailable", "reason": "no CUDA driver", "mode": "all"
            })),
            amd_fabric: FabricBlock::from_value(&json!({
                "status": "ok", "binary": "native",
                "data": {"bandwidth": {"N0->N0": {"read_gbps": 12.5}}},
                "topology": {"nodes": [0]}, "another_writers_key": [1, 2]
            })),
        }
    }

    /// The typed document writes the bytes the `json!` it replaced did,
    /// and reads back to itself (other writers' keys kept).
    #[test]
    fn the_fabric_only_file_round_trips_in_its_layout() {
        let d = doc();
        let before = json!({
            "metadata": {
                "version": "1.2.3",
                "mode": "p2pmark_amd_fabric_only",
                "timestamp": "2026-12-07T23:00:00.000000",
                "tool": "llm-decode-bench",
            },
            "nvidia_p2p_override": serde_json::to_value(P2pOverride::default()).unwrap(),
            "p2pmark": d.p2pmark,
            "amd_fabric": d.amd_fabric,
        });
        let mut old = serde_json::to_string_pretty(&before).unwrap();
        old.push('\n');
        let bytes = Json.serialize(&d).unwrap();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), old);
        let back: FabricOnlyDocument = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, d);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(FabricOnlyDocument::from_file_value(&v), Some(d));
    }

    #[test]
    fn only_fabric_only_modes_are_read_as_such() {
        let v = json!({"metadata": {"mode": "amd_fabric_only"}, "nvidia_p2p_override": {}});
        let d = FabricOnlyDocument::from_file_value(&v).expect("a fabric-only file");
        assert_eq!(d.nvidia_p2p_override, None);
        assert!(!d.p2pmark.ran() && !d.amd_fabric.ran());
        for mode in [
            json!("decode"),
            json!("completion_stats"),
            json!(3),
            Value::Null,
        ] {
            let v = json!({"metadata": {"mode": mode}});
            assert_eq!(FabricOnlyDocument::from_file_value(&v), None, "{v}");
        }
    }
}
