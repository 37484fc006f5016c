//! Trace replays (`trace_results`) and session runs (`session_results`) of
//! two runs, paired by kind and position (the first trace replay of each
//! run, …) and compared on their summaries with the threshold and verdict
//! rules of the cells; session runs also turn by turn (TTFT by turn index).
//! The intended and achieved prefix-cache hit rates of both sides are
//! carried along for the reader, not judged: the intended one is a property
//! of the workload, and the 10-point flag of either side is listed with the
//! cells' (`Comparison::prefix_gaps`).
//!
//! Two replays of different workloads (another trace file, time scale,
//! window, limit or filter; other session, turn or user-token counts) are
//! shown but not compared.

use ldb_core::document::ResultDocument;
use ldb_core::replay::session::SessionResult;
use ldb_core::replay::{PrefixCacheCheck, ReplaySummary, TraceResult};
use ldb_core::result::CellStatus;

use super::cells::Outcome;
use super::metric::{Change, Direction, Estimate, Verdict};

/// Which list a replay comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayKind {
    /// `trace_results` (`--trace`).
    Trace,
    /// `session_results` (`--sessions`).
    Sessions,
}

impl ReplayKind {
    /// `trace` or `sessions` (the JSON word).
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayKind::Trace => "trace",
            ReplayKind::Sessions => "sessions",
        }
    }
}

/// A metric of a replay's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMetric {
    /// `output_tps`: output tokens of completed requests ÷ wall time.
    OutputTps,
    /// `achieved_rate`: completed requests ÷ wall time.
    AchievedRate,
    /// `goodput`: completed requests meeting the `--slo` bounds ÷ wall time.
    Goodput,
    /// `ttft_p50`, from the scheduled time.
    TtftP50,
    /// `ttft_p99`.
    TtftP99,
    /// `e2e_p50`, scheduled time to completion.
    E2eP50,
    /// `e2e_p99`.
    E2eP99,
}

impl ReplayMetric {
    /// Every replay metric, in table order.
    pub const ALL: [ReplayMetric; 7] = [
        ReplayMetric::OutputTps,
        ReplayMetric::AchievedRate,
        ReplayMetric::Goodput,
        ReplayMetric::TtftP50,
        ReplayMetric::TtftP99,
        ReplayMetric::E2eP50,
        ReplayMetric::E2eP99,
    ];

    /// The key in `compare --format json`.
    pub fn key(self) -> &'static str {
        match self {
            ReplayMetric::OutputTps => "output_tps",
            ReplayMetric::AchievedRate => "achieved_rate",
            ReplayMetric::Goodput => "goodput",
            ReplayMetric::TtftP50 => "ttft_p50",
            ReplayMetric::TtftP99 => "ttft_p99",
            ReplayMetric::E2eP50 => "e2e_p50",
            ReplayMetric::E2eP99 => "e2e_p99",
        }
    }

    /// Column heading.
    pub fn label(self) -> &'static str {
        match self {
            ReplayMetric::OutputTps => "out tok/s",
            ReplayMetric::AchievedRate => "done/s",
            ReplayMetric::Goodput => "goodput",
            ReplayMetric::TtftP50 => "TTFT p50",
            ReplayMetric::TtftP99 => "TTFT p99",
            ReplayMetric::E2eP50 => "E2E p50",
            ReplayMetric::E2eP99 => "E2E p99",
        }
    }

    /// Which way is better.
    pub fn direction(self) -> Direction {
        match self {
            ReplayMetric::OutputTps | ReplayMetric::AchievedRate | ReplayMetric::Goodput => {
                Direction::HigherIsBetter
            }
            _ => Direction::LowerIsBetter,
        }
    }

    fn value(self, s: &ReplaySummary) -> Option<f64> {
        let v = match self {
            ReplayMetric::OutputTps => Some(s.output_tps),
            ReplayMetric::AchievedRate => s.achieved_rate,
            ReplayMetric::Goodput => s.goodput,
            ReplayMetric::TtftP50 => s.ttft.p50,
            ReplayMetric::TtftP99 => s.ttft.p99,
            ReplayMetric::E2eP50 => s.e2e.p50,
            ReplayMetric::E2eP99 => s.e2e.p99,
        };
        v.filter(|v| v.is_finite())
    }
}

