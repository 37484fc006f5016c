//! The per-cell blocks added for "where the time goes" (issue 37) read from
//! a stranger's result file: timelines, the TTFT breakdown and the
//! interference probe. Their strings must stay text in the page and the CSV
//! (the swap of `hostile_tests.rs` reaches them through [`with_new_blocks`]),
//! and numbers no run could produce — counts at `u64::MAX`, times at ±1e308,
//! parallel arrays of different lengths, a ramp longer than the series —
//! must give a page, a CSV, a console report, a timeline and a comparison,
//! never a panic or an endless loop (the charting library's tick search
//! never ended on a range of ±1e308: `html/plot_range.rs`).

use ldb_core::document::ResultDocument;
use ldb_core::histogram::QuantileEstimate;
use ldb_core::interference::{Injection, Interference};
use ldb_core::timeline::{CellTimeline, GpuSeries, ServerSeries};
use ldb_core::ttft_breakdown::{TtftBreakdown, TtftComponent};

use crate::html::{HtmlOptions, Input, render, synthetic_result};

const HUGE: f64 = 1e308;

/// A timeline whose every field is at an extreme.
fn extreme_timeline() -> CellTimeline {
    CellTimeline {
        window_start_s: -HUGE,
        window_end_s: HUGE,
        client_ramp_bins: u32::MAX,
        client_tokens: vec![u64::MAX, u64::MAX, 0, 1],
        server: Some(ServerSeries {
            t_s: vec![HUGE, -HUGE, 0.0],
            running: vec![Some(HUGE)],
            waiting: vec![],
            kv_usage: vec![Some(-HUGE), None, Some(HUGE), Some(1.0)],
        }),
        gpu: Some(GpuSeries {
            t_s: vec![0.0, HUGE],
            power_w: vec![Some(HUGE), Some(-HUGE), Some(0.0)],
            util_pct: vec![],
            pcie_rx_mb_s: vec![None],
            pcie_tx_mb_s: vec![Some(f64::MIN_POSITIVE)],
        }),
    }
}

fn extreme_quantile() -> Option<QuantileEstimate> {
    Some(QuantileEstimate {
        value: HUGE,
        low: -HUGE,
        high: Some(-HUGE),
    })
}

/// A breakdown with text in every string and numbers at the extremes.
fn extreme_breakdown(text: &str) -> TtftBreakdown {
    TtftBreakdown {
        source: text.into(),
        components: vec![
            TtftComponent {
                name: "ttft".into(),
                metric: text.into(),
                count: Some(u64::MAX),
                mean_s: Some(-HUGE),
                p50: extreme_quantile(),
                p90: extreme_quantile(),
                p99: None,
                reason: None,
            },
            TtftComponent::absent(text, text, text),
        ],
        engine_ttft_component: text.into(),
        client_requests: u64::MAX,
        client_ttft_mean_s: Some(HUGE),
        client_ttft_p50_s: Some(-HUGE),
        frontend_overhead_mean_s: Some(HUGE),
        frontend_overhead_p50_s: Some(HUGE),
        frontend_overhead_p50_range_s: Some([None, Some(-HUGE)]),
        frontend_dominant: true,
        note: Some(text.into()),
        preemptions: Some(u64::MAX),
        preemptions_source: Some(text.into()),
        cached_prompt_tokens_mean: Some(HUGE),
    }
}

/// A probe with one measured injection at the extremes and one skipped.
fn extreme_interference(text: &str) -> Interference {
    Interference {
        quiet_s: HUGE,
        settle_s: -HUGE,
        stall_factor: 0.0,
        injections: vec![
            Injection {
                prompt_tokens: u64::MAX,
                skipped: None,
                injected_at_unix: Some(-HUGE),
                ttft_s: Some(HUGE),
                solo_ttft_s: Some(0.0),
                ttft_inflation: Some(HUGE),
                tps_before: Some(0.0),
                tps_during: Some(HUGE),
                tps_after: Some(-HUGE),
                decode_loss_pct: Some(-HUGE),
                stall_max_s: Some(HUGE),
                stall_p50_s: Some(HUGE),
                baseline_gap_s: Some(0.0),
                streams_stalled: u32::MAX,
                streams: 0,
            },
            Injection::skipped(0, text),
        ],
    }
}

/// `doc` with the three blocks on its first cell (strings set to `text`,
/// which the string swap of `hostile_tests.rs` then replaces).
pub(crate) fn with_new_blocks(mut doc: ResultDocument, text: &str) -> ResultDocument {
    if let Some(c) = doc.results.first_mut() {
        c.ext.timeline = Some(extreme_timeline());
        c.ext.ttft_breakdown = Some(extreme_breakdown(text));
        c.ext.interference = Some(extreme_interference(text));
    }
    doc
}

#[test]
fn extreme_numbers_in_the_new_blocks_give_every_output_without_a_panic() {
    let mut doc = with_new_blocks(synthetic_result(2, 2, 2), "text");
    // A headline figure at the edge of f64 too: the main charts' ranges.
    doc.results[1].aggregate_tps = Some(HUGE);
    doc.results[2].aggregate_tps = Some(-HUGE);
    // Through JSON, as a file from elsewhere would arrive.
    let json = serde_json::to_string(&doc).expect("serialises");
    let doc: ResultDocument = serde_json::from_str(&json).expect("reads back");

    let html = render(
        &[Input {
            name: "extreme",
            doc: &doc,
        }],
        &HtmlOptions::default(),
    );
    assert!(
        html.contains("id=\"timelines\""),
        "the timeline section is there"
    );
    assert!(html.contains("id=\"interference\""));
    assert!(
        html.contains("outside what a chart can show"),
        "a range no chart can show is said, not drawn"
    );

    let mut csv = Vec::new();
    crate::csv::write(&doc, &mut csv).expect("the CSV is written");
    assert!(!csv.is_empty());

    let text = crate::text::render_to_string(&doc, &crate::text::TextOptions::default());
    assert!(
        text.contains("TTFT"),
        "the console report shows the breakdown"
    );

    let cell = &doc.results[0];
    let timeline = crate::timeline::render(cell, cell.ext.timeline.as_ref().expect("set"));
    assert!(
        timeline.contains(&u64::MAX.to_string()),
        "the counts are printed as they are: {timeline}"
    );

    let report = crate::compare::CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: vec![crate::compare::Comparison::new(
            ("a", &doc),
            ("b", &doc),
            5.0,
        )],
    };
    assert!(!crate::compare::render_text(&report).is_empty());
    assert!(!crate::compare::render_markdown(&report).is_empty());
    assert!(crate::compare::to_json(&report).is_object());
}

#[test]
fn the_window_total_of_a_timeline_saturates() {
    let t = extreme_timeline();
    // The ramp covers every entry: nothing lies in the window.
    assert_eq!(t.window_tokens(), 0);
    let t = CellTimeline {
        client_ramp_bins: 0,
        ..t
    };
    assert_eq!(t.window_tokens(), u64::MAX);
}
