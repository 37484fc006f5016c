//! The `p2pmark` and `amd_fabric` result blocks (docs/fabric.md) as a typed
//! envelope: the status and the keys every reader asks for (why it did not
//! run, how long it took, the helper's exit) are fields; the measurement
//! tables under `data` stay the JSON the diagnostic wrote, and every other
//! key is kept as read in `extra`.
//!
//! Why the block remembers the order of its keys: the writers of these
//! blocks (the built-in back ends, the external helpers, the reference
//! tool) each put the keys in their own order, and a file read and written
//! again must keep every byte of them (the golden round-trip tests). A key
//! whose value does not have the field's type (an integer timeout, a `null`
//! reason) stays in `extra` untouched rather than being converted.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// What became of one fabric diagnostic (the block's `status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FabricStatus {
    /// Not asked for (also a block without a status, or `null`).
    #[default]
    NotRun,
    /// Measured (or the helper exited 0 and its JSON line parsed).
    Ok,
    /// The helper exited non-zero or printed no JSON line we could read.
    Failed,
    /// Ran past its timeout.
    Timeout,
    /// Could not be started, or the native run hit an OS error.
    Error,
    /// The helper path is missing or not executable.
    MissingBinary,
    /// Not possible on this machine (`reason` says why).
    Unavailable,
    /// A spelling this build does not know, kept as written.
    Other(String),
}

impl FabricStatus {
    /// The JSON spelling.
    pub fn as_str(&self) -> &str {
        match self {
            FabricStatus::NotRun => "not_run",
            FabricStatus::Ok => "ok",
            FabricStatus::Failed => "failed",
            FabricStatus::Timeout => "timeout",
            FabricStatus::Error => "error",
            FabricStatus::MissingBinary => "missing_binary",
            FabricStatus::Unavailable => "unavailable",
            FabricStatus::Other(s) => s,
        }
    }

    /// The status spelled `s`.
    pub fn parse(s: &str) -> FabricStatus {
        match s {
            "not_run" => FabricStatus::NotRun,
            "ok" => FabricStatus::Ok,
            "failed" => FabricStatus::Failed,
            "timeout" => FabricStatus::Timeout,
            "error" => FabricStatus::Error,
            "missing_binary" => FabricStatus::MissingBinary,
            "unavailable" => FabricStatus::Unavailable,
            other => FabricStatus::Other(other.to_string()),
        }
    }
}

/// One fabric diagnostic's block. `Default` is a block never filled in,
/// written as `{"status": "not_run"}`. Two blocks are equal when they hold
/// the same keys and values, whatever order they were read in.
#[derive(Debug, Clone, Default)]
pub struct FabricBlock {
    /// `status` (always written).
    pub status: FabricStatus,
    /// `binary`: the helper's path, or `native` for the built-in back end.
    pub binary: Option<String>,
    /// `mode` (`p2pmark`: the `--p2pmark-mode` asked for).
    pub mode: Option<String>,
    /// `reason`: why the diagnostic is `unavailable` here.
    pub reason: Option<String>,
    /// `error`: why it ended in `error` or `missing_binary`.
    pub error: Option<String>,
    /// `suggestion`: how to get a missing helper.
    pub suggestion: Option<String>,
    /// `cmd`: the helper's command line as run.
    pub cmd: Option<Vec<String>>,
    /// `returncode`: the helper's exit status.
    pub returncode: Option<i64>,
    /// `stdout` of the helper (partial after a timeout).
    pub stdout: Option<String>,
    /// `stderr` of the helper (partial after a timeout).
    pub stderr: Option<String>,
    /// `parse_error`: why the helper's last line was not read.
    pub parse_error: Option<String>,
    /// `timeout_seconds`: the limit the run passed.
    pub timeout_seconds: Option<f64>,
    /// `elapsed_seconds`: how long the diagnostic ran.
    pub elapsed_seconds: Option<f64>,
    /// `data`: the measurement tables, as the diagnostic wrote them
    /// (docs/fabric.md lists their keys).
    pub data: Option<Value>,
    /// Every other key (`topology`, `notes`, `single_gpu`, `machine`, and
    /// keys of other writers), and a known key whose value did not have its
    /// field's type, as read.
    pub extra: Map<String, Value>,
    /// The keys in the order they were read (see the module doc).
    order: Vec<String>,
}

