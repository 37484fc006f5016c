//! Whether offline shards' hosts had synchronised clocks (`merge`).
//!
//! Offline shards (`--start-at`) each compute their windows from the same
//! grid on their own clock, so `merge` comparing the windows in the records
//! can never catch a host clock that is off: the windows agree by
//! construction. The only evidence is what each host's kernel said about
//! its clock while the shard ran (`adjtimex`, read through `ldb-sys`): a
//! shard records it, and the merge writes every host's state and flags a
//! merge whose hosts were not shown synchronised to within the windows'
//! tolerance (docs/shards.md, "Offline shards and `merge`").

use serde::{Deserialize, Serialize};

/// One host's clock as its kernel described it while the shard ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostClock {
    /// Where it came from: `adjtimex`, or empty when it could not be read.
    pub source: String,
    /// A synchronisation daemon kept the clock in sync at every reading.
    pub synchronised: bool,
    /// The largest estimated error reported, seconds.
    pub est_error_s: f64,
    /// The largest maximum error reported, seconds (a bound that the
    /// kernel grows at 500 ppm between daemon updates).
    pub max_error_s: f64,
    /// Why it could not be read (empty when it was).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub read_error: String,
}

impl HostClock {
    /// The worse of two readings of one host (a shard reads at each cell).
    pub fn worse(&self, other: &HostClock) -> HostClock {
        if !self.read_error.is_empty() {
            return self.clone();
        }
        if !other.read_error.is_empty() {
            return other.clone();
        }
        HostClock {
            source: self.source.clone(),
            synchronised: self.synchronised && other.synchronised,
            est_error_s: self.est_error_s.max(other.est_error_s),
            max_error_s: self.max_error_s.max(other.max_error_s),
            read_error: String::new(),
        }
    }
}

/// One shard's host in the merged file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardHostClock {
    /// The shard's index.
    pub shard_index: u32,
    /// Its host's clock; `None` when its record has none (written before
    /// records carried it).
    pub clock: Option<HostClock>,
}

/// `metadata.merge_clocks`: the hosts' clocks of a merged offline run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergeClocks {
    /// Every shard's host, by index.
    pub hosts: Vec<ShardHostClock>,
    /// The windows' tolerance the clocks must meet, seconds (0.05 % of the
    /// shortest window).
    pub tolerance_s: f64,
    /// Every host said it was synchronised, and the two largest estimated
    /// errors add up to no more than the tolerance.
    pub synchronised: bool,
    /// Why not (empty when synchronised).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub problem: String,
}

/// Judge the hosts of a merge against `tolerance_s`. Two hosts each within
/// e of true time are within e₁ + e₂ of each other, so the two largest
/// estimated errors must fit the tolerance together; an unknown or
/// unsynchronised clock fails.
pub fn judge(hosts: Vec<ShardHostClock>, tolerance_s: f64) -> MergeClocks {
    let mut problems = Vec::new();
    let mut errors = Vec::new();
    for h in &hosts {
        let i = h.shard_index;
        match &h.clock {
            None => problems.push(format!("shard {i}: its record has no clock state")),
            Some(c) if !c.read_error.is_empty() => {
                problems.push(format!(
                    "shard {i}: clock state unreadable ({})",
                    c.read_error
                ));
            }
            Some(c) if !c.synchronised => {
                problems.push(format!("shard {i}: host clock not synchronised"));
            }
            Some(c) => errors.push(c.est_error_s),
        }
    }
    errors.sort_by(|a, b| b.total_cmp(a));
    let pair: f64 = errors.iter().take(2).sum();
    if hosts.len() > 1 && pair > tolerance_s {
        problems.push(format!(
            "estimated clock errors add up to {:.3} ms, over the windows' tolerance {:.3} ms",
            pair * 1e3,
            tolerance_s * 1e3
        ));
    }
    MergeClocks {
        hosts,
        tolerance_s,
        synchronised: problems.is_empty(),
        problem: problems.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced(est_ms: f64) -> Option<HostClock> {
        Some(HostClock {
            source: "adjtimex".into(),
            synchronised: true,
            est_error_s: est_ms / 1e3,
            max_error_s: 0.05,
            read_error: String::new(),
        })
    }

    fn hosts(clocks: Vec<Option<HostClock>>) -> Vec<ShardHostClock> {
        clocks
            .into_iter()
            .enumerate()
            .map(|(i, clock)| ShardHostClock {
                shard_index: i as u32,
                clock,
            })
            .collect()
    }

    #[test]
    fn synchronised_hosts_within_the_tolerance_pass() {
        let m = judge(hosts(vec![synced(2.0), synced(3.0), synced(1.0)]), 0.015);
        assert!(m.synchronised, "{m:?}");
        assert!(m.problem.is_empty());
    }

    #[test]
    fn an_unsynchronised_unknown_or_unreadable_host_is_flagged() {
        let mut off = synced(1.0);
        if let Some(c) = off.as_mut() {
            c.synchronised = false;
        }
        let unreadable = Some(HostClock {
            read_error: "adjtimex is Linux only".into(),
            ..HostClock::default()
        });
        let m = judge(hosts(vec![synced(1.0), off, None, unreadable]), 0.015);
        assert!(!m.synchronised);
        assert!(
            m.problem.contains("shard 1: host clock not synchronised"),
            "{}",
            m.problem
        );
        assert!(m.problem.contains("shard 2: its record has no clock state"));
        assert!(m.problem.contains("shard 3: clock state unreadable"));
    }

    #[test]
    fn errors_that_add_up_past_the_tolerance_are_flagged() {
        // 8 + 9 ms apart at worst, against 15 ms (a 30 s window).
        let m = judge(hosts(vec![synced(8.0), synced(9.0), synced(1.0)]), 0.015);
        assert!(!m.synchronised);
        assert!(m.problem.contains("17.000 ms"), "{}", m.problem);
    }

    #[test]
    fn the_worse_reading_wins() {
        let a = synced(1.0).unwrap();
        let mut b = synced(4.0).unwrap();
        b.synchronised = false;
        let w = a.worse(&b);
        assert!(!w.synchronised);
        assert_eq!(w.est_error_s, 0.004);
    }
}
