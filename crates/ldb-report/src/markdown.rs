//! `report --markdown`: the report's main tables as GitHub-flavoured
//! Markdown, for pull requests, wikis and notes.
//!
//! Sections: a header list (engine, model, server, when, window), Prefill,
//! then for the decode matrix and the burst matrix (when run): aggregate
//! tok/s, per-request tok/s, TTFT p50 / p99 ms and token gap p99 ms, as
//! context rows × concurrency columns. `docs/report.md` describes them.

use std::fmt::Write as _;

use ldb_core::document::ResultDocument;
use ldb_core::numfmt::context;
use ldb_core::result::{CellResult, CellStatus};

/// The Markdown text of `doc`.
pub fn render(doc: &ResultDocument) -> String {
    let mut out = String::new();
    header(&mut out, doc);
    prefill(&mut out, doc);
    for (title, cells) in [
        ("Decode", &doc.results),
        ("Burst / E2E", &doc.burst_results),
    ] {
        if !cells.is_empty() {
            matrices(&mut out, doc, title, cells);
        }
    }
    slo_frontier(&mut out, doc);
    out
}

/// A cell's `--slo` verdict: `meets`, `FAIL` or `?`, its goodput, then the
/// keys missed (`FAIL`) or without a value (`?`).
fn slo_text(c: &CellResult) -> Option<String> {
    let keys = |k: &Option<Vec<String>>| k.as_deref().unwrap_or_default().join(" ");
    let goodput = c
        .ext
        .goodput
        .flatten()
        .map_or_else(|| "-".into(), |g| format!("{g:.1}"));
    let text = match c.ext.slo_met? {
        Some(true) => format!("meets {goodput}"),
        Some(false) => format!("FAIL {goodput} {}", keys(&c.ext.slo_failed)),
        None => format!("? {goodput} {}", keys(&c.ext.slo_unknown)),
    };
    Some(text.trim_end().to_string())
}

/// The targets and the frontier of each matrix (only with `--slo`).
fn slo_frontier(out: &mut String, doc: &ResultDocument) {
    let Some(slo) = &doc.slo else { return };
    let _ = writeln!(
        out,
        "## SLO frontier

Targets (seconds): `{}`
",
        slo.spec
    );
    let mut rows = Vec::new();
    for (matrix, f) in [("decode", &slo.frontier), ("burst", &slo.burst_frontier)] {
        for (ctx, p) in f {
            let n = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
            rows.push(match p {
                Some(p) => vec![
                    matrix.to_string(),
                    context(*ctx),
                    p.concurrency.to_string(),
                    n(p.aggregate_tps),
                    n(p.goodput),
                ],
                None => vec![
                    matrix.into(),
                    context(*ctx),
                    "none".into(),
                    "-".into(),
                    "-".into(),
                ],
            });
        }
    }
    table(
        out,
        &[
            "matrix",
            "ctx",
            "highest C meeting the SLO",
            "aggregate tok/s",
            "goodput tok/s",
        ],
        &rows,
        &[0, 1],
    );
}

fn header(out: &mut String, doc: &ResultDocument) {
    let m = &doc.metadata;
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            esc(s)
        }
    };
    let _ = writeln!(out, "# llm-decode-bench result\n");
    let _ = writeln!(
        out,
        "- engine: {} {}",
        dash(&m.engine),
        dash(&m.engine_version)
    );
    let _ = writeln!(out, "- model: {}", dash(&m.model));
    let _ = writeln!(out, "- server: {}", dash(&m.server));
    let _ = writeln!(out, "- started: {}", dash(&m.started_at));
    let _ = writeln!(
        out,
        "- window: {} s per cell, max tokens {}",
        m.duration_per_test, m.max_tokens
    );
    if let Some(s) = m.run_status {
        let _ = writeln!(out, "- run status: {}", s.as_str());
    }
    out.push('\n');
}

fn prefill(out: &mut String, doc: &ResultDocument) {
    if doc.prefill.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Prefill\n");
    let mut rows = Vec::new();
    for (ctx, p) in &doc.prefill {
        let measured = !p.skipped && p.tok_per_sec > 0.0;
        rows.push(vec![
            context(*ctx),
            if measured {
                format!("{:.0}", p.tok_per_sec)
            } else {
                "skip".into()
            },
            if measured {
                format!("{:.3}", p.ttft_seconds)
            } else {
                "-".into()
            },
            p.prompt_tokens.to_string(),
            p.method.map_or("-", |m| m.as_str()).to_string(),
            esc(&p.skip_reason),
        ]);
    }
    table(
        out,
        &["ctx", "tok/s", "TTFT s", "prompt tokens", "method", "note"],
        &rows,
        &[0, 4, 5],
    );
}

