//! NVIDIA peer-to-peer override check (`nvidia_p2p_override`).
//!
//! The override lives in the nvidia kernel module's `RegistryDwords`
//! parameter. What the running module uses shows in
//! `/proc/driver/nvidia/params`; what will be used after the next module load
//! is in a modprobe file. This module compares both with the expected values.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Default path of the running module's parameters.
pub const PARAMS_PATH: &str = "/proc/driver/nvidia/params";
/// Default path of the modprobe configuration written for the override.
pub const MODPROBE_PATH: &str = "/etc/modprobe.d/nvidia-p2p-override.conf";
/// At most this many characters of the params file are read.
pub const PARAMS_MAX_CHARS: usize = 20_000;
/// Expected `RegistryDwords` entries, in order.
pub const EXPECTED: [(&str, &str); 5] = [
    ("ForceP2P", "0x11"),
    ("RMForceP2PType", "1"),
    ("RMPcieP2PType", "2"),
    ("GrdmaPciTopoCheckOverride", "1"),
    ("EnableResizableBar", "1"),
];
/// Informational params key reported alongside the expected ones.
pub const INFO_KEY: &str = "DmaRemapPeerMmio";
/// What to do after writing the modprobe file.
pub const SUGGESTED_RELOAD: &str = "stop GPU workloads, then reload NVIDIA modules or reboot; the modprobe file alone is not enough until the nvidia module is reloaded";

/// The `nvidia_p2p_override` object (keys as in the reference). Keys
/// missing from a file read back take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct P2pOverride {
    /// Params readable, nothing missing, nothing mismatched.
    pub effective: bool,
    /// The modprobe file sets every expected entry.
    pub configured: bool,
    /// Params file path that was read.
    pub params_path: String,
    /// Whether the params file could be read.
    pub params_available: bool,
    /// Modprobe file path that was read.
    pub modprobe_path: String,
    /// Whether the modprobe file could be read.
    pub modprobe_available: bool,
    /// Values in effect (expected keys, then `DmaRemapPeerMmio`); `""` = absent.
    pub runtime: Map<String, Value>,
    /// Expected values.
    pub expected: Map<String, Value>,
    /// Expected keys with no runtime value.
    pub missing: Vec<String>,
    /// `{key: {expected, actual}}` for differing values.
    pub mismatched: Map<String, Value>,
    /// Raw `RegistryDwords` value from the params file.
    pub registry_dwords: String,
    /// The modprobe line that enables the override.
    pub suggested_modprobe_line: String,
    /// How to apply it.
    pub suggested_reload: String,
    /// Why the result is unknown (unreadable or garbled params), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_error: Option<String>,
}

/// Three-way reading of a [`P2pOverride`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum P2pStatus {
    /// Running module uses the expected values.
    Enabled,
    /// Params readable, but values missing or different.
    NotEffective,
    /// Params not readable or not parseable.
    Unknown,
}

/// `ForceP2P=0x11;RMForceP2PType=1;…` from [`EXPECTED`].
pub fn expected_registry_dwords() -> String {
    EXPECTED
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// `options nvidia NVreg_RegistryDwords="…"`.
pub fn suggested_modprobe_line() -> String {
    format!(
        "options nvidia NVreg_RegistryDwords=\"{}\"",
        expected_registry_dwords()
    )
}

/// Parses `Key: value` lines (quotes stripped), in file order. Lines without
/// a colon are skipped.
pub fn parse_params(text: &str) -> Vec<(String, String)> {
    let text = match text.char_indices().nth(PARAMS_MAX_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), unquote(v.trim()).to_string()))
        .filter(|(k, _)| !k.is_empty() && !k.contains(char::is_whitespace))
        .collect()
}

/// Parses `K=V;K=V` (whitespace and empty entries ignored).
pub fn parse_registry_dwords(s: &str) -> Vec<(String, String)> {
    unquote(s.trim())
        .split(';')
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// `RegistryDwords` entries set by uncommented `options nvidia
/// NVreg_RegistryDwords=…` lines of a modprobe file.
pub fn modprobe_registry_dwords(conf: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in conf.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let mut words = line.split_whitespace();
        if words.next() != Some("options") || words.next() != Some("nvidia") {
            continue;
        }
        if let Some((_, tail)) = line.split_once("NVreg_RegistryDwords=") {
            let value = match tail.strip_prefix('"') {
                Some(q) => q.split('"').next().unwrap_or(""),
                None => tail.split_whitespace().next().unwrap_or(""),
            };
            out.extend(parse_registry_dwords(value));
        }
    }
    out
}

