//! Parsers for `nvidia-smi` text output. All of them take whatever the
//! command printed and never fail: unusable lines are reported in `problems`
//! and unusable fields become `None`.

use super::{GpuSample, ThrottleReason};
use serde::{Deserialize, Serialize};

/// `--query-gpu` fields the sampler asks for (reference order).
pub const SAMPLE_FIELDS: &str = "index,temperature.gpu,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current";

/// Optional 13th field: the active clock-throttle reasons bitmask. Older or
/// newer drivers may reject it; the sampler then drops it.
pub const THROTTLE_FIELD: &str = "clocks_throttle_reasons.active";

/// `--query-gpu` fields of the startup GPU inventory (reference order).
pub const INVENTORY_FIELDS: &str = "index,name,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,power.limit";

/// Result of parsing one `nvidia-smi --query-gpu` output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiParse<T> {
    /// Rows that parsed (at least a valid GPU index).
    pub rows: Vec<T>,
    /// One message per line that could not be used.
    pub problems: Vec<String>,
}

/// One GPU of the startup inventory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInventory {
    /// Device index.
    pub index: u32,
    /// Marketing name.
    pub name: String,
    /// Driver version string.
    pub driver_version: String,
    /// PCI bus id (`00000000:01:00.0`).
    pub pci_bus_id: String,
    /// Current PCIe link generation.
    pub pcie_gen: Option<u32>,
    /// Current PCIe link width.
    pub pcie_width: Option<u32>,
    /// Power limit, W.
    pub power_limit_w: Option<f64>,
}

/// One row of `nvidia-smi dmon -s t`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DmonRow {
    /// Device index.
    pub index: u32,
    /// PCIe receive, MB/s.
    pub rx_mb_s: Option<f64>,
    /// PCIe transmit, MB/s.
    pub tx_mb_s: Option<f64>,
}

/// Parses one numeric field: `N/A`, `[Not Supported]`, `[Unknown Error]`,
/// empty, non-finite or non-numeric text gives `None`. A trailing unit
/// (`300.00 W`) is ignored.
pub fn parse_value(field: &str) -> Option<f64> {
    let token = field.split_whitespace().next()?;
    let v: f64 = token.parse().ok()?;
    v.is_finite().then_some(v)
}

fn parse_u32(field: &str) -> Option<u32> {
    parse_value(field)
        .filter(|v| *v >= 0.0 && v.fract() == 0.0 && *v <= f64::from(u32::MAX))
        .map(|v| v as u32)
}

/// Parses a hexadecimal bitmask such as `0x0000000000000004`.
pub fn parse_bitmask(field: &str) -> Option<u64> {
    let t = field.trim();
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u64::from_str_radix(hex, 16).ok()
}

fn fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

/// The non-empty CSV lines of a query with at least `min` fields and a valid
/// GPU index first, as (line number from 0, index, fields); every other line
/// becomes one entry in `problems`.
fn csv_rows<'a>(
    text: &'a str,
    min: usize,
    problems: &mut Vec<String>,
) -> Vec<(usize, u32, Vec<&'a str>)> {
    let mut rows = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f = fields(line);
        if f.len() < min {
            problems.push(format!(
                "line {}: expected {min} fields, got {}: {}",
                n + 1,
                f.len(),
                clip(line)
            ));
            continue;
        }
        match parse_u32(f[0]) {
            Some(index) => rows.push((n, index, f)),
            None => problems.push(format!("line {}: bad GPU index {:?}", n + 1, clip(f[0]))),
        }
    }
    rows
}

/// Parses `nvidia-smi --query-gpu=<SAMPLE_FIELDS>[,<THROTTLE_FIELD>]
/// --format=csv,noheader,nounits`.
pub fn parse_sample_query(text: &str) -> SmiParse<GpuSample> {
    let mut out = SmiParse::default();
    for (n, index, f) in csv_rows(text, 12, &mut out.problems) {
        if out.rows.iter().any(|g: &GpuSample| g.index == index) {
            out.problems
                .push(format!("line {}: duplicate GPU index {index}", n + 1));
            continue;
        }
        out.rows.push(GpuSample {
            index,
            temp_c: parse_value(f[1]),
            util_pct: parse_value(f[2]),
            mem_util_pct: parse_value(f[3]),
            vram_used_mb: parse_value(f[4]),
            vram_total_mb: parse_value(f[5]),
            power_w: parse_value(f[6]),
            power_limit_w: parse_value(f[7]),
            sm_clock_mhz: parse_value(f[8]),
            mem_clock_mhz: parse_value(f[9]),
            pcie_gen: parse_u32(f[10]),
            pcie_width: parse_u32(f[11]),
            pcie_rx_mb_s: None,
            pcie_tx_mb_s: None,
            throttle_reasons: f
                .get(12)
                .and_then(|v| parse_bitmask(v))
                .map(ThrottleReason::from_bits),
        });
    }
    out
}

