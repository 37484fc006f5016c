//! `compare --format json`: the comparison as one JSON object with stable
//! keys (documented in `docs/compare.md`, version in `compare_format`),
//! built as the typed [`CompareOutput`] (read back with
//! [`super::output::read`]).

use serde_json::Value;

use super::cells::{CellComparison, PrefillComparison};
use super::metric::{Change, Estimate};
use super::output::{
    CellOut, ChangeOut, CompareOutput, Counts, HitRatesOut, Metrics, PrefillOut, RateOut,
    ReplayOut, RunComparison, RunOut, SettingOut, Spread, Tested, TurnOut, indexed::Ordered,
};
use super::rates::RateComparison;
use super::replays::ReplayComparison;
use super::{CompareReport, Comparison, RunLabel};

/// Layout version of the JSON; raised when a key changes meaning or goes away.
pub const COMPARE_FORMAT: u32 = 1;

/// The whole report as a JSON value.
pub fn to_json(r: &CompareReport) -> Value {
    serde_json::to_value(output(r)).unwrap_or(Value::Null)
}

/// The whole report as its typed output.
pub fn output(r: &CompareReport) -> CompareOutput {
    let significance = if r.tested() {
        "welch_t_test"
    } else {
        "not_tested_single_run"
    };
    CompareOutput {
        compare_format: COMPARE_FORMAT,
        threshold_pct: r.threshold_pct,
        forced: r.forced,
        significance: significance.into(),
        significance_note: r.significance_note().into(),
        regression: r.has_regression(),
        comparisons: r.comparisons.iter().map(comparison).collect(),
    }
}

fn comparison(c: &Comparison) -> RunComparison {
    use super::metric::Verdict as V;
    RunComparison {
        base: run(&c.base),
        new: run(&c.new),
        comparable: c.blocking().is_empty(),
        settings_differences: c
            .settings
            .iter()
            .map(|d| SettingOut {
                key: d.key.into(),
                base: d.base.clone(),
                new: d.new.clone(),
                blocking: d.blocking,
            })
            .collect(),
        regression: c.has_regression(),
        counts: Counts {
            regression: c.count(V::Regression),
            improvement: c.count(V::Improvement),
            unchanged: c.count(V::Unchanged),
            not_comparable: c.count(V::NotComparable),
        },
        cells: c.cells.iter().map(cell).collect(),
        prefill: c.prefill.iter().map(prefill).collect(),
        rate_cells: c.rates.iter().map(rate).collect(),
        replays: c.replays.iter().map(replay).collect(),
        energy: c.energy.iter().map(energy).collect(),
        ttft_breakdown: c.ttft.iter().map(ttft).collect(),
    }
}

fn energy(e: &super::EnergyComparison) -> super::output::EnergyOut {
    let reasons = |pick: fn(&super::EnergyChange) -> &Option<String>| {
        e.figures
            .iter()
            .filter_map(|f| Some((f.metric.key().to_string(), pick(f).clone()?)))
            .collect()
    };
    super::output::EnergyOut {
        layer: e.key.layer.as_str().into(),
        context_tokens: e.key.context_tokens,
        concurrency: e.key.concurrency,
        metrics: Ordered(
            e.figures
                .iter()
                .map(|f| (f.metric.key().into(), change(&f.change)))
                .collect(),
        ),
        base_reasons: reasons(|f| &f.base_reason),
        new_reasons: reasons(|f| &f.new_reason),
    }
}

fn ttft(t: &super::ttft::TtftComparison) -> super::output::TtftOut {
    super::output::TtftOut {
        layer: t.key.layer.as_str().into(),
        context_tokens: t.key.context_tokens,
        concurrency: t.key.concurrency,
        figures: super::output::indexed::Ordered(
            t.figures
                .iter()
                .map(|f| {
                    let out = super::output::TtftFigureOut {
                        base: f.base,
                        new: f.new,
                        delta: f.delta(),
                    };
                    (f.key.to_string(), out)
                })
                .collect(),
        ),
    }
}

