//! The TTFT breakdown on every surface: console, CSV, HTML and compare
//! (text and JSON), from cells whose figures are known.

use ldb_core::document::ResultDocument;
use ldb_core::histogram::QuantileEstimate;
use ldb_core::result::{CellResult, CellStatus, DecodeMode};
use ldb_core::ttft_breakdown::{TtftBreakdown, TtftComponent};
use ldb_report::compare::{CompareReport, Comparison, render_text, to_json};
use ldb_report::html::{HtmlOptions, Input};
use ldb_report::text::{TextOptions, render_to_string};

fn comp(name: &str, mean: f64) -> TtftComponent {
    TtftComponent {
        name: name.into(),
        metric: format!("vllm:{name}"),
        count: Some(10),
        mean_s: Some(mean),
        p50: Some(QuantileEstimate {
            value: 0.15,
            low: 0.1,
            high: Some(0.25),
        }),
        ..TtftComponent::default()
    }
}

/// A cell at C=4 whose engine TTFT is 120 ms (queue 20, prefill 90) and
/// whose client saw `client` seconds.
fn doc(client: f64) -> ResultDocument {
    let mut d = ResultDocument::default();
    d.metadata.engine = "vllm".into();
    d.metadata.decode_mode = Some(DecodeMode::Duration);
    d.metadata.concurrency_levels = vec![4];
    d.metadata.context_lengths = vec![0];
    let mut cell = CellResult {
        concurrency: 4,
        benchmark_mode: DecodeMode::Duration,
        aggregate_tps: Some(100.0),
        ..CellResult::default()
    };
    cell.ext.status = CellStatus::Ok;
    cell.ext.ttft_breakdown = Some(TtftBreakdown {
        source: "prometheus_histograms".into(),
        components: vec![
            comp("ttft", 0.12),
            comp("queue", 0.02),
            comp("prefill", 0.09),
            TtftComponent::absent("decode", "vllm:decode", "not exported by this server"),
        ],
        engine_ttft_component: "ttft".into(),
        client_requests: 10,
        client_ttft_mean_s: Some(client),
        client_ttft_p50_s: Some(client),
        frontend_overhead_mean_s: Some(client - 0.12),
        frontend_overhead_p50_s: Some(client - 0.15),
        frontend_overhead_p50_range_s: Some([Some(client - 0.25), Some(client - 0.1)]),
        preemptions: Some(3),
        ..TtftBreakdown::default()
    });
    d.results.push(cell);
    d
}

#[test]
fn console_csv_and_html_show_the_breakdown() {
    let d = doc(0.125);
    let opts = TextOptions {
        width: 160,
        show_capacity_limited_values: false,
        color: false,
    };
    let text = render_to_string(&d, &opts);
    let table = text.split_once("TTFT breakdown").expect("the table").1;
    let row = table
        .lines()
        .find(|l| l.contains("125.0"))
        .expect("the cell's row");
    for want in ["125.0", "120.0", "150.0 ±150", "20.0", "90.0", "5.0", "3"] {
        assert!(row.contains(want), "{want} missing from {row}");
    }
    assert!(table.contains("decode (vllm:decode) — not exported by this server"));

    let mut csv = Vec::new();
    ldb_report::csv::write(&d, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |k: &str| row[head.iter().position(|h| *h == k).expect(k)];
    assert_eq!(at("engine_ttft_mean"), "0.12");
    assert_eq!(at("engine_ttft_p50_error_bound"), "0.15");
    assert_eq!(at("queue_time_mean"), "0.02");
    assert_eq!(at("decode_time_mean"), "");
    assert_eq!(at("frontend_dominant"), "false");
    assert_eq!(at("preemptions"), "3");

    let html = ldb_report::html::render(
        &[Input {
            name: "run",
            doc: &d,
        }],
        &HtmlOptions::default(),
    );
    assert!(html.contains("<section id=\"ttft-breakdown\">"));
    assert!(html.contains("<td>150.0 ±150</td>"));
    // a result without a breakdown has no such section
    let plain = ResultDocument::default();
    let html = ldb_report::html::render(
        &[Input {
            name: "p",
            doc: &plain,
        }],
        &HtmlOptions::default(),
    );
    assert!(!html.contains("ttft-breakdown"));
}

#[test]
fn compare_puts_the_figures_side_by_side_without_judging_them() {
    let (base, new) = (doc(0.125), doc(0.325));
    let report = CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: vec![Comparison::new(("a.json", &base), ("b.json", &new), 5.0)],
    };
    let text = render_text(&report);
    let table = text.split_once("TTFT breakdown").expect("the table").1;
    assert!(table.contains("125.0 → 325.0 (+200.0)"), "{table}");
    assert!(table.contains("5.0 → 205.0 (+200.0)"), "{table}");
    let json = to_json(&report);
    let t = &json["comparisons"][0]["ttft_breakdown"][0];
    assert_eq!(t["concurrency"], 4);
    let overhead = &t["figures"]["frontend_overhead_mean"];
    assert!((overhead["delta"].as_f64().unwrap() - 0.2).abs() < 1e-12);
    assert!((t["figures"]["engine_ttft_mean"]["delta"].as_f64().unwrap()).abs() < 1e-12);
    // read back as the typed output
    let typed = ldb_report::compare::read_output(&json.to_string()).unwrap();
    assert_eq!(typed.comparisons[0].ttft_breakdown.len(), 1);
    // without breakdowns the key is absent
    let none = CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: vec![Comparison::new(
            ("a.json", &ResultDocument::default()),
            ("b.json", &ResultDocument::default()),
            5.0,
        )],
    };
    assert!(
        to_json(&none)["comparisons"][0]
            .get("ttft_breakdown")
            .is_none()
    );
}
