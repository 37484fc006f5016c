//! Sessions through a router (`--session-header`, `--replica-header`,
//! `--metrics-url` per replica): which replica served each turn, how often a
//! session moved to another replica (an affinity failure), and the cache
//! hits each replica and each session achieved (docs/methodology.md,
//! "Session affinity through a router"). Arithmetic only: the runner hands
//! in each turn's span and the replicas' counter reads.

use serde::{Deserialize, Serialize};

/// One turn as sent: its span on the run clock and what its answer said
/// (serialized only between shards).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnSpan {
    /// 0-based session.
    pub session: u64,
    /// Run-clock time the request left.
    pub sent: f64,
    /// Run-clock time its answer ended (or it failed).
    pub end: f64,
    /// The replica (0-based, `--metrics-url` order) the router's response
    /// header named, when it named one we know.
    pub header: Option<usize>,
    /// Prompt tokens of the turn.
    pub prompt_tokens: u64,
    /// Cached prompt tokens the answer's usage reported, when it did.
    pub cached_tokens: Option<u64>,
}

/// One read of every replica's prefix-cache counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterRead {
    /// Run-clock time the reads were sent.
    pub sent: f64,
    /// Run-clock time the last answer arrived.
    pub t: f64,
    /// Per replica: (prompt tokens looked up, tokens served from the cache);
    /// `None` where the page lacked the series.
    pub replicas: Vec<(Option<f64>, Option<f64>)>,
}

/// How a turn's replica was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundBy {
    /// The router's response header.
    Header,
    /// It was the one request in flight between two consecutive reads and
    /// one replica's lookup counter moved.
    Counters,
    /// Neither: unattributed.
    Nothing,
}

/// A turn's replica and, where known, its cached and prompt tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnReplica {
    /// 0-based replica.
    pub replica: Option<usize>,
    /// How.
    pub by: FoundBy,
    /// (cached, prompt) tokens of the turn: from the usage, or from the
    /// replica's counter deltas when the counters attributed it.
    pub hits: Option<(f64, f64)>,
}

/// The replica a router's header value names: a `--metrics-url` base
/// (`bases`, `replica_base` form), its `host:port`, or a 1-based number.
pub fn replica_named(value: &str, bases: &[String]) -> Option<usize> {
    let v = value.trim().trim_end_matches('/');
    if let Ok(n) = v.parse::<usize>() {
        return (1..=bases.len()).contains(&n).then(|| n - 1);
    }
    bases.iter().position(|b| {
        let authority = b.split("://").nth(1).unwrap_or(b).split('/').next();
        b == v || authority == Some(v)
    })
}

/// Which replica served each turn (`turns` in any order; `reads` sorted by
/// `sent`). The header wins; else the counter rule: A is the last read
/// answered before the turn left, B the read after A, sent after the turn
/// ended; no other turn overlapped A's sending to B's answer; and exactly
/// one replica's lookup counter grew from A to B.
pub fn attribute(turns: &[TurnSpan], reads: &[CounterRead]) -> Vec<TurnReplica> {
    turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let usage = t.cached_tokens.map(|c| (c as f64, t.prompt_tokens as f64));
            if let Some(r) = t.header {
                return TurnReplica {
                    replica: Some(r),
                    by: FoundBy::Header,
                    hits: usage,
                };
            }
            match by_counters(i, turns, reads) {
                Some((r, hits)) => TurnReplica {
                    replica: Some(r),
                    by: FoundBy::Counters,
                    hits: usage.or(hits),
                },
                None => TurnReplica {
                    replica: None,
                    by: FoundBy::Nothing,
                    hits: None,
                },
            }
        })
        .collect()
}

/// The counter rule for turn `i`: its replica and (hits, lookups) delta.
fn by_counters(
    i: usize,
    turns: &[TurnSpan],
    reads: &[CounterRead],
) -> Option<(usize, Option<(f64, f64)>)> {
    let t = &turns[i];
    let a = reads.iter().rposition(|r| r.t <= t.sent)?;
    let (ra, rb) = (&reads[a], reads.get(a + 1)?);
    if rb.sent < t.end {
        return None;
    }
    let alone = turns
        .iter()
        .enumerate()
        .all(|(j, o)| j == i || o.end < ra.sent || o.sent > rb.t);
    if !alone || ra.replicas.len() != rb.replicas.len() {
        return None;
    }
    let grew: Vec<(usize, f64, f64)> = ra
        .replicas
        .iter()
        .zip(&rb.replicas)
        .enumerate()
        .filter_map(|(k, (x, y))| {
            let q = y.0? - x.0.unwrap_or(0.0);
            // A hits series appears only after the replica's first hit.
            let h = y.1.unwrap_or(0.0) - x.1.unwrap_or(0.0);
            (q > 0.0).then_some((k, h.max(0.0), q))
        })
        .collect();
    match grew.as_slice() {
        [(k, h, q)] => Some((*k, Some((*h, *q)))),
        _ => None,
    }
}

