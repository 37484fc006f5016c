//! One server view from several replicas' `/metrics` (`--metrics-url`).
//!
//! Behind a router, the router's own `/metrics` (if it has one) says nothing
//! of the engines, and a router that forwards `/metrics` answers from one
//! replica at a time. So each replica is read and the snapshots are combined
//! as if they were one server (docs/methodology.md, "Replicas behind a
//! router"):
//!
//! - counters, token totals, request counts and rate gauges **sum**;
//! - the KV usage fraction is the **capacity-weighted** mean
//!   (Σ usageᵢ·capᵢ / Σ capᵢ: the share of the summed budget in use), the
//!   plain mean when a capacity is unknown;
//! - SGLang's acceptance gauges (ratios of the recent verify steps) are the
//!   plain mean: the steps behind each are not exported;
//! - the process start is the latest, so a restart of any replica shows.
//!
//! A value that one replica lacks is absent from the sum: a total over some
//! replicas would be read as the whole server's. A counter's growth over a
//! span is taken per replica ([`fleet_delta`]) and then summed, so a series
//! that one replica exports only later (SGLang's cached-token counter) is
//! read as that replica's 0 at the start, not as the fleet's.

use crate::engine::ServerSnapshot;

/// Sum of `f` over all parts, `None` unless every part has it.
fn sum_all(parts: &[ServerSnapshot], f: impl Fn(&ServerSnapshot) -> Option<f64>) -> Option<f64> {
    parts.iter().map(f).sum()
}

/// Plain mean of `f`, `None` unless every part has it.
fn mean_all(parts: &[ServerSnapshot], f: impl Fn(&ServerSnapshot) -> Option<f64>) -> Option<f64> {
    let n = parts.len() as f64;
    sum_all(parts, f).map(|s| s / n)
}

/// Capacity-weighted KV usage; the plain mean when any capacity is 0
/// (unknown) or the capacities do not match the parts.
fn kv_usage(parts: &[ServerSnapshot], kv_tokens: &[u64]) -> Option<f64> {
    let known = kv_tokens.len() == parts.len() && kv_tokens.iter().all(|&c| c > 0);
    if !known {
        return mean_all(parts, |p| p.kv_usage);
    }
    let total: f64 = kv_tokens.iter().map(|&c| c as f64).sum();
    let used: Option<f64> = parts
        .iter()
        .zip(kv_tokens)
        .map(|(p, &c)| p.kv_usage.map(|u| u * c as f64))
        .sum();
    used.map(|u| u / total)
}

/// Accepted tokens per draft position, summed position by position (a
/// replica with fewer positions adds nothing at the others).
fn per_position(parts: &[ServerSnapshot]) -> Vec<f64> {
    let len = parts
        .iter()
        .map(|p| p.spec_accepted_per_pos.len())
        .max()
        .unwrap_or(0);
    let mut out = vec![0.0; len];
    for p in parts {
        for (o, v) in out.iter_mut().zip(&p.spec_accepted_per_pos) {
            *o += v;
        }
    }
    out
}

