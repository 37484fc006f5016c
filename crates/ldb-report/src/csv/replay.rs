//! The CSV rows of trace replays and sessions (`kind` `trace`, `sessions`,
//! `session_turn`, `replay_second`), after the cells. They fill the cell
//! columns whose meaning carries over (status, TTFT/TTFO percentiles,
//! completions, errors, the prefix-cache check) and the replay columns
//! appended after them ([`REPLAY_COLUMNS`]); docs/report.md lists which
//! kind fills which.

use ldb_core::document::ResultDocument;
use ldb_core::replay::session::{SessionResult, TurnStats};
use ldb_core::replay::{Bucket, Distribution, PrefixCacheCheck, ReplaySummary, TraceResult};

use super::of;

/// Columns only replay rows fill, appended after the cell columns in this
/// order.
pub(super) const REPLAY_COLUMNS: &[&str] = &[
    "replay_index",
    "turn",
    "bucket_start",
    "scheduled",
    "sent",
    "skipped_too_long",
    "not_sent",
    "output_tps",
    "achieved_rate",
    "goodput_rps",
    "e2e_p50",
    "e2e_p90",
    "e2e_p99",
    "dispatch_lag_p50",
    "dispatch_lag_p99",
    "max_in_flight",
    "prompt_tokens_mean",
    "sessions",
    "turns",
    "sessions_completed",
    "session_output_tps_p50",
    "session_goodput",
    "trace_sha256",
];

/// A row as (column, value) pairs; the writer puts each under its column.
pub(super) type Pairs = Vec<(&'static str, String)>;

fn n(v: u64) -> String {
    v.to_string()
}

fn dist(pairs: &mut Pairs, prefix: &'static [&'static str; 3], d: &Distribution) {
    pairs.push((prefix[0], of(d.p50)));
    if !prefix[1].is_empty() {
        pairs.push((prefix[1], of(d.p90)));
    }
    pairs.push((prefix[2], of(d.p99)));
}

fn summary(pairs: &mut Pairs, s: &ReplaySummary) {
    pairs.extend([
        ("scheduled", n(s.scheduled)),
        ("sent", n(s.sent)),
        ("num_completed", n(s.completed)),
        ("num_errors", n(s.errors)),
        ("skipped_too_long", n(s.skipped_too_long)),
        ("not_sent", n(s.not_sent)),
        ("measurement_seconds", of(Some(s.wall_time))),
        ("output_tps", of(Some(s.output_tps))),
        ("achieved_rate", of(s.achieved_rate)),
        ("goodput_rps", of(s.goodput)),
        ("token_gap_p99", of(s.token_gap_p99)),
        ("max_in_flight", n(s.max_in_flight)),
    ]);
    dist(pairs, &["ttft_p50", "ttft_p90", "ttft_p99"], &s.ttft);
    dist(pairs, &["ttfo_p50", "", "ttfo_p99"], &s.ttfo);
    dist(pairs, &["e2e_p50", "e2e_p90", "e2e_p99"], &s.e2e);
    dist(
        pairs,
        &["dispatch_lag_p50", "", "dispatch_lag_p99"],
        &s.dispatch_lag,
    );
}

fn cache(pairs: &mut Pairs, c: &PrefixCacheCheck) {
    pairs.extend([
        ("prefix_cache_intended", of(c.prefix_cache_intended)),
        (
            "server_prefix_cache_hit_rate",
            of(c.server_prefix_cache_hit_rate),
        ),
        (
            "server_prefix_cache_source",
            c.achieved_source.clone().unwrap_or_default(),
        ),
        ("prefix_cache_gap", c.differs.to_string()),
    ]);
}

fn second(index: usize, b: &Bucket) -> (&'static str, Pairs) {
    (
        "replay_second",
        vec![
            ("replay_index", index.to_string()),
            ("bucket_start", of(Some(b.t))),
            ("scheduled", n(b.scheduled)),
            ("num_completed", n(b.completed)),
            // One-second buckets: the bucket's output tokens are its tok/s.
            ("output_tps", n(b.output_tokens)),
        ],
    )
}

fn trace_rows(index: usize, t: &TraceResult) -> Vec<(&'static str, Pairs)> {
    let mut p: Pairs = vec![
        ("replay_index", index.to_string()),
        ("status", t.status.as_str().to_string()),
        ("status_reason", t.status_reason.clone()),
        ("trace_sha256", t.source.sha256.clone()),
    ];
    summary(&mut p, &t.summary);
    cache(&mut p, &t.prefix_cache);
    let mut rows = vec![("trace", p)];
    rows.extend(t.summary.buckets.iter().map(|b| second(index, b)));
    rows
}

