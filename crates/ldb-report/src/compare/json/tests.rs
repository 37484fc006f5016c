//! The typed comparison JSON is byte for byte what the `json!` builder it
//! replaced wrote (that builder is kept here as the reference), and it
//! reads back to the same value.

use serde_json::{Map, Value, json};

use super::super::cells::{CellComparison, PrefillComparison};
use super::super::metric::{Change, Estimate};
use super::super::rates::RateComparison;
use super::super::{CompareReport, Comparison, RunLabel};
use super::COMPARE_FORMAT;

/// The whole report as a JSON value.
pub(super) fn legacy_to_json(r: &CompareReport) -> Value {
    json!({
        "compare_format": COMPARE_FORMAT,
        "threshold_pct": r.threshold_pct,
        "forced": r.forced,
        "significance": if r.tested() { "welch_t_test" } else { "not_tested_single_run" },
        "significance_note": r.significance_note(),
        "regression": r.has_regression(),
        "comparisons": r.comparisons.iter().map(comparison).collect::<Vec<_>>(),
    })
}

fn comparison(c: &Comparison) -> Value {
    use super::super::metric::Verdict as V;
    json!({
        "base": run(&c.base),
        "new": run(&c.new),
        "comparable": c.blocking().is_empty(),
        "settings_differences": c.settings.iter().map(|d| json!({
            "key": d.key,
            "base": d.base,
            "new": d.new,
            "blocking": d.blocking,
        })).collect::<Vec<_>>(),
        "regression": c.has_regression(),
        "counts": {
            "regression": c.count(V::Regression),
            "improvement": c.count(V::Improvement),
            "unchanged": c.count(V::Unchanged),
            "not_comparable": c.count(V::NotComparable),
        },
        "cells": c.cells.iter().map(cell).collect::<Vec<_>>(),
        "prefill": c.prefill.iter().map(prefill).collect::<Vec<_>>(),
        "rate_cells": c.rates.iter().map(rate).collect::<Vec<_>>(),
    })
}

fn rate(r: &RateComparison) -> Value {
    let mut metrics = Map::new();
    for (m, ch) in &r.changes {
        metrics.insert(m.key().into(), change(ch));
    }
    let status = |s: Option<(ldb_core::result::CellStatus, bool)>| s.map(|(st, _)| st.as_str());
    let saturated = |s: Option<(ldb_core::result::CellStatus, bool)>| s.map(|(_, sat)| sat);
    json!({
        "context_tokens": r.context_tokens,
        "request_rate": r.request_rate,
        "base_status": status(r.base_status),
        "new_status": status(r.new_status),
        "base_saturated": saturated(r.base_status),
        "new_saturated": saturated(r.new_status),
        "outcome": r.outcome.as_str(),
        "verdict": r.verdict.as_str(),
        "metrics": metrics,
    })
}

fn run(l: &RunLabel) -> Value {
    json!({
        "file": l.file,
        "engine": l.engine,
        "engine_version": l.engine_version,
        "model": l.model,
        "started_at": l.started_at,
    })
}

fn cell(c: &CellComparison) -> Value {
    let mut metrics = Map::new();
    for (m, ch) in &c.changes {
        metrics.insert(m.key().into(), change(ch));
    }
    json!({
        "layer": c.key.layer.as_str(),
        "context_tokens": c.key.context_tokens,
        "concurrency": c.key.concurrency,
        "base_status": c.base_status.map(|s| s.as_str()),
        "new_status": c.new_status.map(|s| s.as_str()),
        "outcome": c.outcome.as_str(),
        "verdict": c.verdict.as_str(),
        "metrics": metrics,
    })
}

fn prefill(p: &PrefillComparison) -> Value {
    json!({
        "context_tokens": p.context_tokens,
        "base_measured": p.base_measured,
        "new_measured": p.new_measured,
        "outcome": p.outcome.as_str(),
        "verdict": p.verdict.as_str(),
        "metrics": { "tok_per_sec": change(&p.tok_per_sec) },
    })
}

fn change(ch: &Change) -> Value {
    let v = |e: Option<Estimate>| e.map(|e| e.value);
    let mut out = json!({
        "base": v(ch.base),
        "new": v(ch.new),
        "change_pct": ch.change_pct,
        "better": ch.direction.as_str(),
        "verdict": ch.verdict.as_str(),
        "significance": ch.significance.as_str(),
    });
    // Only runs with repeats have these: a single run's output is unchanged.
    let spread = |e: Option<Estimate>| {
        e.and_then(|e| e.repeats)
            .map(|r| json!({ "n": r.n, "std_dev": r.std_dev }))
    };
    if let Some(p) = ch.p_value {
        out["p_value"] = json!(p);
        out["base_repeats"] = spread(ch.base).unwrap_or(Value::Null);
        out["new_repeats"] = spread(ch.new).unwrap_or(Value::Null);
    }
    out
}

fn golden(name: &str) -> ldb_core::document::ResultDocument {
    let text = match name {
        "sim-burst" => include_str!("../../../tests/golden/sim-burst.json"),
        _ => include_str!("../../../tests/golden/sim-seed-args.json"),
    };
    ldb_core::document::ResultDocument::from_json_str(text).expect("golden loads")
}

#[test]
fn the_typed_output_writes_the_same_bytes_and_reads_back() {
    let base = golden("sim-seed-args");
    let mut slower = base.clone();
    for c in &mut slower.results {
        if let Some(t) = c.aggregate_tps.as_mut() {
            *t *= 0.5;
        }
    }
    let burst = golden("sim-burst");
    for (new, forced) in [(&base, false), (&slower, false), (&burst, true)] {
        let report = CompareReport {
            threshold_pct: 5.0,
            forced,
            comparisons: vec![Comparison::new(("a.json", &base), ("b.json", new), 5.0)],
        };
        let typed = serde_json::to_string_pretty(&super::to_json(&report)).expect("json");
        let legacy = serde_json::to_string_pretty(&legacy_to_json(&report)).expect("json");
        assert_eq!(typed, legacy);
        let read = crate::compare::output::read(&typed).expect("reads back");
        assert_eq!(read, super::output(&report));
        assert_eq!(serde_json::to_string_pretty(&read).expect("json"), typed);
    }
}