/// The replicas' snapshots as one server's. `kv_tokens[i]` is replica i's KV
/// capacity in tokens (0 = unknown). One part is returned unchanged.
pub fn combine(parts: &[ServerSnapshot], kv_tokens: &[u64]) -> ServerSnapshot {
    match parts {
        [] => return ServerSnapshot::default(),
        [one] => return one.clone(),
        _ => {}
    }
    let sum = |f: fn(&ServerSnapshot) -> Option<f64>| sum_all(parts, f);
    let gen_tokens = sum(|p| p.gen_tokens);
    ServerSnapshot {
        running: sum(|p| p.running),
        waiting: sum(|p| p.waiting),
        kv_usage: kv_usage(parts, kv_tokens),
        gen_tokens,
        gen_tokens_source: gen_tokens.and(parts[0].gen_tokens_source),
        gen_throughput_gauge: sum(|p| p.gen_throughput_gauge),
        prompt_tokens: sum(|p| p.prompt_tokens),
        prompt_local_compute: sum(|p| p.prompt_local_compute),
        prompt_cached: sum(|p| p.prompt_cached),
        prefix_queries: sum(|p| p.prefix_queries),
        prefix_hits: sum(|p| p.prefix_hits),
        prefill_kv_computed: sum(|p| p.prefill_kv_computed),
        request_success: sum(|p| p.request_success),
        prefill_time_sum: sum(|p| p.prefill_time_sum),
        prefill_time_count: sum(|p| p.prefill_time_count),
        spec_drafts: sum(|p| p.spec_drafts),
        spec_draft_tokens: sum(|p| p.spec_draft_tokens),
        spec_accepted: sum(|p| p.spec_accepted),
        spec_accepted_per_pos: per_position(parts),
        spec_accept_length_gauge: mean_all(parts, |p| p.spec_accept_length_gauge),
        spec_accept_rate_gauge: mean_all(parts, |p| p.spec_accept_rate_gauge),
        process_start: parts
            .iter()
            .map(|p| p.process_start)
            .collect::<Option<Vec<f64>>>()
            .and_then(|v| v.into_iter().reduce(f64::max)),
        latency: crate::ttft_breakdown::LatencyHistograms::combine(
            &parts.iter().map(|p| p.latency.clone()).collect::<Vec<_>>(),
        ),
    }
}

/// A counter's growth over replicas: each replica's own delta, summed, and
/// which replicas the figure rests on in a special way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetDelta {
    /// Σ over replicas of (end − start).
    pub value: f64,
    /// Replicas (0-based, in `--metrics-url` order) whose series was absent
    /// at the start and present at the end: read as 0 at the start.
    pub late: Vec<usize>,
    /// Replicas whose series was absent at both ends: they add 0.
    pub never: Vec<usize>,
}

/// How a counter missing from a replica's page is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// Nothing is known: the fleet figure is unknown.
    Unknown,
    /// The engine exports the series only once it moved (a labelled
    /// counter, like SGLang's `sglang:cached_tokens_total` before its first
    /// cache hit): absent means 0.
    Zero,
}