/// Parses the inventory query (`INVENTORY_FIELDS`). GPU names containing
/// commas are rejoined.
pub fn parse_inventory(text: &str) -> SmiParse<GpuInventory> {
    let mut out = SmiParse::default();
    for (_, index, f) in csv_rows(text, 7, &mut out.problems) {
        let k = f.len();
        out.rows.push(GpuInventory {
            index,
            name: f[1..k - 5].join(", "),
            driver_version: f[k - 5].to_string(),
            pci_bus_id: f[k - 4].to_string(),
            pcie_gen: parse_u32(f[k - 3]),
            pcie_width: parse_u32(f[k - 2]),
            power_limit_w: parse_value(f[k - 1]),
        });
    }
    out
}

/// Parses `nvidia-smi dmon -s t [-c 1]`. Column positions come from the
/// `# gpu rxpci txpci` header when present, else GPU, rx, tx in that order.
/// `-` means not available.
pub fn parse_dmon(text: &str) -> SmiParse<DmonRow> {
    let mut out = SmiParse::default();
    let (mut gi, mut ri, mut ti) = (0usize, 1usize, 2usize);
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('#') {
            let cols: Vec<String> = header
                .split_whitespace()
                .map(str::to_ascii_lowercase)
                .collect();
            if let (Some(r), Some(t)) = (pos(&cols, "rxpci"), pos(&cols, "txpci")) {
                (ri, ti) = (r, t);
                gi = pos(&cols, "gpu").or_else(|| pos(&cols, "idx")).unwrap_or(0);
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(index) = cols.get(gi).and_then(|c| parse_u32(c)) else {
            out.problems
                .push(format!("dmon line {}: no GPU index: {}", n + 1, clip(line)));
            continue;
        };
        out.rows.push(DmonRow {
            index,
            rx_mb_s: cols.get(ri).and_then(|c| parse_value(c)),
            tx_mb_s: cols.get(ti).and_then(|c| parse_value(c)),
        });
    }
    out
}

/// Copies PCIe throughput from `dmon` rows into matching GPU samples.
pub fn merge_dmon(gpus: &mut [GpuSample], rows: &[DmonRow]) {
    for g in gpus.iter_mut() {
        if let Some(r) = rows.iter().find(|r| r.index == g.index) {
            g.pcie_rx_mb_s = r.rx_mb_s;
            g.pcie_tx_mb_s = r.tx_mb_s;
        }
    }
}

fn pos(cols: &[String], name: &str) -> Option<usize> {
    cols.iter().position(|c| c == name)
}

/// At most 120 characters of a line, for messages.
pub(crate) fn clip(s: &str) -> String {
    let t = s.trim();
    match t.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parsing_rejects_placeholders() {
        assert_eq!(parse_value(" 300.00 "), Some(300.0));
        assert_eq!(parse_value("300.00 W"), Some(300.0));
        for bad in [
            "N/A",
            "[N/A]",
            "[Not Supported]",
            "[Unknown Error]",
            "",
            "nan",
            "inf",
            "abc",
        ] {
            assert_eq!(parse_value(bad), None, "{bad}");
        }
        assert_eq!(parse_bitmask("0x0000000000000004"), Some(4));
        assert_eq!(parse_bitmask("Not Active"), None);
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(text in "\\PC{0,300}") {
            let _ = parse_sample_query(&text);
            let _ = parse_inventory(&text);
            let _ = parse_dmon(&text);
            let _ = parse_value(&text);
            let _ = parse_bitmask(&text);
        }
    }

    #[test]
    fn inventory_rejoins_names_with_commas() {
        let p = parse_inventory("0, Weird, Name, 580.1, 00000000:01:00.0, 5, 16, 700.00\n");
        assert_eq!(p.rows[0].name, "Weird, Name");
        assert_eq!(p.rows[0].power_limit_w, Some(700.0));
    }
}
