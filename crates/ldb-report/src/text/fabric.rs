//! The console reports of the fabric diagnostics (`p2pmark`, `amd_fabric`
//! result blocks), compact by default and expanded with `--…-detail`; a
//! block that did not come out `ok` is a red panel with its status and why.
//! Read from the JSON blocks themselves, so a recorded result renders the
//! same as a fresh one. docs/fabric.md describes every line.

mod cpu;
mod p2p;

use ldb_core::document::{FabricBlock, FabricStatus};
use serde_json::Value;

/// How the fabric reports are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricTextOptions {
    /// Terminal width.
    pub width: u16,
    /// `--p2pmark-detail`.
    pub p2p_detail: bool,
    /// `--amd-fabric-detail`.
    pub cpu_detail: bool,
}

/// Both reports (nothing for a block that was not run).
pub fn render(p2pmark: &FabricBlock, amd_fabric: &FabricBlock, o: &FabricTextOptions) -> String {
    let width = usize::from(o.width.max(60)).min(120);
    let mut lines = Vec::new();
    if p2pmark.ran() {
        lines.extend(match p2pmark.status {
            FabricStatus::Ok => {
                let mut l = p2p::report(p2pmark, o.p2p_detail, width);
                l.extend(p2p_native_notes(p2pmark, width));
                l
            }
            // a native run cut by its timeout or an error keeps the blocks
            // it measured
            FabricStatus::Timeout | FabricStatus::Error if p2pmark.data().is_object() => {
                let mut l = failure("P2P Diagnostic", p2pmark, width);
                l.extend(p2p::report(p2pmark, o.p2p_detail, width));
                l.extend(p2p_native_notes(p2pmark, width));
                l
            }
            _ => {
                let mut l = failure("P2P Diagnostic", p2pmark, width);
                l.extend(p2p_native_notes(p2pmark, width));
                l
            }
        });
    }
    if amd_fabric.ran() {
        lines.extend(match amd_fabric.status {
            FabricStatus::Ok => cpu::report(amd_fabric, o.cpu_detail, width),
            // a run cut by its timeout still shows the pairs it measured
            FabricStatus::Timeout if amd_fabric.data().is_object() => {
                let mut l = failure("AMD CPU Fabric", amd_fabric, width);
                l.extend(cpu::report(amd_fabric, o.cpu_detail, width));
                l
            }
            _ => failure("AMD CPU Fabric", amd_fabric, width),
        });
    }
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// A boxed card: title in the top rule, one line per entry (cut to fit).
pub(crate) fn card(title: &str, body: &[String], width: usize) -> Vec<String> {
    let inner = body
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.chars().count() + 2)
        .min(width.saturating_sub(4));
    let top_fill = inner + 2 - (title.chars().count() + 3).min(inner + 2);
    let mut out = vec![format!("╭─ {title} {}╮", "─".repeat(top_fill))];
    for l in body {
        // long lines (a helper's error) wrap rather than lose their end
        for part in super::style::wrap(l, inner.max(1)) {
            let cut: String = part.chars().take(inner).collect();
            let pad = inner - cut.chars().count();
            out.push(format!("│ {cut}{} │", " ".repeat(pad)));
        }
    }
    out.push(format!("╰{}╯", "─".repeat(inner + 2)));
    out
}

/// A diagnostic that did not give a result: status and the reason.
fn failure(title: &str, v: &FabricBlock, width: usize) -> Vec<String> {
    let mut body = vec![format!("status: {}", v.status.as_str())];
    for (key, text) in [
        ("reason", &v.reason),
        ("error", &v.error),
        ("parse_error", &v.parse_error),
        ("suggestion", &v.suggestion),
    ] {
        if let Some(s) = text {
            body.push(format!("{key}: {s}"));
        }
    }
    if let Some(c) = v.returncode {
        body.push(format!("returncode: {c}"));
    }
    if let Some(t) = v.timeout_seconds {
        body.push(format!("timeout: {t} s"));
    }
    if let Some(e) = v.stderr.as_deref().filter(|s| !s.is_empty()) {
        body.extend(
            e.lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|l| format!("stderr: {l}")),
        );
    }
    let mut out = card(title, &body, width);
    out.push(String::new());
    out
}

