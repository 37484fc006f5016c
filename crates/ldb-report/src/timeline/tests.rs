//! `report --timeline` text, the cell names it takes, and the HTML small
//! multiples, on a hand-made timeline and on files without one.

use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, CellStatus, DecodeMode};
use ldb_core::timeline::{CellTimeline, GpuSeries, ServerSeries};

use super::*;
use crate::html::{HtmlOptions, Input, render as html};

#[test]
fn names_parse_in_every_accepted_form() {
    assert_eq!(parse_name("16:8k"), Some((16, 8192)));
    assert_eq!(parse_name(" 16:8192 "), Some((16, 8192)));
    assert_eq!(parse_name("C=4 ctx=1.5k"), Some((4, 1536)));
    assert_eq!(parse_name("C=4,ctx=0"), Some((4, 0)));
    for bad in ["", "16", "x:8k", "16:eight", "C=4", "16x8k"] {
        assert_eq!(parse_name(bad), None, "{bad}");
    }
}

/// Ramp-up 1.5 s (two bins), window 1.5 s → 4.0 s (three bins, the last
/// half a second).
fn timeline() -> CellTimeline {
    CellTimeline {
        window_start_s: 1.5,
        window_end_s: 4.0,
        client_ramp_bins: 2,
        client_tokens: vec![0, 7, 40, 42, 19],
        server: Some(ServerSeries {
            t_s: vec![0.9, 1.6, 3.1],
            running: vec![Some(2.0), Some(4.0), Some(4.0)],
            waiting: vec![Some(2.0), Some(0.0), None],
            kv_usage: vec![Some(0.05), Some(0.125), Some(0.126)],
        }),
        gpu: Some(GpuSeries {
            t_s: vec![0.5, 1.5, 2.5, 3.5],
            power_w: vec![Some(120.0), Some(310.5), Some(320.0), Some(318.0)],
            util_pct: vec![Some(3.0), Some(97.0), Some(98.0), Some(98.0)],
            pcie_rx_mb_s: vec![Some(900.0), Some(10.0), Some(11.0), Some(9.0)],
            pcie_tx_mb_s: vec![None, None, None, None],
        }),
    }
}

fn doc() -> ResultDocument {
    let mut d = ResultDocument::default();
    let cell = |c: u32, ctx: u64, t: Option<CellTimeline>| {
        let mut r = CellResult {
            concurrency: c,
            context_tokens: ctx,
            benchmark_mode: DecodeMode::Duration,
            client_output_tokens: 101,
            aggregate_tps: Some(40.4),
            ..CellResult::default()
        };
        r.ext.timeline = t;
        r
    };
    d.metadata.concurrency_levels = vec![4, 8];
    d.metadata.context_lengths = vec![8192];
    d.results = vec![cell(4, 8192, Some(timeline())), cell(8, 8192, None)];
    d.results[1].ext.status = CellStatus::SkippedKv;
    d
}

#[test]
fn the_text_shows_every_second_scrape_and_sample() {
    let d = doc();
    let c = find_cell(&d, "4:8k").expect("found");
    let text = render(c, c.ext.timeline.as_ref().unwrap());
    assert!(
        text.contains("window 1.50 s → 4.00 s (2 ramp-up seconds"),
        "{text}"
    );
    assert!(
        text.contains("(101 in the window; the cell counted 101)"),
        "{text}"
    );
    // Bins start half a second before the launch, on the window's grid.
    for row in [
        "    -0.50        0  ramp-up",
        "     0.50        7  ramp-up",
        "     1.50       40  window",
        "     3.50       19  window",
    ] {
        assert!(text.contains(row), "{row:?} missing:\n{text}");
    }
    assert!(
        text.contains("     1.60      4.0      0.0     12.5"),
        "{text}"
    );
    assert!(
        text.contains("     3.10      4.0        —     12.6"),
        "a missing gauge is —:\n{text}"
    );
    assert!(
        text.contains("     1.50    310.5    97.0         10.0            —"),
        "{text}"
    );
    assert_eq!(find_cell(&d, "C=4 ctx=8k"), Ok(c));
}

#[test]
fn a_bad_cell_name_is_one_line_listing_the_cells_with_a_timeline() {
    let d = doc();
    let e = find_cell(&d, "16:8k").unwrap_err();
    assert!(!e.contains('\n'));
    assert!(
        e.contains("no decode cell named \"16:8k\"") && e.ends_with("timeline: 4:8k"),
        "{e}"
    );
    let e = find_cell(&d, "8:8192").unwrap_err();
    assert!(
        e.contains("cell 8:8k has no timeline (it was not measured)"),
        "{e}"
    );
    let mut old = doc();
    old.results[0].ext.timeline = None;
    let e = find_cell(&old, "4:8k").unwrap_err();
    assert!(
        e.contains("written by a version without timelines") && e.ends_with("one: none"),
        "{e}"
    );
}

#[test]
fn the_page_draws_one_small_figure_per_cell_with_a_timeline() {
    let d = doc();
    let page = html(
        &[Input {
            name: "run",
            doc: &d,
        }],
        &HtmlOptions::default(),
    );
    assert_eq!(page.matches("id=\"timelines\"").count(), 1);
    let start = page.find("id=\"timeline-4-8192\"").expect("figure");
    let fig = &page[start..start + page[start..].find("</figure>").unwrap()];
    assert!(
        fig.contains("<svg") && fig.contains("window 1.5–4.0 s, 101 tokens"),
        "{fig}"
    );
    for caption in ["client tok/s", "running", "KV usage", "GPU power", "PCIe"] {
        assert!(fig.contains(caption), "{caption} panel missing");
    }
    assert!(
        !page.contains("id=\"timeline-8-8192\""),
        "no timeline, no figure"
    );
}

#[test]
fn files_without_timelines_still_load_and_render_without_the_section() {
    // A cell as older versions wrote it: no `timeline` key.
    let json = serde_json::json!({"concurrency": 4, "context_tokens": 0, "status": "ok"});
    let c: CellResult = serde_json::from_value(json).expect("loads");
    assert_eq!(c.ext.timeline, None);
    let back = serde_json::to_value(&c).unwrap();
    assert!(back.get("timeline").is_none(), "absent stays absent");
    let mut d = doc();
    d.results.iter_mut().for_each(|c| c.ext.timeline = None);
    let page = html(
        &[Input {
            name: "run",
            doc: &d,
        }],
        &HtmlOptions::default(),
    );
    assert!(!page.contains("id=\"timelines\""));
}