/// The typed keys, in the order a block built here writes them (the order
/// of `ldb-fabric`'s fixtures: status, what ran, how it ended, the data).
const TYPED_KEYS: [&str; 14] = [
    "status",
    "binary",
    "mode",
    "reason",
    "error",
    "suggestion",
    "cmd",
    "returncode",
    "stdout",
    "stderr",
    "timeout_seconds",
    "elapsed_seconds",
    "data",
    "parse_error",
];

impl FabricBlock {
    /// A block with status `status` and nothing else.
    pub fn with_status(status: FabricStatus) -> FabricBlock {
        FabricBlock {
            status,
            ..FabricBlock::default()
        }
    }

    /// True unless the diagnostic was not asked for.
    pub fn ran(&self) -> bool {
        self.status != FabricStatus::NotRun
    }

    /// The block read from a JSON value (`null` or a non-object reads as
    /// a block never filled in).
    pub fn from_value(v: &Value) -> FabricBlock {
        FabricBlock::from(v.clone())
    }

    /// The block as a JSON value, keys in the order they were read.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }

    /// A key of `extra` (`topology`, `single_gpu`, `machine`, …), or `null`.
    pub fn extra_key(&self, key: &str) -> &Value {
        self.extra.get(key).unwrap_or(&Value::Null)
    }

    /// `data`, or `null` when absent.
    pub fn data(&self) -> &Value {
        self.data.as_ref().unwrap_or(&Value::Null)
    }

    fn from_map(m: Map<String, Value>) -> FabricBlock {
        let mut b = FabricBlock::default();
        for (key, value) in m {
            b.order.push(key.clone());
            if !b.take(&key, &value) {
                b.extra.insert(key, value);
            }
        }
        b
    }

    /// Put `value` in the typed field `key` when it is one and the value
    /// has that field's type exactly (writes back to the same JSON).
    fn take(&mut self, key: &str, value: &Value) -> bool {
        match key {
            "status" => match value.as_str() {
                Some(s) => {
                    self.status = FabricStatus::parse(s);
                    true
                }
                None => false,
            },
            "data" => {
                self.data = Some(value.clone());
                true
            }
            "binary" => exact(value, &mut self.binary),
            "mode" => exact(value, &mut self.mode),
            "reason" => exact(value, &mut self.reason),
            "error" => exact(value, &mut self.error),
            "suggestion" => exact(value, &mut self.suggestion),
            "cmd" => exact(value, &mut self.cmd),
            "returncode" => exact(value, &mut self.returncode),
            "stdout" => exact(value, &mut self.stdout),
            "stderr" => exact(value, &mut self.stderr),
            "parse_error" => exact(value, &mut self.parse_error),
            "timeout_seconds" => exact(value, &mut self.timeout_seconds),
            "elapsed_seconds" => exact(value, &mut self.elapsed_seconds),
            _ => false,
        }
    }

    /// The typed field `key` as JSON, when set.
    fn typed(&self, key: &str) -> Option<Value> {
        fn json<T: Serialize>(v: &Option<T>) -> Option<Value> {
            v.as_ref().and_then(|v| serde_json::to_value(v).ok())
        }
        match key {
            // a `status` read that was not a string is kept in `extra`
            "status" if self.status == FabricStatus::NotRun && self.extra.contains_key(key) => None,
            "status" => Some(Value::String(self.status.as_str().to_string())),
            "data" => self.data.clone(),
            "binary" => json(&self.binary),
            "mode" => json(&self.mode),
            "reason" => json(&self.reason),
            "error" => json(&self.error),
            "suggestion" => json(&self.suggestion),
            "cmd" => json(&self.cmd),
            "returncode" => json(&self.returncode),
            "stdout" => json(&self.stdout),
            "stderr" => json(&self.stderr),
            "parse_error" => json(&self.parse_error),
            "timeout_seconds" => json(&self.timeout_seconds),
            "elapsed_seconds" => json(&self.elapsed_seconds),
            _ => None,
        }
    }