/// The built-in GPU back end's extras, when present: the one GPU's own
/// figures (`single_gpu`), the blocks it could not measure
/// (`data.errors`) and what it found (`machine`: driver, GPUs, NVRTC,
/// NCCL). Nothing for a helper's result.
fn p2p_native_notes(v: &FabricBlock, width: usize) -> Vec<String> {
    let mut body = Vec::new();
    let one = v.extra_key("single_gpu");
    if one.is_object() {
        let ar = &one["allreduce"];
        body.push(format!(
            "GPU {}: local copy {} GB/s, local read {} us",
            num(&one["gpu"], 0),
            num(&one["local_copy_gbps"], 1),
            num(&one["local_read_latency_us"], 3)
        ));
        body.push(format!(
            "allreduce {} on one GPU: one-shot kernel {} us, NCCL {} us",
            p2p::size_label(ar["size_bytes"].as_u64().unwrap_or(0)),
            num(&ar["custom_us"], 1),
            num(&ar["nccl_us"], 1)
        ));
        if let Some(e) = one["errors"].as_object() {
            body.extend(
                e.iter()
                    .map(|(k, r)| format!("{k}: {}", r.as_str().unwrap_or(""))),
            );
        }
    }
    if let Some(e) = v.data()["errors"].as_object() {
        body.extend(
            e.iter()
                .map(|(k, r)| format!("not measured: {k}: {}", r.as_str().unwrap_or(""))),
        );
    }
    let m = v.extra_key("machine");
    if m.is_object() {
        for key in ["cuda_driver", "nvrtc", "nccl"] {
            if let Some(t) = m[key].as_str() {
                body.push(format!("{key}: {t}"));
            }
        }
        if let Some(g) = m["gpus"].as_array() {
            body.extend(g.iter().filter_map(Value::as_str).map(str::to_string));
        }
    }
    if body.is_empty() {
        return Vec::new();
    }
    let mut out = card("P2P built-in back end", &body, width);
    out.push(String::new());
    out
}

/// A number with `digits` decimals, or `-`.
pub(crate) fn num(v: &Value, digits: usize) -> String {
    v.as_f64()
        .map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

/// Mean, min and max of the finite numbers.
pub(crate) fn stats(xs: &[f64]) -> Option<(f64, f64, f64)> {
    let xs: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if xs.is_empty() {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((mean, min, max))
}

/// `matrix[i][j]` as f64.
pub(crate) fn cell(m: &Value, i: usize, j: usize) -> Option<f64> {
    m.get(i)?.get(j)?.as_f64()
}

/// A square matrix as a table: `corner`, then `N0…` / `G0…` columns.
pub(crate) fn matrix(
    title: &str,
    corner: &str,
    prefix: &str,
    m: &Value,
    digits: usize,
    diag: Option<&str>,
) -> Vec<String> {
    let n = m.as_array().map_or(0, Vec::len);
    let mut headers = vec![corner.to_string()];
    headers.extend((0..n).map(|j| format!("{prefix}{j}")));
    let mut t =
        super::table::Table::with_headers(title, headers).right(&(1..=n).collect::<Vec<_>>());
    for i in 0..n {
        let mut row = vec![super::table::Cell::plain(format!("{prefix}{i}"))];
        for j in 0..n {
            let text = match diag {
                Some(d) if i == j => d.to_string(),
                _ => num(&m[i][j], digits),
            };
            row.push(super::table::Cell::plain(text));
        }
        t.push(row);
    }
    let mut out = t.render(false);
    out.push(String::new());
    out
}
