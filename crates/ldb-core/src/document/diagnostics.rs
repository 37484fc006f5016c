//! The `startup_diagnostics` block: a snapshot of the host taken before the
//! server is contacted (who ran what, where, with which GPUs), as data.
//! `ldb-telemetry` collects it; this module only says what it holds, so the
//! result model can read it back typed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::fabric::FabricBlock;
use crate::hardware::p2p::P2pOverride;
use crate::hardware::smi::GpuInventory;

/// Record of one command run, as stored in the startup diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// Program and arguments.
    pub cmd: Vec<String>,
    /// Exit status; −1 when it could not start, was killed or timed out.
    pub returncode: i32,
    /// Standard output, trimmed.
    pub stdout: String,
    /// Standard error, trimmed; the failure reason when it did not run.
    pub stderr: String,
    /// True when the time limit killed it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// True when it could not be started at all.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_found: bool,
    /// Time limit it ran under, seconds (not serialized).
    #[serde(skip)]
    pub limit_s: f64,
}

/// The `startup_diagnostics` object. Field order is the reference's;
/// `gpu_inventory` and `gpu_inventory_source` are this tool's and absent
/// from the reference's files, so they stay absent when such a file is
/// written again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartupDiagnostics {
    /// Tool version.
    pub version: String,
    /// Server base URL (credentials removed).
    pub server_url: String,
    /// Host name, or `"unknown"`.
    pub hostname: String,
    /// `uname -a`, or `"unknown"`.
    pub uname: String,
    /// `NCCL_`/`VLLM_`/`SGLANG_`/`CUDA_`/`OMP_` variables, redacted (sorted).
    pub env: BTreeMap<String, String>,
    /// Run arguments by flag, redacted. Values keep their JSON type (the
    /// list flags are recorded as the text given), so this stays a map.
    pub args: Map<String, Value>,
    /// P2P override check (a copy of the document's `nvidia_p2p_override`).
    pub nvidia_p2p_override: P2pOverride,
    /// GPU peer-to-peer diagnostic as measured before the run
    /// (`{"status": "not_run"}` when it was not asked for; docs/fabric.md).
    /// `None` (absent or `null` in the file) is written as `null`.
    pub p2pmark: Option<FabricBlock>,
    /// CPU/NUMA fabric diagnostic, as `p2pmark`.
    pub amd_fabric: Option<FabricBlock>,
    /// GPUs found at startup (absent in the reference's files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_inventory: Option<Vec<GpuInventory>>,
    /// `"nvml"`, `"nvidia-smi"` or `"none"` (absent in the reference's files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_inventory_source: Option<String>,
    /// The inventory query as run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvidia_smi_query: Option<CommandRecord>,
    /// `nvidia-smi topo -m` as run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvidia_smi_topo: Option<CommandRecord>,
    /// Set when `nvidia-smi` could not be started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvidia_smi_error: Option<String>,
    /// Keys of other writers this build does not model, kept as read so a
    /// file written again keeps them (after the known keys).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl StartupDiagnostics {
    /// As a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
    }

    /// The fabric blocks measured before the run (`p2pmark`, `amd_fabric`),
    /// each when it was measured (its status is not `not_run`).
    pub fn fabric_blocks(&self) -> (Option<&FabricBlock>, Option<&FabricBlock>) {
        (ran(&self.p2pmark), ran(&self.amd_fabric))
    }

    /// GPUs found at startup (none when not recorded).
    pub fn gpus(&self) -> &[GpuInventory] {
        self.gpu_inventory.as_deref().unwrap_or_default()
    }
}

/// A block that was measured, if any.
fn ran(block: &Option<FabricBlock>) -> Option<&FabricBlock> {
    block.as_ref().filter(|b| b.ran())
}

/// `Option<T>` blocks written as `{}` when absent, the layout the reference
/// tool uses for a block it did not fill. Reading `{}` or `null` gives
/// `None`, anything else the typed block.
pub(crate) mod empty_object_as_none {
    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::{Map, Value};

    pub(crate) fn serialize<T: Serialize, S: Serializer>(
        v: &Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(block) => block.serialize(s),
            None => Map::new().serialize(s),
        }
    }

    /// [`serialize`] for a field held by reference.
    pub(crate) fn serialize_ref<T: Serialize, S: Serializer>(
        v: &&Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        serialize(v, s)
    }

    pub(crate) fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        let v = Value::deserialize(d)?;
        let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
        if empty {
            return Ok(None);
        }
        T::deserialize(v)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_block_without_our_keys_writes_them_nowhere() {
        let text = r#"{"version":"0.4.29","server_url":"http://h:1","hostname":"h","uname":"u","env":{},"args":{"concurrency":"1,2"},"nvidia_p2p_override":{"effective":false,"configured":false,"params_path":"p","params_available":false,"modprobe_path":"m","modprobe_available":false,"runtime":{},"expected":{},"missing":[],"mismatched":{},"registry_dwords":"","suggested_modprobe_line":"l","suggested_reload":"r"},"p2pmark":{"status":"not_run"},"amd_fabric":{"status":"not_run"},"nvidia_smi_error":"nvidia-smi not found","later_key":[1]}"#;
        let d: StartupDiagnostics = serde_json::from_str(text).expect("reads");
        assert_eq!(d.gpu_inventory, None);
        assert!(d.fabric_blocks().0.is_none());
        assert_eq!(serde_json::to_string(&d).expect("writes"), text);
    }
}