fn replay(r: &ReplayComparison) -> ReplayOut {
    let h = r.hit_rates;
    ReplayOut {
        kind: r.kind.as_str().into(),
        index: r.index,
        base_status: r.base_status.map(|s| s.as_str().into()),
        new_status: r.new_status.map(|s| s.as_str().into()),
        same_workload: r.same_workload,
        outcome: r.outcome.as_str().into(),
        verdict: r.verdict.as_str().into(),
        metrics: Ordered(
            r.changes
                .iter()
                .map(|(m, ch)| (m.key().into(), change(ch)))
                .collect(),
        ),
        prefix_cache: HitRatesOut {
            base_intended: h.base_intended,
            base_achieved: h.base_achieved,
            new_intended: h.new_intended,
            new_achieved: h.new_achieved,
        },
        turns: r
            .turns
            .iter()
            .map(|t| TurnOut {
                turn: t.turn,
                metrics: Ordered(vec![
                    ("ttft_p50".into(), change(&t.ttft_p50)),
                    ("ttft_p99".into(), change(&t.ttft_p99)),
                ]),
            })
            .collect(),
    }
}

fn rate(r: &RateComparison) -> RateOut {
    let status = |s: Option<(ldb_core::result::CellStatus, bool)>| s.map(|(st, _)| st.as_str());
    let saturated = |s: Option<(ldb_core::result::CellStatus, bool)>| s.map(|(_, sat)| sat);
    RateOut {
        context_tokens: r.context_tokens,
        request_rate: r.request_rate,
        base_status: status(r.base_status).map(Into::into),
        new_status: status(r.new_status).map(Into::into),
        base_saturated: saturated(r.base_status),
        new_saturated: saturated(r.new_status),
        outcome: r.outcome.as_str().into(),
        verdict: r.verdict.as_str().into(),
        metrics: Ordered(
            r.changes
                .iter()
                .map(|(m, ch)| (m.key().into(), change(ch)))
                .collect(),
        ),
    }
}

fn run(l: &RunLabel) -> RunOut {
    RunOut {
        file: l.file.clone(),
        engine: l.engine.clone(),
        engine_version: l.engine_version.clone(),
        model: l.model.clone(),
        started_at: l.started_at.clone(),
    }
}

fn cell(c: &CellComparison) -> CellOut {
    CellOut {
        layer: c.key.layer.as_str().into(),
        context_tokens: c.key.context_tokens,
        concurrency: c.key.concurrency,
        base_status: c.base_status.map(|s| s.as_str().into()),
        new_status: c.new_status.map(|s| s.as_str().into()),
        outcome: c.outcome.as_str().into(),
        verdict: c.verdict.as_str().into(),
        metrics: Ordered(
            c.changes
                .iter()
                .map(|(m, ch)| (m.key().into(), change(ch)))
                .collect(),
        ),
    }
}

fn prefill(p: &PrefillComparison) -> PrefillOut {
    let metrics: Metrics = Ordered(vec![("tok_per_sec".into(), change(&p.tok_per_sec))]);
    PrefillOut {
        context_tokens: p.context_tokens,
        base_measured: p.base_measured,
        new_measured: p.new_measured,
        outcome: p.outcome.as_str().into(),
        verdict: p.verdict.as_str().into(),
        metrics,
    }
}

fn change(ch: &Change) -> ChangeOut {
    let v = |e: Option<Estimate>| e.map(|e| e.value);
    // Only runs with repeats have these: a single run's output is unchanged.
    let spread = |e: Option<Estimate>| {
        e.and_then(|e| e.repeats).map(|r| Spread {
            n: r.n,
            std_dev: r.std_dev,
        })
    };
    ChangeOut {
        base: v(ch.base),
        new: v(ch.new),
        change_pct: ch.change_pct,
        better: ch.direction.as_str().into(),
        verdict: ch.verdict.as_str().into(),
        significance: ch.significance.as_str().into(),
        tested: ch.p_value.map(|p_value| Tested {
            p_value,
            base_repeats: spread(ch.base),
            new_repeats: spread(ch.new),
        }),
    }
}

#[cfg(test)]
mod tests;