/// Intended and achieved prefix-cache hit rates of both sides (0–1).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HitRates {
    /// The base replay's intended rate.
    pub base_intended: Option<f64>,
    /// The base replay's achieved rate.
    pub base_achieved: Option<f64>,
    /// The new replay's intended rate.
    pub new_intended: Option<f64>,
    /// The new replay's achieved rate.
    pub new_achieved: Option<f64>,
}

/// TTFT of one turn index in both session runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnComparison {
    /// 1-based turn.
    pub turn: u32,
    /// TTFT p50 from the turn's scheduled time.
    pub ttft_p50: Change,
    /// TTFT p99.
    pub ttft_p99: Change,
}

/// One replay in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayComparison {
    /// Trace replay or session run.
    pub kind: ReplayKind,
    /// Position in its list, from 0.
    pub index: usize,
    /// The base replay's status (`None`: absent).
    pub base_status: Option<CellStatus>,
    /// The new replay's status.
    pub new_status: Option<CellStatus>,
    /// Both ran the same workload (same trace file and trace options; same
    /// sessions, turns and user tokens); false makes the pair not compared.
    pub same_workload: bool,
    /// How the pair compares as a whole.
    pub outcome: Outcome,
    /// One change per [`ReplayMetric::ALL`].
    pub changes: Vec<(ReplayMetric, Change)>,
    /// Session runs: TTFT by turn index (empty for traces).
    pub turns: Vec<TurnComparison>,
    /// Hit rates of both sides.
    pub hit_rates: HitRates,
    /// Regression if a metric or a turn's TTFT regressed or the replay
    /// became invalid; improvement for the opposite.
    pub verdict: Verdict,
}

/// What the comparison reads of one replay.
struct Side<'a> {
    status: CellStatus,
    workload: String,
    summary: &'a ReplaySummary,
    cache: &'a PrefixCacheCheck,
    session: Option<&'a SessionResult>,
}

fn trace_side(t: &TraceResult) -> Side<'_> {
    Side {
        status: t.status,
        // The file and every option that picks or times its requests.
        workload: format!("{} {:?}", t.source.sha256, t.source.options),
        summary: &t.summary,
        cache: &t.prefix_cache,
        session: None,
    }
}

fn session_side(s: &SessionResult) -> Side<'_> {
    Side {
        status: s.status,
        workload: format!("{}×{}×{}", s.sessions, s.turns, s.user_tokens),
        summary: &s.summary,
        cache: &s.prefix_cache,
        session: Some(s),
    }
}

fn valid(s: &Side<'_>) -> bool {
    matches!(s.status, CellStatus::Ok | CellStatus::CapacityLimited)
}

fn change(b: Option<f64>, n: Option<f64>, d: Direction, threshold: f64) -> Change {
    let e = |v: Option<f64>| v.filter(|v| v.is_finite()).map(Estimate::single);
    Change::between(e(b), e(n), d, threshold)
}

fn turns(b: &SessionResult, n: &SessionResult, threshold: f64) -> Vec<TurnComparison> {
    let last = b.by_turn.len().max(n.by_turn.len());
    (0..last)
        .map(|i| {
            let (bt, nt) = (b.by_turn.get(i), n.by_turn.get(i));
            let pick = |t: Option<&ldb_core::replay::session::TurnStats>, p99: bool| {
                t.and_then(|t| if p99 { t.ttft.p99 } else { t.ttft.p50 })
            };
            TurnComparison {
                turn: bt.or(nt).map_or(i as u32 + 1, |t| t.turn),
                ttft_p50: change(
                    pick(bt, false),
                    pick(nt, false),
                    Direction::LowerIsBetter,
                    threshold,
                ),
                ttft_p99: change(
                    pick(bt, true),
                    pick(nt, true),
                    Direction::LowerIsBetter,
                    threshold,
                ),
            }
        })
        .collect()
}

