//! Host CPU: utilization and frequency from `sysinfo`, package temperatures
//! from hwmon (`/sys/class/hwmon/*/temp*_input`).

use ldb_core::hardware::CpuSample;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use sysinfo::System;

/// Default hwmon root.
pub const HWMON_ROOT: &str = "/sys/class/hwmon";
/// Most temperature entries kept per sample.
const MAX_TEMPS: usize = 8;
/// hwmon chips that report CPU temperatures.
const CPU_CHIPS: [&str; 4] = ["k10temp", "coretemp", "zenpower", "cpu"];
/// Sensor labels that denote a package / die temperature.
const CPU_LABELS: [&str; 4] = ["package", "tctl", "tdie", "cpu"];

/// Samples the host CPU.
pub struct CpuSource {
    sys: System,
    hwmon_root: PathBuf,
    primed: bool,
}

impl std::fmt::Debug for CpuSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuSource")
            .field("hwmon_root", &self.hwmon_root)
            .finish()
    }
}

impl CpuSource {
    /// A source reading temperatures under `hwmon_root`.
    pub fn new(hwmon_root: impl Into<PathBuf>) -> Self {
        let mut sys = System::new();
        sys.refresh_cpu_usage();
        CpuSource {
            sys,
            hwmon_root: hwmon_root.into(),
            primed: false,
        }
    }

    /// Utilization since the previous call (`None` on the first call, which
    /// has no reference point), mean frequency and package temperatures.
    pub fn sample(&mut self) -> CpuSample {
        self.sys.refresh_cpu_usage();
        self.sys.refresh_cpu_frequency();
        let cpus = self.sys.cpus();
        let util =
            (self.primed && !cpus.is_empty()).then(|| f64::from(self.sys.global_cpu_usage()));
        self.primed = true;
        let freqs: Vec<f64> = cpus
            .iter()
            .map(|c| c.frequency() as f64)
            .filter(|f| *f > 0.0)
            .collect();
        let freq = (!freqs.is_empty()).then(|| freqs.iter().sum::<f64>() / freqs.len() as f64);
        CpuSample {
            util_pct: util.filter(|u| u.is_finite()),
            freq_mhz: freq,
            temps_c: read_hwmon_temps(&self.hwmon_root),
        }
    }
}

/// CPU package temperatures under an hwmon root: chips named like
/// k10temp/coretemp/zenpower/cpu, `tempN_input` in millidegrees whose
/// `tempN_label` names a package/Tctl/Tdie/CPU (or, for a chip without
/// labels, the chip itself). Labels normalize to `CPU<n>` for "Package id
/// <n>", else upper-case alphanumerics (≤ 8); duplicates keep the maximum;
/// at most 8 entries. Unreadable entries are skipped.
pub fn read_hwmon_temps(root: &Path) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let Ok(chips) = fs::read_dir(root) else {
        return out;
    };
    let mut chips: Vec<PathBuf> = chips.filter_map(|e| e.ok().map(|e| e.path())).collect();
    chips.sort();
    for chip in chips.iter().take(64) {
        let name = read_small(&chip.join("name"))
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !CPU_CHIPS.iter().any(|c| name.contains(c)) {
            continue;
        }
        let Ok(files) = fs::read_dir(chip) else {
            continue;
        };
        let mut inputs: Vec<String> = files
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.starts_with("temp") && f.ends_with("_input"))
            .collect();
        inputs.sort();
        for input in inputs.iter().take(64) {
            let stem = input.trim_end_matches("_input");
            let label = read_small(&chip.join(format!("{stem}_label")));
            let label = match label {
                Some(l)
                    if CPU_LABELS
                        .iter()
                        .any(|k| l.to_ascii_lowercase().contains(k)) =>
                {
                    normalize_label(&l)
                }
                Some(_) => continue,
                None if name.contains("cpu") => normalize_label(&name),
                None => continue,
            };
            let Some(c) = read_small(&chip.join(input))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|m| m / 1000.0)
            else {
                continue;
            };
            if !(-40.0..=150.0).contains(&c) {
                continue;
            }
            let e = out.entry(label).or_insert(c);
            *e = e.max(c);
        }
    }
    while out.len() > MAX_TEMPS {
        out.pop_last();
    }
    out
}

fn normalize_label(label: &str) -> String {
    let lower = label.to_ascii_lowercase();
    for key in ["package id", "physical id", "socket"] {
        if let Some(rest) = lower.split(key).nth(1) {
            let n: String = rest
                .trim()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !n.is_empty() {
                return format!("CPU{n}");
            }
        }
    }
    label
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .take(8)
        .collect()
}

fn read_small(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let t = text.trim();
    (!t.is_empty() && t.len() < 256).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_normalize() {
        assert_eq!(normalize_label("Package id 1"), "CPU1");
        assert_eq!(normalize_label("Tctl"), "TCTL");
        assert_eq!(normalize_label("cpu_thermal zone"), "CPUTHERM");
    }

    #[test]
    fn missing_root_gives_nothing() {
        assert!(read_hwmon_temps(Path::new("/nonexistent/hwmon")).is_empty());
    }

    #[test]
    fn sampling_the_real_host_does_not_panic() {
        let mut c = CpuSource::new(HWMON_ROOT);
        let first = c.sample();
        assert!(first.util_pct.is_none());
        let _ = c.sample();
    }
}
