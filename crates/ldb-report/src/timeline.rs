//! `report RESULT --timeline CELL`: one cell's timeline as text
//! (docs/report.md, "Timeline of one cell"). A cell is named `C:CTX`, its
//! concurrency and context as the report writes them (`16:8k`, or the
//! context in tokens, `16:8192`); the text report's `C=16 ctx=8k` is
//! accepted too.

use std::fmt::Write as _;

use ldb_core::document::ResultDocument;
use ldb_core::result::CellResult;
use ldb_core::timeline::CellTimeline;
use ldb_core::tokens::{format_context, parse_tokens};

/// The name of a cell, `C:CTX`.
pub fn cell_name(c: &CellResult) -> String {
    format!("{}:{}", c.concurrency, format_context(c.context_tokens))
}

/// `(concurrency, context)` from `16:8k`, `16:8192` or `C=16 ctx=8k`.
fn parse_name(name: &str) -> Option<(u32, u64)> {
    let t = name.trim();
    let (c, x) = if let Some(rest) = t.strip_prefix("C=") {
        let (c, x) = rest.split_once([' ', ','])?;
        (c, x.trim().strip_prefix("ctx=")?)
    } else {
        t.split_once(':')?
    };
    Some((c.trim().parse().ok()?, parse_tokens(x).ok()?))
}

/// The decode cell named `name`, or a one-line error listing the names the
/// file has (the cells with a timeline first).
pub fn find_cell<'a>(doc: &'a ResultDocument, name: &str) -> Result<&'a CellResult, String> {
    let wanted = parse_name(name);
    // The last cell of a key counts, as in the report.
    let found = doc
        .results
        .iter()
        .rev()
        .find(|c| wanted == Some((c.concurrency, c.context_tokens)));
    match found {
        Some(c) if c.ext.timeline.is_some() => Ok(c),
        Some(c) => Err(format!(
            "cell {} has no timeline ({}); cells with one: {}",
            cell_name(c),
            why_none(c),
            names(doc)
        )),
        None => Err(format!(
            "no decode cell named {name:?} (name a cell C:CTX, e.g. 16:8k); cells with a \
             timeline: {}",
            names(doc)
        )),
    }
}

/// Why a cell carries no timeline.
fn why_none(c: &CellResult) -> &'static str {
    if c.ext.status.is_skip() {
        "it was not measured"
    } else if c.benchmark_mode != ldb_core::result::DecodeMode::Duration {
        "only sustained-decode cells record one"
    } else {
        "written by a version without timelines, or a sharded cell"
    }
}

/// The names of the cells with a timeline, or `none`.
fn names(doc: &ResultDocument) -> String {
    let v: Vec<String> = doc
        .results
        .iter()
        .filter(|c| c.ext.timeline.is_some())
        .map(cell_name)
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.digits$}"))
}

/// The cell's timeline as text: its window, the client series, the server
/// points and the GPU samples.
pub fn render(c: &CellResult, t: &CellTimeline) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Timeline of C={} ctx={} — seconds from the streams' launch; window {:.2} s → {:.2} s \
         ({} ramp-up seconds before it)",
        c.concurrency,
        format_context(c.context_tokens),
        t.window_start_s,
        t.window_end_s,
        t.client_ramp_bins
    );
    let _ = writeln!(
        s,
        "\nClient output tokens by arrival second ({} in the window; the cell counted {}):",
        t.window_tokens(),
        c.client_output_tokens
    );
    let _ = writeln!(s, "{:>9} {:>8}  phase", "from s", "tokens");
    for (i, n) in t.client_tokens.iter().enumerate() {
        let phase = if i < t.client_ramp_bins as usize {
            "ramp-up"
        } else {
            "window"
        };
        let _ = writeln!(s, "{:>9.2} {n:>8}  {phase}", t.bin_start_s(i));
    }
    match &t.server {
        Some(v) => {
            let _ = writeln!(s, "\nServer gauges at each scrape:");
            let _ = writeln!(
                s,
                "{:>9} {:>8} {:>8} {:>8}",
                "t s", "running", "waiting", "KV %"
            );
            for i in 0..v.t_s.len() {
                let kv = v.kv_usage.get(i).copied().flatten().map(|k| k * 100.0);
                let g = |a: &[Option<f64>]| opt(a.get(i).copied().flatten(), 1);
                let _ = writeln!(
                    s,
                    "{:>9.2} {:>8} {:>8} {:>8}",
                    v.t_s[i],
                    g(&v.running),
                    g(&v.waiting),
                    opt(kv, 1)
                );
            }
        }
        None => s.push_str("\nServer gauges: none (no /metrics scrape during the cell)\n"),
    }
    match &t.gpu {
        Some(v) => {
            let _ = writeln!(
                s,
                "\nGPU samples (all GPUs together; utilisation is their mean):"
            );
            let _ = writeln!(
                s,
                "{:>9} {:>8} {:>7} {:>11} {:>11}",
                "t s", "power W", "util %", "PCIe rx MB/s", "PCIe tx MB/s"
            );
            for i in 0..v.t_s.len() {
                let g = |a: &[Option<f64>]| opt(a.get(i).copied().flatten(), 1);
                let _ = writeln!(
                    s,
                    "{:>9.2} {:>8} {:>7} {:>12} {:>12}",
                    v.t_s[i],
                    g(&v.power_w),
                    g(&v.util_pct),
                    g(&v.pcie_rx_mb_s),
                    g(&v.pcie_tx_mb_s)
                );
            }
        }
        None => s.push_str("\nGPU samples: none (no GPU telemetry during the cell)\n"),
    }
    s
}

#[cfg(test)]
mod tests;
