//! The **Coding Peak** tables (only when the result has a `coding_peak`
//! section): the summary over the ok runs, then one row per run.

use ldb_core::coding_peak::CodingPeak;

use super::Ctx;
use super::format::rate;
use super::table::{Cell, Table};

/// The section, empty without `coding_peak` in the document.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let Some(p) = &cx.doc.coding_peak else {
        return Vec::new();
    };
    lines(cx, p)
}

fn lines(cx: &Ctx<'_>, p: &CodingPeak) -> Vec<String> {
    let opt_rate = |v: Option<f64>| v.map_or_else(|| "—".to_string(), rate);
    let mut summary = Table::new(
        "Coding Peak",
        &[
            "runs",
            "median tok/s",
            "mean tok/s",
            "max tok/s",
            "CJK runs",
        ],
    )
    .title_suffix(&format!(
        "single stream, max_tokens {}, no ignore_eos",
        p.max_tokens
    ))
    .right(&[0, 1, 2, 3, 4]);
    let s = &p.summary;
    summary.push(vec![
        Cell::plain(format!("{}/{}", p.runs_ok, p.runs_requested)),
        Cell::plain(opt_rate(s.median_generation_tok_s)),
        Cell::plain(opt_rate(s.mean_generation_tok_s)),
        Cell::plain(opt_rate(s.max_generation_tok_s)),
        Cell::plain(s.cjk_runs.to_string()),
    ]);
    let mut out = summary.render(cx.color);
    out.push(String::new());
    let mut runs = Table::new(
        "Coding Peak runs",
        &[
            "run",
            "finish",
            "tokens",
            "TTFT s",
            "gen tok/s",
            "total tok/s",
            "CJK",
        ],
    )
    .right(&[0, 2, 3, 4, 5, 6]);
    for r in &p.samples {
        if !r.ok {
            let error = r.error.as_deref().unwrap_or("failed");
            runs.push(vec![
                Cell::plain(r.run.to_string()),
                Cell::plain(format!("ERROR: {}", clip(error, 60))),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
            ]);
            continue;
        }
        runs.push(vec![
            Cell::plain(r.run.to_string()),
            Cell::plain(r.finish_reason.as_deref().unwrap_or("—")),
            Cell::plain(r.completion_tokens.map_or("—".into(), |n| n.to_string())),
            Cell::plain(r.ttft.map_or("—".into(), |t| format!("{t:.3}"))),
            Cell::plain(opt_rate(r.generation_tok_s)),
            Cell::plain(opt_rate(r.total_tok_s)),
            Cell::plain(r.cjk_chars.unwrap_or(0).to_string()),
        ]);
    }
    out.extend(runs.render(cx.color));
    out.push(String::new());
    out.extend(cx.note(
        "gen tok/s = usage completion_tokens / (end of stream − first token); the summary is \
         over the runs that completed. CJK = Han ideographs in reasoning and answer.",
    ));
    out.push(String::new());
    out
}

/// `s` cut to `n` characters, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}
