//! The comparison on fixed documents: the simulator goldens and copies of
//! them with chosen values scaled.

use ldb_core::document::ResultDocument;
use ldb_core::result::CellStatus;

use super::*;

fn golden(name: &str) -> ResultDocument {
    let text = match name {
        "sim-burst" => include_str!("../../tests/golden/sim-burst.json"),
        _ => include_str!("../../tests/golden/sim-seed-args.json"),
    };
    ResultDocument::from_json_str(text).expect("golden loads")
}

fn compare(base: &ResultDocument, new: &ResultDocument, threshold: f64) -> Comparison {
    Comparison::new(("base.json", base), ("new.json", new), threshold)
}

fn cell(c: &Comparison, layer: Layer, ctx: u64, conc: u32) -> &CellComparison {
    c.cells
        .iter()
        .find(|x| {
            x.key
                == CellKey {
                    layer,
                    context_tokens: ctx,
                    concurrency: conc,
                }
        })
        .expect("cell compared")
}

fn change(c: &CellComparison, m: CellMetric) -> Change {
    c.changes
        .iter()
        .find(|(x, _)| *x == m)
        .map(|(_, ch)| *ch)
        .expect("metric")
}

fn decode_mut(d: &mut ResultDocument, ctx: u64, conc: u32) -> &mut ldb_core::result::CellResult {
    d.results
        .iter_mut()
        .find(|c| c.context_tokens == ctx && c.concurrency == conc)
        .expect("cell in golden")
}

#[test]
fn a_run_compared_with_itself_changes_nothing() {
    for name in ["sim-burst", "sim-seed-args"] {
        let d = golden(name);
        let c = compare(&d, &d, DEFAULT_THRESHOLD_PCT);
        assert!(c.settings.is_empty(), "{name}: {:?}", c.settings);
        assert!(!c.has_regression());
        assert_eq!(c.cells.len(), d.results.len() + d.burst_results.len());
        for x in &c.cells {
            assert_eq!(x.outcome, Outcome::Compared, "{name} {:?}", x.key);
            for (m, ch) in &x.changes {
                if ch.base.is_some() {
                    assert_eq!(ch.change_pct, Some(0.0), "{name} {:?} {m:?}", x.key);
                }
            }
        }
        assert!(
            c.prefill
                .iter()
                .all(|p| p.tok_per_sec.change_pct == Some(0.0))
        );
    }
}

#[test]
fn scaled_values_give_their_percentages_judged_by_direction() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    let slow = decode_mut(&mut new, 0, 2);
    slow.aggregate_tps = slow.aggregate_tps.map(|v| v * 0.8);
    let quick = decode_mut(&mut new, 2048, 1);
    if let Some(t) = quick.latency.ttft.as_mut() {
        t.p50 *= 0.5; // lower is better: an improvement
        t.p99 *= 1.5; // and a regression of the tail
    }
    let c = compare(&base, &new, DEFAULT_THRESHOLD_PCT);

    let s = cell(&c, Layer::Decode, 0, 2);
    let agg = change(s, CellMetric::AggregateTps);
    assert!((agg.change_pct.expect("pct") + 20.0).abs() < 1e-9);
    assert_eq!(agg.verdict, Verdict::Regression);
    assert_eq!(
        change(s, CellMetric::PerUserTps).verdict,
        Verdict::Unchanged
    );
    assert_eq!(s.verdict, Verdict::Regression);

    let q = cell(&c, Layer::Decode, 2048, 1);
    let p50 = change(q, CellMetric::TtftP50);
    assert!((p50.change_pct.expect("pct") + 50.0).abs() < 1e-9);
    assert_eq!(p50.verdict, Verdict::Improvement);
    let p99 = change(q, CellMetric::TtftP99);
    assert!((p99.change_pct.expect("pct") - 50.0).abs() < 1e-9);
    assert_eq!(p99.verdict, Verdict::Regression);
    assert_eq!(
        q.verdict,
        Verdict::Regression,
        "one regressed metric makes the cell regress"
    );

    // The burst cell with the same key is a different cell, untouched.
    assert_eq!(cell(&c, Layer::Burst, 0, 2).verdict, Verdict::Unchanged);
    assert_eq!(c.count(Verdict::Regression), 2);
    assert!(c.has_regression());
}

#[test]
fn the_threshold_decides_what_is_marked() {
    let base = golden("sim-seed-args");
    let mut new = base.clone();
    let cut = &mut new.results[0];
    cut.aggregate_tps = cut.aggregate_tps.map(|v| v * 0.96);
    let key = (new.results[0].context_tokens, new.results[0].concurrency);
    let at = |t| {
        let c = compare(&base, &new, t);
        cell(&c, Layer::Decode, key.0, key.1).verdict
    };
    assert_eq!(at(5.0), Verdict::Unchanged);
    assert_eq!(at(3.0), Verdict::Regression);
    assert_eq!(at(0.0), Verdict::Regression);
}

#[test]
fn improvements_alone_are_not_regressions() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    for c in &mut new.results {
        c.aggregate_tps = c.aggregate_tps.map(|v| v * 1.25);
    }
    let c = compare(&base, &new, 5.0);
    assert!(!c.has_regression());
    assert_eq!(c.count(Verdict::Improvement), base.results.len());
}