/// The growth of `f` between two scrapes of the same replicas, taken per
/// replica and summed, so a series one replica exports late is not read as
/// the whole fleet's count appearing at once (a sum over replicas is `None`
/// while any replica lacks the series). `None` when the replicas differ in
/// number, a series went down or vanished (a restart), or a missing series
/// is [`Absent::Unknown`].
pub fn fleet_delta(
    start: &[ServerSnapshot],
    end: &[ServerSnapshot],
    f: impl Fn(&ServerSnapshot) -> Option<f64>,
    absent: Absent,
) -> Option<FleetDelta> {
    if start.len() != end.len() || start.is_empty() {
        return None;
    }
    let mut out = FleetDelta::default();
    for (i, (a, b)) in start.iter().zip(end).enumerate() {
        let d = match (f(a), f(b), absent) {
            (Some(a), Some(b), _) => b - a,
            (None, Some(b), Absent::Zero) => {
                out.late.push(i);
                b
            }
            (None, None, Absent::Zero) => {
                out.never.push(i);
                0.0
            }
            _ => return None,
        };
        if d < 0.0 {
            return None;
        }
        out.value += d;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(gen_tokens: f64, running: f64, kv: f64, start: f64) -> ServerSnapshot {
        ServerSnapshot {
            running: Some(running),
            waiting: Some(0.0),
            kv_usage: Some(kv),
            gen_tokens: Some(gen_tokens),
            gen_tokens_source: Some("vllm:generation_tokens_total"),
            gen_throughput_gauge: Some(gen_tokens / 10.0),
            request_success: Some(3.0),
            spec_accepted_per_pos: vec![5.0, 2.0],
            spec_accept_rate_gauge: Some(0.5),
            process_start: Some(start),
            ..ServerSnapshot::default()
        }
    }

    #[test]
    fn counters_sum_and_kv_usage_weighs_by_capacity() {
        let a = replica(1000.0, 8.0, 0.9, 100.0);
        let mut b = replica(500.0, 4.0, 0.3, 250.0);
        b.spec_accepted_per_pos = vec![1.0, 1.0, 1.0];
        b.spec_accept_rate_gauge = Some(0.7);
        // a holds 100k tokens, b 300k: 90k + 90k of 400k in use
        let s = combine(&[a.clone(), b.clone()], &[100_000, 300_000]);
        assert_eq!(s.gen_tokens, Some(1500.0));
        assert_eq!(s.gen_throughput_gauge, Some(150.0));
        assert_eq!((s.running, s.waiting), (Some(12.0), Some(0.0)));
        assert_eq!(s.request_success, Some(6.0));
        assert!((s.kv_usage.unwrap() - 0.45).abs() < 1e-12);
        assert_eq!(s.spec_accepted_per_pos, vec![6.0, 3.0, 1.0]);
        assert!((s.spec_accept_rate_gauge.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(s.process_start, Some(250.0));
        assert_eq!(s.gen_tokens_source, Some("vllm:generation_tokens_total"));
        // capacities unknown: the plain mean
        let s = combine(&[a.clone(), b.clone()], &[0, 300_000]);
        assert!((s.kv_usage.unwrap() - 0.6).abs() < 1e-12);
        let s = combine(&[a.clone(), b.clone()], &[]);
        assert!((s.kv_usage.unwrap() - 0.6).abs() < 1e-12);
    }

    #[test]
    fn a_value_one_replica_lacks_is_absent_and_one_replica_is_itself() {
        let a = replica(1000.0, 8.0, 0.9, 100.0);
        let mut b = replica(500.0, 4.0, 0.3, 250.0);
        b.gen_tokens = None;
        b.process_start = None;
        let s = combine(&[a.clone(), b], &[1, 1]);
        assert_eq!((s.gen_tokens, s.gen_tokens_source), (None, None));
        assert_eq!(s.process_start, None);
        assert_eq!(s.running, Some(12.0));
        assert_eq!(combine(std::slice::from_ref(&a), &[7]), a);
        assert_eq!(combine(&[], &[]), ServerSnapshot::default());
    }

    #[test]
    fn a_restart_of_either_replica_shows_in_the_combined_view() {
        let before = combine(
            &[
                replica(1000.0, 1.0, 0.1, 100.0),
                replica(500.0, 1.0, 0.1, 200.0),
            ],
            &[1, 1],
        );
        // replica a restarted at 300: its counter began again
        let after = combine(
            &[
                replica(20.0, 1.0, 0.1, 300.0),
                replica(600.0, 1.0, 0.1, 200.0),
            ],
            &[1, 1],
        );
        assert!(before.restart_evidence(&after).is_some());
    }

    #[test]
    fn fleet_deltas_are_per_replica_and_a_late_series_starts_at_zero() {
        let snap = |h: Option<f64>| ServerSnapshot {
            prefix_hits: h,
            ..ServerSnapshot::default()
        };
        let hits = |p: &ServerSnapshot| p.prefix_hits;
        // replica 0 had 5,000 hits before the run; replica 1 none yet (no
        // series), 300 during it; replica 2 none at all
        let start = [snap(Some(5000.0)), snap(None), snap(None)];
        let end = [snap(Some(5100.0)), snap(Some(300.0)), snap(None)];
        // the sum over replicas is unknown at the start: read as 0, the
        // delta would be 5,400
        assert_eq!(combine(&start, &[]).prefix_hits, None);
        let d = fleet_delta(&start, &end, hits, Absent::Zero).expect("delta");
        assert_eq!(d.value, 400.0);
        assert_eq!((d.late, d.never), (vec![1], vec![2]));
        assert_eq!(fleet_delta(&start, &end, hits, Absent::Unknown), None);
        // a replica that restarted (its counter went down or vanished)
        let restarted = [snap(Some(10.0)), snap(Some(300.0)), snap(None)];
        assert_eq!(fleet_delta(&start, &restarted, hits, Absent::Zero), None);
        let vanished = [snap(None), snap(Some(300.0)), snap(None)];
        assert_eq!(fleet_delta(&start, &vanished, hits, Absent::Zero), None);
        assert_eq!(fleet_delta(&start, &end[..2], hits, Absent::Zero), None);
    }
}