    /// The keys read, in their order; then typed fields set since, in
    /// [`TYPED_KEYS`] order; then `extra` keys added since.
    fn to_map(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for key in &self.order {
            if let Some(v) = self.typed(key).or_else(|| self.extra.get(key).cloned()) {
                out.insert(key.clone(), v);
            }
        }
        for key in TYPED_KEYS {
            if !out.contains_key(key)
                && let Some(v) = self.typed(key)
            {
                out.insert(key.to_string(), v);
            }
        }
        for (key, v) in &self.extra {
            if !out.contains_key(key) {
                out.insert(key.clone(), v.clone());
            }
        }
        out
    }
}

/// Set `field` from `value` when `value` has its type exactly: converted
/// back it is the same JSON (an integer is not an `f64`, `null` is not a
/// string). False leaves `field` alone.
fn exact<T: DeserializeOwned + Serialize>(value: &Value, field: &mut Option<T>) -> bool {
    match serde_json::from_value::<T>(value.clone()) {
        Ok(t) if serde_json::to_value(&t).ok().as_ref() == Some(value) => {
            *field = Some(t);
            true
        }
        _ => false,
    }
}

impl PartialEq for FabricBlock {
    fn eq(&self, other: &FabricBlock) -> bool {
        // serde_json's ordered map compares as a map: the order is ignored
        self.to_map() == other.to_map()
    }
}

impl From<Value> for FabricBlock {
    fn from(v: Value) -> FabricBlock {
        match v {
            Value::Object(m) => FabricBlock::from_map(m),
            _ => FabricBlock::default(),
        }
    }
}

impl Serialize for FabricBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

impl<'de> Deserialize<'de> for FabricBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(FabricBlock::from(Value::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_without_keys_is_not_run_and_written_so() {
        let b = FabricBlock::from_value(&Value::Null);
        assert!(!b.ran());
        assert_eq!(b.to_value().to_string(), r#"{"status":"not_run"}"#);
    }

    #[test]
    fn a_value_of_another_type_stays_as_read() {
        let text = r#"{"timeout_seconds":60,"status":"weird","reason":null,"x":[1]}"#;
        let b: FabricBlock = serde_json::from_str(text).expect("reads");
        assert_eq!(b.timeout_seconds, None);
        assert_eq!(b.status, FabricStatus::Other("weird".into()));
        assert_eq!(b.extra["timeout_seconds"], 60);
        assert_eq!(serde_json::to_string(&b).expect("writes"), text);
    }

    #[test]
    fn blocks_with_the_same_keys_in_another_order_are_equal() {
        let a = FabricBlock::from_value(&serde_json::json!({"status": "ok", "binary": "native"}));
        let b = FabricBlock::from_value(&serde_json::json!({"binary": "native", "status": "ok"}));
        assert_eq!(a, b);
        assert_ne!(a, FabricBlock::with_status(FabricStatus::Ok));
    }

    #[test]
    fn fields_set_after_reading_come_after_the_keys_read() {
        let mut b = FabricBlock::from_value(&serde_json::json!({"binary": "native"}));
        b.status = FabricStatus::Timeout;
        b.timeout_seconds = Some(1.5);
        assert_eq!(
            b.to_value().to_string(),
            r#"{"binary":"native","status":"timeout","timeout_seconds":1.5}"#
        );
    }
}