fn pair(
    kind: ReplayKind,
    index: usize,
    b: Option<Side<'_>>,
    n: Option<Side<'_>>,
    threshold: f64,
) -> ReplayComparison {
    let outcome = Outcome::of(b.as_ref().map(valid), n.as_ref().map(valid));
    let same_workload = matches!((&b, &n), (Some(b), Some(n)) if b.workload == n.workload);
    let compared = outcome == Outcome::Compared && same_workload;
    let at = |s: &Option<Side<'_>>, m: ReplayMetric| {
        s.as_ref()
            .filter(|_| compared)
            .and_then(|s| m.value(s.summary))
    };
    let changes: Vec<(ReplayMetric, Change)> = ReplayMetric::ALL
        .iter()
        .map(|&m| (m, change(at(&b, m), at(&n, m), m.direction(), threshold)))
        .collect();
    let turns = match (&b, &n) {
        (
            Some(Side {
                session: Some(bs), ..
            }),
            Some(Side {
                session: Some(ns), ..
            }),
        ) if compared => turns(bs, ns, threshold),
        _ => Vec::new(),
    };
    let rate = |s: &Option<Side<'_>>, achieved: bool| {
        s.as_ref().and_then(|s| {
            if achieved {
                s.cache.server_prefix_cache_hit_rate
            } else {
                s.cache.prefix_cache_intended
            }
        })
    };
    let verdict = verdict(outcome, same_workload, &changes, &turns);
    ReplayComparison {
        kind,
        index,
        base_status: b.as_ref().map(|s| s.status),
        new_status: n.as_ref().map(|s| s.status),
        same_workload,
        outcome,
        hit_rates: HitRates {
            base_intended: rate(&b, false),
            base_achieved: rate(&b, true),
            new_intended: rate(&n, false),
            new_achieved: rate(&n, true),
        },
        changes,
        turns,
        verdict,
    }
}

fn verdict(
    outcome: Outcome,
    same_workload: bool,
    changes: &[(ReplayMetric, Change)],
    turns: &[TurnComparison],
) -> Verdict {
    match outcome {
        _ if !same_workload => Verdict::NotComparable,
        Outcome::BecameInvalid => Verdict::Regression,
        Outcome::BecameValid => Verdict::Improvement,
        Outcome::Compared => {
            let all = || {
                changes
                    .iter()
                    .map(|(_, c)| c)
                    .chain(turns.iter().flat_map(|t| [&t.ttft_p50, &t.ttft_p99]))
            };
            if all().any(|c| c.verdict == Verdict::Regression) {
                Verdict::Regression
            } else if all().any(|c| c.verdict == Verdict::Improvement) {
                Verdict::Improvement
            } else {
                Verdict::Unchanged
            }
        }
        _ => Verdict::NotComparable,
    }
}

/// Every replay of either run: the trace replays, then the session runs,
/// each paired by position.
pub fn compare_replays(
    base: &ResultDocument,
    new: &ResultDocument,
    threshold_pct: f64,
) -> Vec<ReplayComparison> {
    let mut out = Vec::new();
    let traces = base.trace_results.len().max(new.trace_results.len());
    for i in 0..traces {
        let (b, n) = (base.trace_results.get(i), new.trace_results.get(i));
        let (b, n) = (b.map(trace_side), n.map(trace_side));
        out.push(pair(ReplayKind::Trace, i, b, n, threshold_pct));
    }
    let sessions = base.session_results.len().max(new.session_results.len());
    for i in 0..sessions {
        let (b, n) = (base.session_results.get(i), new.session_results.get(i));
        let (b, n) = (b.map(session_side), n.map(session_side));
        out.push(pair(ReplayKind::Sessions, i, b, n, threshold_pct));
    }
    out
}

