//! TTFT breakdown: per cell, the client's TTFT beside the engine's and its
//! parts from the engine's own histograms or timings (docs/methodology.md
//! §9.4), the front end's share, preemptions, and why any part is missing.

use ldb_core::histogram::QuantileEstimate;
use ldb_core::result::CellResult;
use ldb_core::ttft_breakdown::TtftBreakdown;

use super::Ctx;
use super::format::context;
use super::table::Table;

/// Milliseconds, `—` when absent.
pub(crate) fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.1}", v * 1e3))
}

/// A quantile in ms with its error bound (the bucket's width): `12.3 ±5`,
/// `≥2560000` in the open last bucket, `12.3` when exact.
pub(crate) fn quantile_ms(q: Option<QuantileEstimate>) -> String {
    let Some(q) = q else { return "—".into() };
    match q.error_bound() {
        None => format!("≥{:.0}", q.value * 1e3),
        Some(0.0) => format!("{:.1}", q.value * 1e3),
        Some(b) => format!("{:.1} ±{:.0}", q.value * 1e3, (b * 1e3).max(1.0)),
    }
}

/// The cells with a breakdown, sustained then burst.
pub(crate) fn rows<'a>(
    cells: impl Iterator<Item = &'a CellResult>,
) -> Vec<(&'a CellResult, &'a TtftBreakdown)> {
    cells
        .filter(|c| !c.ext.status.is_skip())
        .filter_map(|c| Some((c, c.ext.ttft_breakdown.as_ref()?)))
        .collect()
}

/// The table and its notes (nothing when no cell has a breakdown).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = rows(cx.doc.results.iter().chain(&cx.doc.burst_results));
    if rows.is_empty() {
        return Vec::new();
    }
    let headers = [
        "ctx",
        "C",
        "client ms",
        "engine ms",
        "engine p50",
        "queue ms",
        "prefill ms",
        "decode ms",
        "overhead ms",
        "overhead p50",
        "preempt",
    ];
    let mut t = Table::new("TTFT breakdown (means; engine's own numbers)", &headers)
        .right(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let mut notes: Vec<String> = Vec::new();
    for (c, b) in &rows {
        let engine = b.engine_ttft();
        t.push(vec![
            context(c.context_tokens).into(),
            c.concurrency.to_string().into(),
            ms(b.client_ttft_mean_s).into(),
            ms(engine.and_then(|e| e.mean_s)).into(),
            quantile_ms(engine.and_then(|e| e.p50)).into(),
            ms(b.mean_of("queue")).into(),
            ms(b.mean_of("prefill")).into(),
            ms(b.mean_of("decode")).into(),
            ms(b.frontend_overhead_mean_s).into(),
            overhead_p50(b).into(),
            b.preemptions
                .map_or_else(|| "—".into(), |p| p.to_string())
                .into(),
        ]);
        let cell = format!("{} C={}", context(c.context_tokens), c.concurrency);
        if let Some(n) = &b.note {
            notes.push(format!("{cell}: {n}."));
        }
        for comp in b.components.iter().filter(|x| x.count != Some(0)) {
            if let Some(r) = &comp.reason {
                notes.push(format!("{cell}: {} ({}) — {r}.", comp.name, comp.metric));
            }
        }
    }
    let mut out = t.render(cx.color);
    let source = if rows.iter().all(|(_, b)| b.source == "llamacpp_timings") {
        "llama.cpp's per-request timings (exact; its prompt time leaves out the wait for a slot, which lands in the overhead)"
    } else {
        "the server's histograms over the window: means exact (_sum/_count), p50 interpolated inside its bucket, ± the bucket's width"
    };
    out.extend(cx.note(&format!(
        "From {source}. Overhead = client TTFT − engine TTFT: HTTP front end, tokenization, network and client (with their share of the CPU where they share cores with the engine)."
    )));
    for n in notes {
        out.extend(cx.note(&n));
    }
    out.push(String::new());
    out
}

/// The p50 difference with the range the engine's bucket allows.
fn overhead_p50(b: &TtftBreakdown) -> String {
    let Some(v) = b.frontend_overhead_p50_s else {
        return "—".into();
    };
    match b.frontend_overhead_p50_range_s {
        Some([Some(lo), Some(hi)]) if hi > lo => {
            format!("{:.1} [{:.0},{:.0}]", v * 1e3, lo * 1e3, hi * 1e3)
        }
        _ => format!("{:.1}", v * 1e3),
    }
}