/// Builds the check from what could be read. `params` / `modprobe` are the
/// file contents or the reason they could not be read.
pub fn check_p2p_override(
    params_path: &str,
    params: Result<&str, String>,
    modprobe_path: &str,
    modprobe: Result<&str, String>,
) -> P2pOverride {
    let (entries, mut params_error) = match &params {
        Ok(text) => (parse_params(text), None),
        Err(e) => (
            Vec::new(),
            Some(format!("{params_path} is not readable: {e}")),
        ),
    };
    if params.is_ok() && entries.is_empty() {
        params_error = Some(format!("{params_path} has no `Key: value` lines"));
    }
    let lookup = |k: &str| {
        entries
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let registry_dwords = lookup("RegistryDwords").unwrap_or_default();
    let dwords = parse_registry_dwords(&registry_dwords);
    let mut runtime = Map::new();
    let mut expected = Map::new();
    let mut missing = Vec::new();
    let mut mismatched = Map::new();
    for (k, want) in EXPECTED {
        let actual = dwords
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .or_else(|| lookup(k))
            .unwrap_or_default();
        if actual.is_empty() {
            missing.push(k.to_string());
        } else if !same_value(&actual, want) {
            mismatched.insert(k.to_string(), json!({"expected": want, "actual": actual}));
        }
        runtime.insert(k.to_string(), Value::String(actual));
        expected.insert(k.to_string(), Value::String(want.to_string()));
    }
    runtime.insert(
        INFO_KEY.to_string(),
        Value::String(lookup(INFO_KEY).unwrap_or_default()),
    );
    let configured = match &modprobe {
        Ok(conf) => {
            let set = modprobe_registry_dwords(conf);
            EXPECTED
                .iter()
                .all(|(k, v)| set.iter().any(|(sk, sv)| sk == k && same_value(sv, v)))
        }
        Err(_) => false,
    };
    P2pOverride {
        effective: params_error.is_none() && missing.is_empty() && mismatched.is_empty(),
        configured,
        params_path: params_path.to_string(),
        params_available: params.is_ok(),
        modprobe_path: modprobe_path.to_string(),
        modprobe_available: modprobe.is_ok(),
        runtime,
        expected,
        missing,
        mismatched,
        registry_dwords,
        suggested_modprobe_line: suggested_modprobe_line(),
        suggested_reload: SUGGESTED_RELOAD.to_string(),
        params_error,
    }
}

impl P2pOverride {
    /// Enabled / not effective / unknown.
    pub fn status(&self) -> P2pStatus {
        if self.params_error.is_some() {
            P2pStatus::Unknown
        } else if self.effective {
            P2pStatus::Enabled
        } else {
            P2pStatus::NotEffective
        }
    }

    /// One-line summary for the event log.
    pub fn summary_line(&self) -> String {
        match self.status() {
            P2pStatus::Unknown => format!(
                "unknown: {}",
                self.params_error.as_deref().unwrap_or("params not read")
            ),
            P2pStatus::Enabled => {
                "enabled: runtime NVIDIA P2P override matches expected RegistryDwords".to_string()
            }
            P2pStatus::NotEffective => {
                let mm: Vec<&str> = self.mismatched.keys().map(String::as_str).collect();
                format!(
                    "not effective: missing={}; mismatched={}",
                    list_or_none(&self.missing),
                    list_or_none(&mm)
                )
            }
        }
    }

    /// Lines of the `NVIDIA P2P Override` console panel.
    pub fn panel_lines(&self) -> Vec<String> {
        let yn = |b: bool| if b { "yes" } else { "no" };
        let runtime: Vec<String> = self
            .runtime
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str().filter(|s| !s.is_empty()).unwrap_or("-")
                )
            })
            .collect();
        let mut lines = vec![
            format!("Effective: {}", yn(self.effective)),
            format!(
                "Configured file: {} ({})",
                yn(self.configured),
                self.modprobe_path
            ),
            format!("Runtime: {}", runtime.join("; ")),
        ];
        if let Some(e) = &self.params_error {
            lines.push(format!("Unknown: {e}"));
        }
        if !self.effective {
            lines.push("Suggested modprobe line:".to_string());
            lines.push(self.suggested_modprobe_line.clone());
            lines.push(
                "Apply requires NVIDIA module reload or reboot after stopping GPU workloads."
                    .to_string(),
            );
        }
        lines
    }
}

fn list_or_none<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
}

/// Equal as integers (`0x11` == `17`) when both parse, else as strings.
fn same_value(a: &str, b: &str) -> bool {
    match (parse_int(a), parse_int(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

fn parse_int(s: &str) -> Option<u64> {
    let t = s.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}

#[cfg(test)]
#[path = "p2p_tests.rs"]
mod tests;