fn turn_row(index: usize, t: &TurnStats) -> (&'static str, Pairs) {
    let mut p: Pairs = vec![
        ("replay_index", index.to_string()),
        ("turn", t.turn.to_string()),
        ("sent", n(t.requests)),
        ("prompt_tokens_mean", of(Some(t.prompt_tokens_mean))),
    ];
    dist(&mut p, &["ttft_p50", "ttft_p90", "ttft_p99"], &t.ttft);
    ("session_turn", p)
}

fn session_rows(index: usize, s: &SessionResult) -> Vec<(&'static str, Pairs)> {
    let mut p: Pairs = vec![
        ("replay_index", index.to_string()),
        ("status", s.status.as_str().to_string()),
        ("status_reason", s.status_reason.clone()),
        ("sessions", n(s.sessions)),
        ("turns", s.turns.to_string()),
        ("sessions_completed", n(s.sessions_completed)),
        ("session_output_tps_p50", of(s.session_output_tps.p50)),
        ("session_goodput", of(s.session_goodput)),
    ];
    summary(&mut p, &s.summary);
    cache(&mut p, &s.prefix_cache);
    let mut rows = vec![("sessions", p)];
    rows.extend(s.by_turn.iter().map(|t| turn_row(index, t)));
    rows.extend(s.summary.buckets.iter().map(|b| second(index, b)));
    rows
}

/// Every replay row of `doc` with its kind: each trace replay then its
/// seconds, then each session run, its turns and its seconds.
pub(super) fn rows(doc: &ResultDocument) -> Vec<(&'static str, Pairs)> {
    let traces = doc.trace_results.iter().enumerate();
    let sessions = doc.session_results.iter().enumerate();
    traces
        .flat_map(|(i, t)| trace_rows(i, t))
        .chain(sessions.flat_map(|(i, s)| session_rows(i, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{header, write};
    use super::*;
    use crate::replay_fixture;

    #[test]
    fn every_named_value_has_its_column() {
        let h = header();
        for (_, pairs) in rows(&replay_fixture::doc(1.0)) {
            for (name, _) in pairs {
                assert!(h.contains(&name), "{name} is not a column");
            }
        }
    }

    #[test]
    fn replays_follow_the_cells_with_their_turns_and_seconds() {
        let mut doc = replay_fixture::doc(1.0);
        doc.results.push(ldb_core::result::CellResult::default());
        let mut buf = Vec::new();
        write(&doc, &mut buf).expect("written");
        let mut r = ::csv::Reader::from_reader(buf.as_slice());
        let rows: Vec<_> = r.records().map(|x| x.expect("parses")).collect();
        let at = |n: &str| header().iter().position(|h| *h == n).expect("column");
        let kinds: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
        assert_eq!(
            kinds,
            [
                "decode",
                "trace",
                "replay_second",
                "replay_second",
                "replay_second",
                "sessions",
                "session_turn",
                "session_turn",
                "session_turn",
                "replay_second",
                "replay_second",
                "replay_second"
            ]
        );
        assert!(rows.iter().all(|r| r.len() == header().len()));
        let (trace, sessions) = (&rows[1], &rows[5]);
        assert_eq!(&trace[at("output_tps")], "200");
        assert_eq!(&trace[at("num_completed")], "9");
        assert_eq!(&trace[at("ttft_p50")], "0.1");
        assert!(!trace[at("e2e_p99")].is_empty());
        assert_eq!(&trace[at("trace_sha256")], "ab".repeat(32));
        assert_eq!(&trace[at("prefix_cache_gap")], "false");
        assert_eq!(&trace[at("concurrency")], "");
        assert_eq!(&rows[2][at("bucket_start")], "0");
        assert_eq!(&rows[2][at("output_tps")], "200");
        assert_eq!(&sessions[at("prefix_cache_gap")], "true");
        assert_eq!(&sessions[at("sessions_completed")], "2");
        assert_eq!(&rows[8][at("turn")], "3");
        assert_eq!(&rows[8][at("prompt_tokens_mean")], "900");
        assert_eq!(&rows[0][at("replay_index")], "");
    }
}