/// Rows (contexts) and columns (concurrencies): the requested levels in
/// their order, then any level only the cells have, as in the text report.
fn axes(doc: &ResultDocument, cells: &[CellResult]) -> (Vec<u64>, Vec<u32>) {
    let mut ctxs = doc.metadata.context_lengths.clone();
    let mut concs = doc.metadata.concurrency_levels.clone();
    for c in cells {
        if !ctxs.contains(&c.context_tokens) {
            ctxs.push(c.context_tokens);
        }
        if !concs.contains(&c.concurrency) {
            concs.push(c.concurrency);
        }
    }
    // Only rows and columns that have a cell.
    ctxs.retain(|x| cells.iter().any(|c| c.context_tokens == *x));
    concs.retain(|x| cells.iter().any(|c| c.concurrency == *x));
    (ctxs, concs)
}

/// How a matrix fills a cell that has a value.
type CellText = fn(&CellResult) -> Option<String>;

fn matrices(out: &mut String, doc: &ResultDocument, title: &str, cells: &[CellResult]) {
    let mut views: Vec<(&str, CellText)> = vec![
        ("aggregate tok/s", |c| {
            c.aggregate_tps.map(|v| format!("{v:.1}"))
        }),
        ("per-request tok/s", |c| {
            c.per_request_avg_tps.map(|v| format!("{v:.1}"))
        }),
        ("TTFT p50 / p99 ms", |c| {
            c.latency.ttft.map(|d| {
                let f = |x: f64| format!("{:.1}", x * 1000.0);
                format!("{} / {}", f(d.p50), f(d.p99))
            })
        }),
        ("token gap p99 ms", |c| {
            c.ext
                .token_gap_p99
                .filter(|x| *x > 0.0)
                .map(|x| format!("{:.1}", x * 1000.0))
        }),
    ];
    if doc.slo.is_some() {
        views.push(("SLO verdict (goodput tok/s)", slo_text));
    }
    let (ctxs, concs) = axes(doc, cells);
    let mut head = vec!["ctx \\ C".to_string()];
    head.extend(concs.iter().map(ToString::to_string));
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut limited = false;
    for (name, value) in views {
        if name.starts_with("token gap") && cells.iter().all(|c| c.ext.token_gap_p99.is_none()) {
            continue;
        }
        let _ = writeln!(out, "## {title}: {name}\n");
        let rows: Vec<Vec<String>> = ctxs
            .iter()
            .map(|ctx| {
                let mut row = vec![context(*ctx)];
                for conc in &concs {
                    // A key seen twice: the later cell counts, as in the text report.
                    let cell = cells
                        .iter()
                        .rev()
                        .find(|c| c.context_tokens == *ctx && c.concurrency == *conc);
                    row.push(match cell {
                        None => "-".into(),
                        Some(c) => {
                            limited |= c.ext.status == CellStatus::CapacityLimited;
                            cell_text(c, value)
                        }
                    });
                }
                row
            })
            .collect();
        table(out, &head, &rows, &[0]);
    }
    if limited {
        let _ = writeln!(
            out,
            "`*` capacity-limited: the server did not run the requested concurrency, so the value is not the \
             one asked for.\n"
        );
    }
}

/// The value, `*` for a capacity-limited cell, or the report's status word.
fn cell_text(c: &CellResult, value: CellText) -> String {
    match c.ext.status {
        CellStatus::Ok => value(c).unwrap_or_else(|| "-".into()),
        CellStatus::CapacityLimited => value(c).map_or_else(|| "-".into(), |v| format!("{v}*")),
        CellStatus::Error => "ERROR".into(),
        CellStatus::NoTokens => "0 tok".into(),
        CellStatus::SkippedKv => "skip KV".into(),
        CellStatus::SkippedContext => "skip ctx".into(),
        CellStatus::SkippedUser => "skip".into(),
        CellStatus::SkippedSlo => "skip SLO".into(),
    }
}

/// A pipe table; numbers right-aligned, the columns named in `text` left-aligned.
fn table(out: &mut String, head: &[&str], rows: &[Vec<String>], text: &[usize]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let rule: Vec<&str> = (0..head.len())
        .map(|i| if text.contains(&i) { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

/// Text inside a table cell: no pipes, no line breaks.
fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulator_run_has_its_matrices() {
        let doc = ResultDocument::from_json_str(include_str!("../tests/golden/sim-burst.json"))
            .expect("golden");
        let md = render(&doc);
        assert!(md.contains("## Prefill"), "{md}");
        assert!(md.contains("## Decode: aggregate tok/s"), "{md}");
        assert!(md.contains("## Burst / E2E: aggregate tok/s"), "{md}");
        assert!(md.contains("| ctx \\ C | 1 | 2 |"), "{md}");
        // C=2 at context 0: 549.9983… tok/s in the golden.
        assert!(
            md.lines().any(|l| l.starts_with("| 0 | 290.2 | 550.0 |")),
            "{md}"
        );
    }
}