#[test]
fn cells_in_one_run_only_and_status_changes_are_listed() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    let gone = new.results.remove(0);
    let mut extra = new.results[0].clone();
    extra.concurrency = 64;
    extra.context_tokens = 0;
    new.results.push(extra);
    let failed = decode_mut(&mut new, 2048, 2);
    failed.ext.status = CellStatus::Error;
    failed.aggregate_tps = None;
    let c = compare(&base, &new, 5.0);

    let only_base = cell(&c, Layer::Decode, gone.context_tokens, gone.concurrency);
    assert_eq!(only_base.outcome, Outcome::OnlyInBase);
    assert_eq!(only_base.verdict, Verdict::NotComparable);
    assert_eq!(cell(&c, Layer::Decode, 0, 64).outcome, Outcome::OnlyInNew);
    let f = cell(&c, Layer::Decode, 2048, 2);
    assert_eq!(
        (f.outcome, f.verdict),
        (Outcome::BecameInvalid, Verdict::Regression)
    );
    assert_eq!(f.new_status, Some(CellStatus::Error));
    // The other way round, the failed cell is an improvement.
    let back = compare(&new, &base, 5.0);
    assert_eq!(
        cell(&back, Layer::Decode, 2048, 2).outcome,
        Outcome::BecameValid
    );

    let text = render_text(&report(vec![c]));
    assert!(text.contains("only in base (ok)"), "{text}");
    assert!(text.contains("only in new (ok)"), "{text}");
    assert!(text.contains("ok → error"), "{text}");
}

#[test]
fn prefill_rows_compare_their_rate() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    if let Some(p) = new.prefill.get_mut(&2048) {
        p.tok_per_sec *= 0.5;
    }
    new.prefill.remove(&4096);
    let c = compare(&base, &new, 5.0);
    let p = c
        .prefill
        .iter()
        .find(|p| p.context_tokens == 2048)
        .expect("row");
    assert_eq!(p.tok_per_sec.change_pct, Some(-50.0));
    assert_eq!(p.verdict, Verdict::Regression);
    let gone = c
        .prefill
        .iter()
        .find(|p| p.context_tokens == 4096)
        .expect("row");
    assert_eq!(gone.outcome, Outcome::OnlyInBase);
}

#[test]
fn blocking_differences_make_a_one_line_refusal() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    new.metadata.engine_version = "0.12.0".into();
    new.metadata.duration_per_test = 2.0;
    new.metadata.server = "elsewhere:1".into();
    let c = compare(&base, &new, 5.0);
    let msg = c.refusal().expect("refused");
    assert!(!msg.contains('\n'));
    assert!(
        msg.contains("base.json and new.json are not comparable"),
        "{msg}"
    );
    assert!(msg.contains("engine_version 0.11.0-sim → 0.12.0"), "{msg}");
    assert!(msg.contains("duration_per_test 1 → 2"), "{msg}");
    assert!(!msg.contains("server"), "information only: {msg}");
    // A new address alone does not block.
    let mut moved = base.clone();
    moved.metadata.server = "elsewhere:1".into();
    assert!(compare(&base, &moved, 5.0).refusal().is_none());
}

fn report(comparisons: Vec<Comparison>) -> CompareReport {
    CompareReport {
        threshold_pct: 5.0,
        forced: false,
        comparisons,
    }
}

#[test]
fn every_format_names_the_regressed_cell() {
    let base = golden("sim-burst");
    let mut new = base.clone();
    let slow = decode_mut(&mut new, 2048, 2);
    slow.aggregate_tps = slow.aggregate_tps.map(|v| v * 0.5);
    let r = report(vec![compare(&base, &new, 5.0)]);

    let text = render_text(&r);
    let row = text
        .lines()
        .find(|l| l.contains("REGRESSION"))
        .expect("a regression row");
    assert!(row.trim_start().starts_with("2k"), "{row}");
    assert!(row.contains("-50.0% ✗"), "{row}");
    assert!(text.contains(SIGNIFICANCE_NOTE));
    assert!(text.contains("1 regression(s)"), "{text}");

    let md = render_markdown(&r);
    assert!(md.contains("| ctx | C | status |"), "{md}");
    assert!(md.contains("|---|---|---|---:|"), "{md}");
    assert!(
        md.lines()
            .any(|l| l.starts_with("| 2k | 2 |") && l.contains("REGRESSION")),
        "{md}"
    );

    let j = to_json(&r);
    assert_eq!(j["regression"], true);
    let cells = j["comparisons"][0]["cells"].as_array().expect("cells");
    let hit = cells
        .iter()
        .find(|c| c["verdict"] == "regression")
        .expect("regressed cell");
    assert_eq!(
        (hit["layer"].as_str(), hit["context_tokens"].as_u64()),
        (Some("decode"), Some(2048))
    );
    let agg = &hit["metrics"]["aggregate_tps"];
    assert_eq!(agg["change_pct"], -50.0);
    assert_eq!(agg["better"], "higher");
    assert_eq!(agg["significance"], "not_tested_single_run");
    assert_eq!(hit["metrics"]["ttft_p99"]["better"], "lower");
}
