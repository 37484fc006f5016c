//! Hardware Summary (one row per measured cell) and the Whole-run GPU Power line.

use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{CellResult, DecodeMode};

use super::Ctx;
use super::format::{context, duration, thousands_f};
use super::prefill::pcie;
use super::table::{Cell, Table, panel};

/// `{a:.0}/{b:.0}{unit}`, or `—` when either is missing.
fn pair(a: Option<f64>, b: Option<f64>, unit: &str) -> String {
    match (a, b) {
        (Some(x), Some(y)) => format!("{x:.0}/{y:.0}{unit}"),
        _ => "—".into(),
    }
}

/// One value with a format, `—` when missing (or zero when `zero_dash`).
fn one(v: Option<f64>, zero_dash: bool, f: impl Fn(f64) -> String) -> String {
    match v {
        Some(v) if !(zero_dash && v == 0.0) => f(v),
        _ => "—".into(),
    }
}

fn rows<'a>(cx: &Ctx<'a>) -> Vec<&'a CellResult> {
    cx.doc
        .results
        .iter()
        .chain(&cx.doc.burst_results)
        .filter(|c| !c.ext.status.is_skip() && !c.hardware_summary.is_empty())
        .collect()
}

/// Hardware Summary table, the whole-run power panel and the sampling note.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = rows(cx);
    let power = power_line(&cx.doc.hardware_run_summary);
    if rows.is_empty() && power.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if !rows.is_empty() {
        out.extend(table(&rows).render(cx.color));
    }
    if let Some(p) = power {
        out.extend(panel(
            "Whole-run GPU Power",
            &p,
            cx.text_width(),
            cx.color,
            false,
        ));
    }
    out.extend(cx.note(
        "Hardware figures are sampled about once a second during each cell's measurement window \
         (GPU and memory utilisation, board power summed over GPUs, temperatures, VRAM, PCIe \
         traffic). Whole-run power covers every sample of the run and is GPU board power only, \
         not power at the wall.",
    ));
    out.push(String::new());
    out
}

fn table(rows: &[&CellResult]) -> Table {
    let energy = rows
        .iter()
        .any(|c| c.hardware_summary.energy_joules.is_some() || c.ext.tokens_per_joule > 0.0);
    let mut headers = vec![
        "ctx",
        "C",
        "mode",
        "GPU avg/max",
        "Mem avg",
        "W avg/max",
        "T max",
        "CPU T",
        "VRAM",
        "PCIe rx/tx avg",
    ];
    if energy {
        headers.extend(["Energy J", "tok/J"]);
    }
    let mut t = Table::new("Hardware Summary", &headers).right(&[1, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    for c in rows {
        let hw = &c.hardware_summary;
        let mode = if c.benchmark_mode == DecodeMode::Duration {
            "sustain"
        } else {
            "burst"
        };
        let mut row: Vec<Cell> = vec![
            context(c.context_tokens).into(),
            c.concurrency.to_string().into(),
            mode.into(),
            pair(hw.gpu_util_avg_pct, hw.gpu_util_max_pct, "%").into(),
            one(hw.mem_util_avg_pct, false, |v| format!("{v:.0}%")).into(),
            pair(hw.power_total_avg_w, hw.power_total_max_w, "").into(),
            one(hw.temp_max_c, false, |v| format!("{v:.0}C")).into(),
            one(hw.cpu_temp_max_c, true, |v| format!("{v:.0}C")).into(),
            one(hw.vram_used_avg_pct, false, |v| format!("{v:.1}%")).into(),
            pcie(hw).into(),
        ];
        if energy {
            row.push(one(hw.energy_joules, false, thousands_f).into());
            let tpj = c.ext.tokens_per_joule;
            row.push(
                if tpj > 0.0 {
                    format!("{tpj:.2}")
                } else {
                    "—".into()
                }
                .into(),
            );
        }
        t.push(row);
    }
    t
}

/// `avg 604 W | max 625 W | limit 1,200 W | over 9m 37s | 243 samples`;
/// parts that are zero are left out, and nothing without a positive average.
/// The completion-stats report prints the same line.
pub(crate) fn power_line(run: &HardwareSummary) -> Option<String> {
    let avg = run.power_total_avg_w.filter(|v| *v > 0.0)?;
    let mut parts = vec![format!("avg {avg:.0} W")];
    let mut add = |v: Option<f64>, f: &dyn Fn(f64) -> String| {
        if let Some(v) = v.filter(|v| *v > 0.0) {
            parts.push(f(v));
        }
    };
    add(run.power_total_max_w, &|v| format!("max {v:.0} W"));
    add(run.power_limit_total_w, &|v| {
        format!("limit {} W", thousands_f(v))
    });
    add(run.energy_joules, &|v| {
        format!("energy {:.1} kJ", v / 1000.0)
    });
    add(Some(run.duration_seconds), &|v| {
        format!("over {}", duration(v))
    });
    add(Some(run.samples as f64), &|v| format!("{v:.0} samples"));
    Some(parts.join(" | "))
}
