//! A result with one trace replay and one session run, for the tests of
//! every output that shows replays (HTML, CSV, JSON lines, compare). The
//! numbers are fixed so each test can check what it reads back.

use ldb_core::document::ResultDocument;
use ldb_core::prefix_cache::CacheGranularity;
use ldb_core::replay::session::{SessionResult, TurnStats};
use ldb_core::replay::{
    Bucket, Distribution, PrefixCacheCheck, ReplaySummary, TraceResult, TraceSource,
};
use ldb_core::result::CellStatus;

/// A replay summary whose throughput and latencies scale with `speed`
/// (1 = the base figures: 200 tok/s, TTFT p50 100 ms).
pub(crate) fn summary(speed: f64) -> ReplaySummary {
    ReplaySummary {
        scheduled: 10,
        sent: 10,
        completed: 9,
        errors: 1,
        error_reasons: vec!["HTTP 500".into()],
        wall_time: 3.0,
        output_tps: 200.0 * speed,
        achieved_rate: Some(3.0 * speed),
        goodput: Some(2.0 * speed),
        ttft: Distribution::of(vec![0.1 / speed, 0.1 / speed, 0.3 / speed]),
        ttfo: Distribution::of(vec![0.12 / speed, 0.12 / speed, 0.32 / speed]),
        e2e: Distribution::of(vec![1.0 / speed, 1.0 / speed, 2.0 / speed]),
        token_gap_p99: Some(0.02),
        dispatch_lag: Distribution::of(vec![0.001, 0.002]),
        max_in_flight: 4,
        buckets: (0..3)
            .map(|t| Bucket {
                t: f64::from(t),
                scheduled: 4,
                completed: 3,
                output_tokens: 200,
            })
            .collect(),
        ..ReplaySummary::default()
    }
}

/// Intended 60 %, achieved `achieved`, judged.
pub(crate) fn cache(achieved: f64) -> PrefixCacheCheck {
    PrefixCacheCheck {
        prefix_cache_intended: Some(0.6),
        granularity: Some(CacheGranularity::Block(16)),
        server_prefix_cache_hit_rate: Some(achieved),
        achieved_source: Some("metrics".into()),
        ..PrefixCacheCheck::default()
    }
    .judge()
}

/// One trace replay and one run of 2 sessions × 3 turns; `speed` scales
/// throughput up and latencies down.
pub(crate) fn doc(speed: f64) -> ResultDocument {
    let mut doc = ResultDocument::default();
    doc.trace_results.push(TraceResult {
        source: TraceSource {
            path: "trace.jsonl".into(),
            sha256: "ab".repeat(32),
            format: "mooncake".into(),
            ..TraceSource::default()
        },
        status: CellStatus::Ok,
        summary: summary(speed),
        prefix_cache: cache(0.58),
        ..TraceResult::default()
    });
    doc.session_results.push(SessionResult {
        sessions: 2,
        turns: 3,
        user_tokens: 256,
        output_tokens: 64,
        status: CellStatus::Ok,
        summary: summary(speed),
        by_turn: (1..=3u32)
            .map(|t| TurnStats {
                turn: t,
                requests: 2,
                prompt_tokens_mean: 300.0 * f64::from(t),
                ttft: Distribution::of(vec![0.05 * f64::from(t) / speed; 2]),
                ..TurnStats::default()
            })
            .collect(),
        session_output_tps: Distribution::of(vec![40.0 * speed, 50.0 * speed]),
        session_goodput: Some(0.5),
        sessions_completed: 2,
        prefix_cache: cache(0.2),
        ..SessionResult::default()
    });
    doc
}