/// The hit-rate flags of every replay of `doc` (more than 10 points apart),
/// as lines for the comparison's prefix-cache list.
pub(crate) fn gap_flags(doc: &ResultDocument) -> Vec<String> {
    let line = |what: String, c: &PrefixCacheCheck| {
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        c.differs.then(|| {
            format!(
                "{what}: prefix-cache hit rate {} achieved vs {} intended, more than 10 points apart",
                pct(c.server_prefix_cache_hit_rate),
                pct(c.prefix_cache_intended)
            )
        })
    };
    let traces = doc.trace_results.iter().enumerate();
    let sessions = doc.session_results.iter().enumerate();
    traces
        .filter_map(|(i, t)| line(format!("trace {}", i + 1), &t.prefix_cache))
        .chain(sessions.filter_map(|(i, s)| line(format!("sessions {}", i + 1), &s.prefix_cache)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay_fixture;

    #[test]
    fn a_slower_server_regresses_its_replays_and_turns() {
        let (base, new) = (replay_fixture::doc(1.0), replay_fixture::doc(0.8));
        let c = compare_replays(&base, &new, 5.0);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].kind, c[1].kind),
            (ReplayKind::Trace, ReplayKind::Sessions)
        );
        let pct = |r: &ReplayComparison, m: ReplayMetric| {
            r.changes
                .iter()
                .find(|(x, _)| *x == m)
                .and_then(|(_, c)| c.change_pct)
        };
        // 0.8 × the throughput, 1.25 × the latencies.
        assert!((pct(&c[0], ReplayMetric::OutputTps).unwrap_or(0.0) + 20.0).abs() < 1e-9);
        assert!((pct(&c[0], ReplayMetric::TtftP50).unwrap_or(0.0) - 25.0).abs() < 1e-9);
        assert_eq!(c[0].verdict, Verdict::Regression);
        assert_eq!(c[1].turns.len(), 3);
        assert_eq!(c[1].turns[2].ttft_p50.verdict, Verdict::Regression);
        assert_eq!(c[1].hit_rates.new_achieved, Some(0.2));
        assert_eq!(c[1].hit_rates.base_intended, Some(0.6));
        // Same numbers: unchanged.
        let same = compare_replays(&base, &base, 5.0);
        assert!(same.iter().all(|r| r.verdict == Verdict::Unchanged));
    }

    #[test]
    fn another_workload_or_a_missing_replay_is_not_compared() {
        let base = replay_fixture::doc(1.0);
        let mut new = replay_fixture::doc(0.5);
        new.trace_results[0].source.options.speed = 2.0;
        new.session_results.clear();
        let c = compare_replays(&base, &new, 5.0);
        assert!(!c[0].same_workload);
        assert_eq!(c[0].verdict, Verdict::NotComparable);
        assert!(c[0].changes.iter().all(|(_, ch)| ch.change_pct.is_none()));
        assert_eq!(c[1].outcome, Outcome::OnlyInBase);
        assert_eq!(c[1].verdict, Verdict::NotComparable);
        assert_eq!(gap_flags(&base).len(), 1);
        assert!(gap_flags(&base)[0].starts_with("sessions 1: "));
    }

    #[test]
    fn the_json_round_trips_and_the_tables_show_replays_and_turns()
    -> Result<(), Box<dyn std::error::Error>> {
        use crate::compare::{CompareReport, Comparison, read_output, render_text, typed_output};
        let (base, new) = (replay_fixture::doc(1.0), replay_fixture::doc(0.8));
        let report = CompareReport {
            threshold_pct: 5.0,
            forced: false,
            comparisons: vec![Comparison::new(("a.json", &base), ("b.json", &new), 5.0)],
        };
        assert!(report.has_regression());
        let typed = typed_output(&report);
        let text = serde_json::to_string(&typed)?;
        assert_eq!(read_output(&text)?, typed);
        let r = &typed.comparisons[0].replays;
        assert_eq!(
            (r[0].kind.as_str(), r[1].kind.as_str()),
            ("trace", "sessions")
        );
        assert_eq!(r[1].turns.len(), 3);
        assert_eq!(r[1].prefix_cache.new_achieved, Some(0.2));
        let tps = r[0].metrics.get("output_tps").and_then(|c| c.change_pct);
        assert!(tps.is_some_and(|p| (p + 20.0).abs() < 1e-9));
        // A comparison without replays writes no `replays` key.
        let plain = CompareReport {
            comparisons: vec![Comparison::new(
                ("a.json", &ResultDocument::default()),
                ("b.json", &ResultDocument::default()),
                5.0,
            )],
            ..report.clone()
        };
        assert!(!serde_json::to_string(&typed_output(&plain))?.contains("replays"));
        let shown = render_text(&report);
        for want in [
            "Trace replays and sessions",
            "trace 1",
            "200.0 → 160.0",
            "60.0%/58.0% → 60.0%/58.0%",
            "Sessions: TTFT by turn",
            "base: sessions 1: prefix-cache hit rate 20.0 % achieved",
            "of 2 cells, prefill rows and replays",
        ] {
            assert!(shown.contains(want), "{want} missing:\n{shown}");
        }
        Ok(())
    }
}
