//! Snapshots of the full console report and checks of single cells.

mod common;

use insta::assert_snapshot;
use ldb_report::text::{TextOptions, render, render_to_string};

fn opts(width: u16) -> TextOptions {
    TextOptions {
        width,
        show_capacity_limited_values: false,
        color: false,
    }
}

/// The line of a table whose first cell is `row`, split into trimmed cells.
fn row_cells(report: &str, title: &str, row: &str) -> Vec<String> {
    let after = report
        .split_once(&format!("\n{title}"))
        .map_or("", |(_, t)| t);
    after
        .lines()
        .map(|l| l.split('│').map(str::trim).collect::<Vec<_>>())
        .find(|cells| cells.get(1) == Some(&row))
        .map(|cells| {
            cells[2..cells.len() - 1]
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn seed_report_wide() {
    assert_snapshot!(render_to_string(&common::seed_doc(), &opts(160)));
}

#[test]
fn seed_report_100() {
    assert_snapshot!(render_to_string(&common::seed_doc(), &opts(100)));
}

#[test]
fn problem_cells_report() {
    assert_snapshot!(render_to_string(&common::problems_doc(), &opts(80)));
}

#[test]
fn burst_report() {
    assert_snapshot!(render_to_string(&common::burst_doc(), &opts(120)));
}

#[test]
fn interrupted_report() {
    assert_snapshot!(render_to_string(&common::interrupted_doc(), &opts(120)));
}

#[test]
fn seed_cells_match_reference_rendering() {
    let r = render_to_string(&common::seed_doc(), &opts(160));
    let agg = "Aggregate tok/s + TTFT/ITL";
    assert_eq!(
        row_cells(&r, agg, "0"),
        ["129.5 134/8", "∅ (1/2)* 9k/8", "∅ (1/4)* 25k/8"]
    );
    assert_eq!(
        row_cells(&r, agg, "64k"),
        ["122.2 15k/8", "∅ (1/2)* 40k/8", "∅ (1/4)* 54k/9"]
    );
    let per = "Per-Request tok/s";
    assert_eq!(row_cells(&r, per, "0"), ["129.5", "∅ (1/2)*", "∅ (1/4)*"]);
    assert_eq!(row_cells(&r, per, "64k"), ["122.2", "∅ (1/2)*", "∅ (1/4)*"]);
    let lat = "Client request latency: p50 / p90 ms";
    assert_eq!(
        row_cells(&r, lat, "0"),
        ["8.7k/8.7k", "17.2k/17.6k", "33.1k/34.0k"]
    );
    assert_eq!(
        row_cells(&r, lat, "64k"),
        ["23.1k/23.1k", "48.1k/49.0k", "62.9k/92.6k"]
    );
    let pre = "Prefill Speed (scout requests, client ISL / TTFT)";
    assert_eq!(
        row_cells(&r, pre, "8k"),
        ["8,199", "2.10", "3,897", "—", "—", "1"]
    );
    assert_eq!(
        row_cells(&r, pre, "64k"),
        ["64,513", "15.02", "4,297", "4,320 (1)", "—", "1"]
    );
    let hw = "Hardware Summary";
    assert_eq!(
        row_cells(&r, hw, "0").join(" "),
        "1 sustain 50/99% 27% 619/619 57C 67C 48.4% 2535/2322"
    );
    assert!(r.contains("avg 604 W | max 625 W | limit 1,200 W | over 9m 37s | 243 samples"));
    assert!(r.contains("Aggregate source(s): openai_continuous_usage, prometheus_fallback"));
    assert!(r.contains("Re-run") || r.contains("--run-burst"));
}

#[test]
fn showing_capacity_limited_values() {
    let mut o = opts(160);
    o.show_capacity_limited_values = true;
    let r = render_to_string(&common::seed_doc(), &o);
    let agg = "Aggregate tok/s + TTFT/ITL";
    assert_eq!(
        row_cells(&r, agg, "0"),
        ["129.5 134/8", "115.9 (1/2)* 9k/8", "119.0 (1/4)* 25k/8"]
    );
    assert_eq!(row_cells(&r, agg, "64k")[2], "0.1 (1/4)* 54k/9");
    assert!(!r.contains("∅ ="), "no ∅ legend when nothing is hidden");
}

#[test]
fn problem_cells_use_their_markers() {
    let r = render_to_string(&common::problems_doc(), &opts(200));
    let agg = "Aggregate tok/s + TTFT/ITL";
    let row0 = row_cells(&r, agg, "0");
    assert!(row0[1].starts_with("480.1 (1e) "), "{row0:?}");
    assert_eq!(row0[2], "ERROR");
    assert!(row0[4].starts_with("∅ (12/16)* "), "{row0:?}");
    let row32 = row_cells(&r, agg, "32k");
    assert_eq!(row32[1], "0 tok");
    assert!(row32[2].starts_with("610.0 (3/4) "), "{row32:?}");
    assert_eq!(&row32[3..], ["skip KV", "skip KV"]);
    assert_eq!(
        row_cells(&r, agg, "128k"),
        ["skip ctx", "skip", "-", "-", "-"]
    );
    assert!(r.contains("C=4 ctx=0: stream 3 failed mid-cell: HTTP 500 Internal Server Error"));
    assert!(r.contains("C=8 ctx=32k: needs 270,336 KV tokens, 70,336 more than the budget"));
}

#[test]
fn color_changes_nothing_but_escapes() {
    let doc = common::problems_doc();
    let plain = render_to_string(&doc, &opts(80));
    let mut o = opts(80);
    o.color = true;
    let colored = render_to_string(&doc, &o);
    assert!(colored.contains("\x1b["));
    let mut stripped = String::new();
    let mut chars = colored.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            stripped.push(c);
        }
    }
    assert_eq!(stripped, plain);
}

#[test]
fn render_writes_the_same_text() -> std::io::Result<()> {
    let doc = common::burst_doc();
    let mut buf = Vec::new();
    render(&doc, &opts(120), &mut buf)?;
    assert_eq!(
        String::from_utf8_lossy(&buf),
        render_to_string(&doc, &opts(120))
    );
    Ok(())
}

#[test]
fn empty_document_says_nothing_was_collected() {
    let r = render_to_string(&ldb_core::document::ResultDocument::default(), &opts(100));
    assert!(r.contains("No results were collected."), "{r}");
}

#[test]
fn request_count_mode_uses_its_own_panel_and_note_rule() {
    let mut doc = common::burst_doc();
    doc.burst_results.clear();
    doc.metadata.decode_mode = Some(ldb_core::result::DecodeMode::RequestCount);
    doc.metadata.primary_decode_layer = "burst_e2e_decode".into();
    for c in &mut doc.results {
        c.benchmark_mode = ldb_core::result::DecodeMode::RequestCount;
        c.sched.avg_running_reqs = f64::from(c.concurrency) * 0.85;
    }
    let r = render_to_string(&doc, &opts(120));
    assert!(r.contains("╭─ Decode ─"), "{r}");
    assert!(r.contains("Burst / E2E-only mode:"));
    assert!(
        !r.contains("Phase 3"),
        "no 'not run' panel when bursts are the primary layer"
    );
    // Underfilled without a queue is not flagged in request modes.
    assert_eq!(row_cells(&r, "Per-Request tok/s", "0"), ["131.2", "124.7"]);
}

#[test]
fn tool_call_cells_get_their_matrix() {
    let mut doc = common::seed_doc();
    let plain = render_to_string(&doc, &opts(160));
    assert!(!plain.contains("Tool calls"), "no tool calls, no matrix");
    let c = &mut doc.results[0];
    c.ext.tool_call_tokens = 480;
    c.latency.ttftc = Some(common::dist(0.25, 0.4));
    let r = render_to_string(&doc, &opts(160));
    let title = "Tool calls: tokens, TTFTC p50 / p99 ms";
    assert!(r.contains(title), "{r}");
    let after = r.split_once(title).map_or("", |(_, t)| t);
    assert!(after.contains("480 250/400"), "{r}");
}
