//! Energy and cost side by side, on hand-made documents stamped by the
//! core's own arithmetic (`ldb_core::energy_cost::stamp`).

use ldb_core::document::ResultDocument;
use ldb_core::energy_cost::{RunEnergyCost, stamp};
use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{CellResult, DecodeMode};

use super::*;
use crate::compare::{CompareReport, Comparison, render_markdown, render_text, to_json};

/// One decode cell C=4 ctx=0 of 5,000 tokens over 10 s; `joules` of GPU
/// energy over the window (None: no energy counters), $2/GPU-hour × 1.
pub(crate) fn run_with(joules: Option<f64>) -> ResultDocument {
    let mut d = ResultDocument::default();
    let mut c = CellResult {
        concurrency: 4,
        context_tokens: 0,
        benchmark_mode: DecodeMode::Duration,
        measurement_seconds: 10.0,
        client_output_tokens: 5000,
        aggregate_tps: Some(500.0),
        ..CellResult::default()
    };
    c.hardware_summary = HardwareSummary {
        samples: u64::from(joules.is_some()) * 10,
        energy_joules: joules,
        energy_window_seconds: joules.map(|_| 10.0),
        ..HardwareSummary::default()
    };
    d.results.push(c);
    stamp(
        &mut d,
        RunEnergyCost {
            gpu_hour_price_usd: Some(2.0),
            gpu_count: Some(1),
            gpu_count_source: "--gpu-count".into(),
            ..RunEnergyCost::default()
        },
    );
    d
}

fn figure(e: &EnergyComparison, m: EnergyMetric) -> &EnergyChange {
    e.figures.iter().find(|f| f.metric == m).expect("figure")
}

#[test]
fn figures_sit_side_by_side_with_their_change_in_the_right_direction() {
    // 1000 J → 800 J over the same tokens: J/token 0.2 → 0.16 (−20 %, better),
    // tok/s per kW 5000 → 6250 (+25 %, better); the cost is unchanged.
    let (b, n) = (run_with(Some(1000.0)), run_with(Some(800.0)));
    let rows = compare_energy(&b, &n, 5.0);
    assert_eq!(rows.len(), 1);
    let j = figure(&rows[0], EnergyMetric::DecodeJoulesPerToken);
    assert_eq!(j.change.base.map(|e| e.value), Some(0.2));
    assert!((j.change.change_pct.unwrap() + 20.0).abs() < 1e-9);
    assert_eq!(j.change.verdict, crate::compare::Verdict::Improvement);
    let kw = figure(&rows[0], EnergyMetric::TokensPerSecondPerKw);
    assert!((kw.change.change_pct.unwrap() - 25.0).abs() < 1e-9);
    assert_eq!(kw.change.verdict, crate::compare::Verdict::Improvement);
    let usd = figure(&rows[0], EnergyMetric::UsdPerMillionOutputTokens);
    // $2 × 10 s / 3600 / 5000 tokens × 10⁶ = $1.111…
    assert!((usd.change.base.unwrap().value - 10.0 / 9.0).abs() < 1e-9);
    assert_eq!(usd.change.change_pct, Some(0.0));
    // Worse energy is marked, but energy never makes a regression.
    let c = Comparison::new(("b", &n), ("n", &b), 5.0);
    assert_eq!(
        figure(&c.energy[0], EnergyMetric::DecodeJoulesPerToken)
            .change
            .verdict,
        crate::compare::Verdict::Regression
    );
    assert!(!c.has_regression());
}

#[test]
fn a_side_without_energy_shows_its_reason_not_zero() {
    let (b, n) = (run_with(Some(1000.0)), run_with(None));
    let c = Comparison::new(("base.json", &b), ("new.json", &n), 5.0);
    let j = figure(&c.energy[0], EnergyMetric::DecodeJoulesPerToken);
    assert_eq!(j.change.new, None);
    assert!(
        j.new_reason
            .as_deref()
            .unwrap()
            .contains("no GPU energy counters"),
        "{j:?}"
    );
    let report = CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: vec![c],
    };
    let text = render_text(&report);
    assert!(
        text.contains("Energy and cost (shown, not judged)"),
        "{text}"
    );
    assert!(text.contains("0.2000 → —"), "{text}");
    assert!(
        text.contains("new: J/out tok: no GPU energy counters"),
        "{text}"
    );
    assert!(!text.contains("→ 0.0000"), "{text}");
    let md = render_markdown(&report);
    assert!(
        md.contains("- new: J/out tok: no GPU energy counters"),
        "{md}"
    );
    let json = to_json(&report);
    let e = &json["comparisons"][0]["energy"][0];
    assert_eq!(e["metrics"]["decode_joules_per_token"]["base"], 0.2);
    assert!(e["metrics"]["decode_joules_per_token"]["new"].is_null());
    assert!(
        e["new_reasons"]["decode_joules_per_token"]
            .as_str()
            .unwrap()
            .contains("no GPU energy counters")
    );
    let back = crate::compare::read_output(&json.to_string()).expect("reads back");
    assert_eq!(back.comparisons[0].energy.len(), 1);
}

#[test]
fn runs_without_energy_figures_have_no_energy_section() {
    let mut d = run_with(Some(1.0));
    d.results[0].ext.energy_cost = None;
    d.energy_cost = None;
    let c = Comparison::new(("b", &d), ("n", &d), 5.0);
    assert!(c.energy.is_empty());
    let report = CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons: vec![c],
    };
    assert!(!render_text(&report).contains("Energy and cost"));
    assert!(to_json(&report)["comparisons"][0].get("energy").is_none());
}

#[test]
fn the_html_page_has_an_energy_table_with_reasons() {
    let mut d = run_with(Some(1000.0));
    let none = run_with(None);
    let mut other = none.results[0].clone();
    other.concurrency = 8;
    d.results.push(other);
    let page = crate::html::render(
        &[crate::html::Input {
            name: "run",
            doc: &d,
        }],
        &crate::html::HtmlOptions::default(),
    );
    let start = page.find("id=\"energy-cost\"").expect("section");
    let sec = &page[start..start + page[start..].find("</section>").unwrap()];
    for want in [
        "<td>0.200</td>",
        "<td>5000</td>",
        "<td>1.111</td>",
        "$2/GPU-hour × 1 GPU(s)",
    ] {
        assert!(sec.contains(want), "{want} missing: {sec}");
    }
    assert!(
        sec.contains("no GPU energy counters"),
        "the C=8 cell says why: {sec}"
    );
    assert!(!sec.contains("<td>0.000</td>"), "{sec}");
    let plain = crate::html::render(
        &[crate::html::Input {
            name: "run",
            doc: &ResultDocument::default(),
        }],
        &crate::html::HtmlOptions::default(),
    );
    assert!(!plain.contains("id=\"energy-cost\""));
}
