//! Refused joins, counted by address and reason class. A stranger's bytes
//! never reach a log line, the dashboard or the result: only its IP
//! address, a class from this fixed list and a count. Each (address,
//! class) is printed once when first seen; the counts are summarised in
//! the run's event log at the next cell (`ShardLeader::take_notes`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Why a connection to the coordinator port did not become a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Refusal {
    /// Every handshake slot was taken: closed at once.
    Busy,
    /// The handshake did not finish within its deadline.
    Timeout,
    /// Closed, oversized, or not a frame of the protocol.
    BadFrame,
    /// The first message was not a well-formed join.
    NotAJoin,
    /// Closed after the leader's proof without its own (its secret differs).
    NoProof,
    /// The proof of the secret did not verify.
    WrongSecret,
    /// Another protocol or program version.
    Version,
    /// Another `--shards`, an index that is no follower's, or taken.
    Index,
    /// Other benchmark flags.
    Flags,
    /// The plan had started.
    Late,
}

impl Refusal {
    /// The class as logged (fixed words).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Busy => "busy (every handshake slot taken)",
            Refusal::Timeout => "handshake timed out",
            Refusal::BadFrame => "bad frame",
            Refusal::NotAJoin => "not a join",
            Refusal::NoProof => "left without proving the secret (another secret?)",
            Refusal::WrongSecret => "wrong shard secret",
            Refusal::Version => "version differs",
            Refusal::Index => "shard count or index",
            Refusal::Flags => "the benchmark flags differ",
            Refusal::Late => "too late",
        }
    }
}

/// The counts, since the run started and since the last summary.
#[derive(Default)]
pub(crate) struct Refusals {
    counts: Mutex<BTreeMap<(IpAddr, Refusal), (u64, u64)>>,
}

impl Refusals {
    /// Count one; true when this (address, class) is new (print it then).
    pub(crate) fn count(&self, ip: IpAddr, why: Refusal) -> bool {
        let Ok(mut c) = self.counts.lock() else {
            return false;
        };
        let e = c.entry((ip, why)).or_default();
        e.0 += 1;
        e.1 += 1;
        e.0 == 1
    }

    /// One line per address for the refusals since the last summary
    /// (empty when there were none).
    pub(crate) fn summary(&self) -> Vec<String> {
        let Ok(mut c) = self.counts.lock() else {
            return Vec::new();
        };
        let mut by_ip: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
        let mut totals: BTreeMap<IpAddr, (u64, u64)> = BTreeMap::new();
        for ((ip, why), (all, new)) in c.iter_mut() {
            if *new > 0 {
                by_ip.entry(*ip).or_default().push(format!(
                    "{} {}",
                    std::mem::take(new),
                    why.name()
                ));
            }
            totals.entry(*ip).or_default().0 += *all;
        }
        by_ip
            .into_iter()
            .map(|(ip, parts)| {
                let all = totals.get(&ip).map_or(0, |t| t.0);
                format!(
                    "shard joins refused from {ip}: {} ({all} since the start)",
                    parts.join(", ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_and_summarised_once() {
        let r = Refusals::default();
        let ip: IpAddr = "10.0.0.9".parse().expect("ip");
        assert!(r.count(ip, Refusal::WrongSecret));
        assert!(!r.count(ip, Refusal::WrongSecret));
        assert!(r.count(ip, Refusal::BadFrame));
        let s = r.summary();
        assert_eq!(
            s,
            [
                "shard joins refused from 10.0.0.9: 1 bad frame, 2 wrong shard secret (3 since the start)"
            ]
        );
        assert!(r.summary().is_empty(), "nothing new");
        r.count(ip, Refusal::Busy);
        assert_eq!(
            r.summary(),
            [
                "shard joins refused from 10.0.0.9: 1 busy (every handshake slot taken) (4 since the start)"
            ]
        );
    }
}