/// One session's path through the replicas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionAffinity {
    /// 0-based session.
    pub session: u64,
    /// Each turn's replica, 1-based (`--metrics-url` order); `null`:
    /// unattributed.
    pub replicas: Vec<Option<u32>>,
    /// Times the session changed replica between attributed turns.
    pub moves: u32,
    /// Cached ÷ prompt tokens over its attributed turns whose cached count
    /// is known.
    pub achieved_hit_rate: Option<f64>,
}

/// One replica's share of the sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplicaAffinity {
    /// 1-based, in `--metrics-url` order.
    pub replica: u32,
    /// Turns attributed to it.
    pub turns: u64,
    /// Sessions with a turn attributed to it.
    pub sessions: u64,
    /// Its own counters' hits ÷ lookups over the run.
    pub achieved_hit_rate: Option<f64>,
}

/// The sessions' affinity through the router.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterAffinity {
    /// `--session-header`'s name, when one was sent.
    pub session_header: Option<String>,
    /// `--replica-header`'s name, when one was read.
    pub replica_header: Option<String>,
    /// Turns sent.
    pub turns: u64,
    /// Turns the router's header attributed.
    pub attributed_by_header: u64,
    /// Turns the counter rule attributed.
    pub attributed_by_counters: u64,
    /// Turns neither attributed.
    pub unattributed: u64,
    /// `unattributed ÷ turns`.
    pub unattributed_share: Option<f64>,
    /// Sessions that changed replica at least once.
    pub sessions_moved: u64,
    /// `sessions_moved ÷` sessions with two or more attributed turns.
    pub affinity_failure_share: Option<f64>,
    /// Reads of the replicas' counters taken for the rule.
    pub counter_reads: u64,
    /// Per session.
    pub sessions: Vec<SessionAffinity>,
    /// Per replica.
    pub replicas: Vec<ReplicaAffinity>,
}

/// The result from the turns, their replicas ([`attribute`]) and the
/// replicas' (hits, lookups) over the whole run.
pub fn summarise(
    turns: &[TurnSpan],
    found: &[TurnReplica],
    per_replica: &[Option<(f64, f64)>],
) -> RouterAffinity {
    let mut ids: Vec<u64> = turns.iter().map(|t| t.session).collect();
    ids.sort_unstable();
    ids.dedup();
    let sessions: Vec<SessionAffinity> =
        ids.iter().map(|&id| session_of(id, turns, found)).collect();
    let count = |b: FoundBy| found.iter().filter(|f| f.by == b).count() as u64;
    let n = turns.len() as u64;
    let unattributed = count(FoundBy::Nothing);
    let judged = sessions
        .iter()
        .filter(|s| s.replicas.iter().flatten().count() >= 2)
        .count();
    let moved = sessions.iter().filter(|s| s.moves > 0).count() as u64;
    let replicas = (0..per_replica.len())
        .map(|k| {
            let mine: Vec<usize> = (0..turns.len())
                .filter(|&i| found[i].replica == Some(k))
                .collect();
            let mut of: Vec<u64> = mine.iter().map(|&i| turns[i].session).collect();
            of.sort_unstable();
            of.dedup();
            ReplicaAffinity {
                replica: k as u32 + 1,
                turns: mine.len() as u64,
                sessions: of.len() as u64,
                achieved_hit_rate: per_replica[k]
                    .filter(|(_, q)| *q > 0.0)
                    .map(|(h, q)| (h / q).clamp(0.0, 1.0)),
            }
        })
        .collect();
    RouterAffinity {
        turns: n,
        attributed_by_header: count(FoundBy::Header),
        attributed_by_counters: count(FoundBy::Counters),
        unattributed,
        unattributed_share: (n > 0).then(|| unattributed as f64 / n as f64),
        sessions_moved: moved,
        affinity_failure_share: (judged > 0).then(|| moved as f64 / judged as f64),
        sessions,
        replicas,
        ..RouterAffinity::default()
    }
}

/// Session `id`'s replicas (turns in the order sent), moves and hit rate.
fn session_of(id: u64, turns: &[TurnSpan], found: &[TurnReplica]) -> SessionAffinity {
    let mut mine: Vec<usize> = (0..turns.len())
        .filter(|&i| turns[i].session == id)
        .collect();
    mine.sort_by(|&a, &b| turns[a].sent.total_cmp(&turns[b].sent));
    let replicas: Vec<Option<u32>> = mine
        .iter()
        .map(|&i| found[i].replica.map(|r| r as u32 + 1))
        .collect();
    let seen: Vec<u32> = replicas.iter().flatten().copied().collect();
    let moves = seen.windows(2).filter(|w| w[0] != w[1]).count() as u32;
    let (h, q) = mine
        .iter()
        .filter(|&&i| found[i].replica.is_some())
        .filter_map(|&i| found[i].hits)
        .fold((0.0, 0.0), |(h, q), (a, b)| (h + a, q + b));
    SessionAffinity {
        session: id,
        replicas,
        moves,
        achieved_hit_rate: (q > 0.0).then(|| (h / q).clamp(0.0, 1.0)),
    }
}

#[cfg(test)]
#[path = "affinity_tests.rs"]
mod tests;
