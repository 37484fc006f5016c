//! The replay tables of `compare`'s text and Markdown forms: one row per
//! trace replay or session run (status, output tok/s base → new, the change
//! of each [`ReplayMetric`], hit rates intended/achieved of both sides),
//! then TTFT by turn index of the session runs.

use super::super::replays::{ReplayComparison, ReplayMetric};
use super::{Grid, Outcome, pct, verdict};

fn name(r: &ReplayComparison) -> String {
    format!("{} {}", r.kind.as_str(), r.index + 1)
}

fn rate(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn status(r: &ReplayComparison) -> String {
    let word = |s: Option<ldb_core::result::CellStatus>| s.map_or("absent", |s| s.as_str());
    let (b, n) = (word(r.base_status), word(r.new_status));
    match r.outcome {
        _ if !r.same_workload && r.base_status.is_some() && r.new_status.is_some() => {
            "another workload".into()
        }
        Outcome::OnlyInBase => format!("only in base ({b})"),
        Outcome::OnlyInNew => format!("only in new ({n})"),
        _ if b == n => b.to_string(),
        _ => format!("{b} → {n}"),
    }
}

/// One row per replay.
pub(super) fn grid(rows: &[ReplayComparison]) -> Grid {
    let mut head = vec![
        "replay".to_string(),
        "status".into(),
        "out tok/s base → new".into(),
    ];
    head.extend(ReplayMetric::ALL.iter().map(|m| m.label().to_string()));
    head.push("hit rate int/ach base → new".into());
    head.push("verdict".into());
    let rows = rows
        .iter()
        .map(|r| {
            let tps = r
                .changes
                .iter()
                .find(|(m, _)| *m == ReplayMetric::OutputTps)
                .and_then(|(_, ch)| Some(format!("{:.1} → {:.1}", ch.base?.value, ch.new?.value)))
                .unwrap_or_else(|| "-".into());
            let h = r.hit_rates;
            let mut row = vec![name(r), status(r), tps];
            row.extend(r.changes.iter().map(|(_, ch)| pct(ch)));
            row.push(format!(
                "{}/{} → {}/{}",
                rate(h.base_intended),
                rate(h.base_achieved),
                rate(h.new_intended),
                rate(h.new_achieved)
            ));
            row.push(verdict(r.verdict).into());
            row
        })
        .collect();
    Grid {
        head,
        rows,
        left: 2,
    }
}

/// TTFT by turn of the compared session runs (`None` when there are none).
pub(super) fn turn_grid(rows: &[ReplayComparison]) -> Option<Grid> {
    let head = ["replay", "turn", "TTFT p50 ms base → new", "p50", "p99"]
        .map(String::from)
        .to_vec();
    let ms = |c: &super::Change| match (c.base, c.new) {
        (Some(b), Some(n)) => format!("{:.1} → {:.1}", b.value * 1000.0, n.value * 1000.0),
        _ => "-".into(),
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| {
            r.turns.iter().map(move |t| {
                vec![
                    name(r),
                    t.turn.to_string(),
                    ms(&t.ttft_p50),
                    pct(&t.ttft_p50),
                    pct(&t.ttft_p99),
                ]
            })
        })
        .collect();
    (!rows.is_empty()).then_some(Grid {
        head,
        rows,
        left: 1,
    })
}
