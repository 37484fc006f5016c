//! The Prefill table (first section) and the compact prefill table of the
//! primary summary.

use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{PrefillEntry, PrefillMethod};

use super::Ctx;
use super::format::{context, thousands, thousands_f};
use super::table::Table;

/// Title by the method of the first row (rows are in context order).
fn title(rows: &[(u64, &PrefillEntry)]) -> &'static str {
    match rows
        .iter()
        .find(|(_, r)| !r.skipped)
        .and_then(|(_, r)| r.method)
    {
        Some(PrefillMethod::Prometheus) => "Prefill Speed (C=1, Prometheus server prefill counter)",
        Some(PrefillMethod::IntegratedScout | PrefillMethod::ScoutOnly) => {
            "Prefill Speed (scout requests, client ISL / TTFT)"
        }
        _ => "Prefill Speed (C=1, client ISL / TTFT)",
    }
}

/// `8,199`, or `~8,192` when the prompt size was not reported (tokens = context).
fn tokens(ctx: u64, row: &PrefillEntry) -> String {
    if row.prompt_tokens == ctx {
        format!("~{}", thousands(ctx))
    } else {
        thousands(row.prompt_tokens)
    }
}

/// `4,320 (1)` for a valid server sample, `invalid` for a rejected one, else `—`.
fn server_cell(row: &PrefillEntry) -> String {
    let v = &row.server_validation;
    if !v.invalid_reason.is_empty() {
        "invalid".into()
    } else if v.method.is_empty() || v.tok_per_sec <= 0.0 {
        "—".into()
    } else {
        format!("{} ({})", thousands_f(v.tok_per_sec), v.samples)
    }
}

/// `rx/tx` average PCIe MB/s from a hardware summary, else `—`.
pub(crate) fn pcie(hw: &HardwareSummary) -> String {
    match (hw.pcie_rx_avg_mb_s, hw.pcie_tx_avg_mb_s) {
        (Some(rx), Some(tx)) => format!("{rx:.0}/{tx:.0}"),
        _ => "—".into(),
    }
}

fn rows<'a>(cx: &Ctx<'a>) -> Vec<(u64, &'a PrefillEntry)> {
    cx.doc.prefill.iter().map(|(k, v)| (*k, v)).collect()
}

/// The Prefill table with its footnotes and note; empty without prefill rows.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = rows(cx);
    if rows.is_empty() {
        return Vec::new();
    }
    let headers = [
        "Context",
        "Tokens",
        "TTFT (s)",
        "Client tok/s",
        "Server tok/s",
        "PCIe rx/tx avg",
        "N",
    ];
    let mut t = Table::new(title(&rows), &headers).right(&[1, 2, 3, 4, 5, 6]);
    let mut footnotes = Vec::new();
    for (ctx, row) in &rows {
        if row.skipped {
            t.push(vec![
                context(*ctx).into(),
                "skip".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "0".into(),
            ]);
            if !row.skip_reason.is_empty() {
                footnotes.push(format!("{}: skipped, {}", context(*ctx), row.skip_reason));
            }
            continue;
        }
        let v = &row.server_validation;
        if !v.invalid_reason.is_empty() {
            footnotes.push(format!(
                "{}: server sample rejected, {}",
                context(*ctx),
                v.invalid_reason
            ));
        }
        t.push(vec![
            context(*ctx).into(),
            tokens(*ctx, row).into(),
            format!("{:.2}", row.client_ttft_seconds).into(),
            thousands_f(row.client_tok_per_sec).into(),
            server_cell(row).into(),
            pcie(&row.hardware_summary).into(),
            row.samples.to_string().into(),
        ]);
    }
    let mut out = t.render(cx.color);
    for f in footnotes {
        out.extend(cx.note(&f));
    }
    out.extend(cx.note(
        "Client tok/s is prompt tokens divided by the client's time to first token, so it \
         includes queueing, HTTP and the first decode step. Server tok/s comes from the engine's \
         Prometheus prefill counters, or from llama.cpp's own per-request timings (the number \
         of valid samples in brackets); on vLLM it counts the KV tokens actually computed, \
         which leaves out prefix-cache hits.",
    ));
    out.push(String::new());
    out
}

/// The `Prefill tok/s` table of the primary summary, or `None` without rows.
pub(crate) fn summary_table(cx: &Ctx<'_>) -> Option<Table> {
    let rows = rows(cx);
    if rows.is_empty() {
        return None;
    }
    let mut t = Table::new("Prefill tok/s", &["ctx", "tokens", "TTFT s", "tok/s", "N"])
        .right(&[1, 2, 3, 4]);
    for (ctx, row) in rows {
        if row.skipped {
            t.push(vec![
                context(ctx).into(),
                "skip".into(),
                "—".into(),
                "—".into(),
                "0".into(),
            ]);
        } else {
            t.push(vec![
                context(ctx).into(),
                tokens(ctx, row).into(),
                format!("{:.2}", row.ttft_seconds).into(),
                thousands_f(row.tok_per_sec).into(),
                row.samples.to_string().into(),
            ]);
        }
    }
    Some(t)
}
