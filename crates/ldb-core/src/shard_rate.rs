//! An open-loop cell (`--request-rate`) over N shards: which shard sends
//! which request of the cell's one schedule, and the cell's most requests
//! in flight from the union of every shard's requests. Arithmetic only; the
//! rule is argued in `docs/shards.md` ("Open-loop cells").
//!
//! The leader draws the schedule exactly as one process would (same seed,
//! same due times) and deals it out by request index: request `i` goes to
//! shard `i mod n`. The union of the shards' due times is then the
//! single-process schedule itself, whatever the arrival process: for a
//! Poisson schedule a Poisson stream at λ, for constant spacing an evenly
//! spaced one (each shard every n/λ seconds, shard k offset by k/λ).
//!
//! A trace replay (`--trace`) is dealt by conversation instead
//! ([`deal_by_session`]): the rows that share a session id stay on one
//! shard, and a row without one is a conversation of its own, so a trace
//! without session ids is dealt by request index like a rate schedule.

/// Which shard of `shards` sends request `index` of a schedule.
pub fn owner(index: usize, shards: u32) -> u32 {
    if shards == 0 {
        return 0;
    }
    (index % shards as usize) as u32
}

/// The schedule `due` (seconds after the cell's start) dealt to `shards`
/// shards: per shard, its requests as (request index, due time), in due
/// order. Shard k gets `due.len() / n` requests, one more when k is below
/// the remainder, like a split of C (`crate::shard::share`).
pub fn deal(due: &[f64], shards: u32) -> Vec<Vec<(usize, f64)>> {
    let n = shards.max(1) as usize;
    let mut out = vec![Vec::with_capacity(due.len() / n + 1); n];
    for (i, &d) in due.iter().enumerate() {
        out[owner(i, shards) as usize].push((i, d));
    }
    out
}

/// A trace's requests (`due`, seconds after the replay's start; `session`,
/// each request's session id where it has one) dealt to `shards` by
/// conversation: conversations are numbered in the order of their first
/// request, a request without a session id is one of its own, and
/// conversation `k` goes to shard `k mod n`. Per shard, its requests as
/// (request index, due time) in trace order. Without session ids this is
/// [`deal`]; with them it balances conversations, not requests.
pub fn deal_by_session(
    due: &[f64],
    session: &[Option<&str>],
    shards: u32,
) -> Vec<Vec<(usize, f64)>> {
    let n = shards.max(1) as usize;
    let mut out = vec![Vec::with_capacity(due.len() / n + 1); n];
    let mut numbered: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut conversations = 0usize;
    for (i, &d) in due.iter().enumerate() {
        let k = match session.get(i).copied().flatten() {
            Some(id) => *numbered.entry(id).or_insert_with(|| {
                conversations += 1;
                conversations - 1
            }),
            None => {
                conversations += 1;
                conversations - 1
            }
        };
        out[owner(k, shards) as usize].push((i, d));
    }
    out
}

/// The most requests open at one instant, from each request's
/// `(sent, ended)` interval on one clock. A request counts from its send
/// up to (not including) its end, so one that ends as another starts does
/// not overlap it; intervals with an unknown or earlier end count at their
/// send instant only.
pub fn max_overlap(intervals: &[(f64, f64)]) -> u64 {
    // (instant, order, change): at one instant the ends of earlier
    // requests come first, then the sends, then the ends of requests that
    // lasted no time (so each of those counts once, at its instant).
    let mut edges: Vec<(f64, u8, i64)> = Vec::with_capacity(intervals.len() * 2);
    for &(s, e) in intervals {
        if !s.is_finite() {
            continue;
        }
        edges.push((s, 1, 1));
        if e.is_finite() && e > s {
            edges.push((e, 0, -1));
        } else {
            edges.push((s, 2, -1));
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut open, mut most) = (0i64, 0i64);
    for (_, _, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shards_deal_adds_up_to_the_one_schedule() {
        let due: Vec<f64> = (0..10).map(|i| f64::from(i) * 0.1).collect();
        let parts = deal(&due, 4);
        let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 3, 2, 2], "like C: 10 over 4");
        let mut union: Vec<(usize, f64)> = parts.concat();
        union.sort_by_key(|p| p.0);
        assert_eq!(union.iter().map(|p| p.1).collect::<Vec<_>>(), due);
        // Constant spacing: each shard every n/λ, shard k offset by k/λ.
        assert_eq!(parts[1].iter().map(|p| p.0).collect::<Vec<_>>(), [1, 5, 9]);
        assert_eq!(owner(7, 4), 3);
        assert_eq!(
            deal(&due, 1),
            vec![(0..10).zip(due.clone()).collect::<Vec<_>>()]
        );
    }

    #[test]
    fn a_trace_is_dealt_by_conversation_and_without_sessions_like_a_schedule() {
        let due: Vec<f64> = (0..7).map(|i| f64::from(i) * 0.5).collect();
        // No session ids: request index mod n, exactly the rate deal.
        assert_eq!(deal_by_session(&due, &[None; 7], 3), deal(&due, 3));
        // Sessions a, b, a, (none), b, c, a: conversations a=0, b=1, row 3=2, c=3.
        let ids = [
            Some("a"),
            Some("b"),
            Some("a"),
            None,
            Some("b"),
            Some("c"),
            Some("a"),
        ];
        let parts = deal_by_session(&due, &ids, 2);
        let idx = |p: &Vec<(usize, f64)>| p.iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(idx(&parts[0]), [0, 2, 3, 6], "a and the lone row 3");
        assert_eq!(idx(&parts[1]), [1, 4, 5], "b and c");
        // Every request once, with its due time.
        let mut union: Vec<(usize, f64)> = parts.concat();
        union.sort_by_key(|p| p.0);
        assert_eq!(union.iter().map(|p| p.1).collect::<Vec<_>>(), due);
        assert_eq!(deal_by_session(&due, &ids, 1)[0].len(), 7);
    }

    #[test]
    fn the_most_in_flight_counts_overlaps_on_one_clock() {
        assert_eq!(max_overlap(&[]), 0);
        assert_eq!(max_overlap(&[(0.0, 1.0)]), 1);
        // Back to back: never two at once.
        assert_eq!(max_overlap(&[(0.0, 1.0), (1.0, 2.0)]), 1);
        // Two shards' requests interleaved on the leader's clock.
        let both = [(0.0, 3.0), (0.5, 1.0), (0.8, 2.5), (2.6, 4.0)];
        assert_eq!(max_overlap(&both), 3);
        // An end never seen counts at the send instant.
        assert_eq!(max_overlap(&[(0.0, f64::NAN), (0.0, 2.0)]), 2);
    }
}
