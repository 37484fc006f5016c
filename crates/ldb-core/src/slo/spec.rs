//! The targets of an SLO and their command-line form:
//! `ttft_p99=2,token_gap_p99=0.05` (seconds).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// A latency the SLO can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Time to first token (`ttft`).
    Ttft,
    /// Time to first output (answer) token (`ttfo`).
    Ttfo,
    /// Gap between consecutive tokens (`token_gap`), judged per cell only.
    TokenGap,
    /// Request latency of completed requests (`e2e`).
    E2e,
    /// Time per output token of a request after its first, (last token −
    /// first token) / (tokens − 1) (`tpot`; MLPerf's TPOT), over requests:
    /// the cell's `inter_token_latency` distribution.
    Tpot,
}

impl Metric {
    const ALL: [Metric; 5] = [
        Metric::Ttft,
        Metric::Ttfo,
        Metric::TokenGap,
        Metric::E2e,
        Metric::Tpot,
    ];

    /// The key prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Ttfo => "ttfo",
            Metric::TokenGap => "token_gap",
            Metric::E2e => "e2e",
            Metric::Tpot => "tpot",
        }
    }
}

/// Which percentile of a cell's distribution a target bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Percentile {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
}

impl Percentile {
    const ALL: [Percentile; 3] = [Percentile::P50, Percentile::P90, Percentile::P99];

    /// The key suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            Percentile::P50 => "p50",
            Percentile::P90 => "p90",
            Percentile::P99 => "p99",
        }
    }
}

/// One target: `<metric>_<percentile> ≤ seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// What is bounded.
    pub metric: Metric,
    /// Which percentile of the cell.
    pub percentile: Percentile,
    /// The bound, seconds (a value equal to it meets it).
    pub seconds: f64,
}

impl Target {
    /// The key, e.g. `ttft_p99`.
    pub fn key(&self) -> String {
        format!("{}_{}", self.metric.as_str(), self.percentile.as_str())
    }
}

/// A set of targets, one per key at most, in a fixed order (metric, then
/// percentile) whatever the order they were given in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SloSpec {
    targets: Vec<Target>,
}

/// A spec that cannot be used; the message is one line naming the culprit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SloError(pub String);

impl fmt::Display for SloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SloError {}

fn known_keys() -> String {
    "ttft|ttfo|token_gap|e2e|tpot followed by _p50|_p90|_p99".into()
}

fn parse_key(key: &str) -> Option<(Metric, Percentile)> {
    Metric::ALL.iter().find_map(|&m| {
        let rest = key.strip_prefix(m.as_str())?.strip_prefix('_')?;
        let p = Percentile::ALL.into_iter().find(|p| p.as_str() == rest)?;
        Some((m, p))
    })
}

impl SloSpec {
    /// Parses `key=seconds,key=seconds`. Keys: `ttft`, `ttfo`, `token_gap`
    /// or `e2e`, then `_p50`, `_p90` or `_p99`. Seconds: a finite number > 0.
    pub fn parse(text: &str) -> Result<SloSpec, SloError> {
        let err = |m: String| Err(SloError(format!("invalid --slo {text:?}: {m}")));
        if text.trim().is_empty() {
            return err("empty; give key=seconds pairs, e.g. ttft_p99=2,e2e_p99=30".into());
        }
        let mut pairs = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let Some((key, value)) = part.split_once('=') else {
                return err(format!("{part:?} is not key=seconds"));
            };
            let seconds: f64 = match value.trim().parse() {
                Ok(v) => v,
                Err(_) => return err(format!("{value:?} is not a number of seconds")),
            };
            pairs.push((key.trim().to_string(), seconds));
        }
        Self::from_pairs(pairs).or_else(|SloError(m)| err(m))
    }

    /// Builds a spec from `(key, seconds)` pairs (the JSON form).
    fn from_pairs(pairs: Vec<(String, f64)>) -> Result<SloSpec, SloError> {
        let mut targets: Vec<Target> = Vec::new();
        for (key, seconds) in pairs {
            let Some((metric, percentile)) = parse_key(&key) else {
                return Err(SloError(format!(
                    "unknown key {key:?} (use {})",
                    known_keys()
                )));
            };
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(SloError(format!(
                    "{key} must be a number of seconds above 0, got {seconds}"
                )));
            }
            if targets
                .iter()
                .any(|t| t.metric == metric && t.percentile == percentile)
            {
                return Err(SloError(format!("{key} is given twice")));
            }
            targets.push(Target {
                metric,
                percentile,
                seconds,
            });
        }
        if targets.is_empty() {
            return Err(SloError("no target given".into()));
        }
        targets.sort_by_key(|t| (t.metric, t.percentile));
        Ok(SloSpec { targets })
    }

    /// A spec of the given targets (one per key), put in the fixed order.
    pub(crate) fn from_targets(mut targets: Vec<Target>) -> SloSpec {
        targets.sort_by_key(|t| (t.metric, t.percentile));
        SloSpec { targets }
    }

    /// This spec with every target of `explicit` added, replacing a target
    /// of the same key (`--slo` over `--slo-preset`).
    pub fn overridden_by(&self, explicit: &SloSpec) -> SloSpec {
        let mut targets: Vec<Target> = self
            .targets
            .iter()
            .filter(|t| {
                !explicit
                    .targets
                    .iter()
                    .any(|e| e.metric == t.metric && e.percentile == t.percentile)
            })
            .copied()
            .collect();
        targets.extend(explicit.targets.iter().copied());
        SloSpec::from_targets(targets)
    }

    /// The targets, ordered by metric then percentile.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The per-request bound of a metric: the largest of its targets'
    /// seconds (every request of a passing cell may be as slow as the
    /// loosest percentile allows), `None` when the metric has no target.
    pub fn request_bound(&self, metric: Metric) -> Option<f64> {
        self.targets
            .iter()
            .filter(|t| t.metric == metric)
            .map(|t| t.seconds)
            .reduce(f64::max)
    }
}

impl fmt::Display for SloSpec {
    /// The command-line form, keys in the spec's order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.targets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}={}", t.key(), t.seconds)?;
        }
        Ok(())
    }
}

impl Serialize for SloSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.targets.iter().map(|t| (t.key(), t.seconds)))
    }
}

impl<'de> Deserialize<'de> for SloSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, f64>::deserialize(d)?;
        if map.is_empty() {
            return Ok(SloSpec::default());
        }
        SloSpec::from_pairs(map.into_iter().collect()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_in_any_order_into_a_fixed_order() {
        let s = SloSpec::parse(" e2e_p99=30, ttft_p99=2,token_gap_p90=0.05,ttfo_p50=1.5").unwrap();
        assert_eq!(
            s.to_string(),
            "ttft_p99=2,ttfo_p50=1.5,token_gap_p90=0.05,e2e_p99=30"
        );
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"ttft_p99":2.0,"ttfo_p50":1.5,"token_gap_p90":0.05,"e2e_p99":30.0}"#
        );
        assert_eq!(serde_json::from_str::<SloSpec>(&json).unwrap(), s);
    }

    #[test]
    fn bad_specs_are_one_line_errors() {
        for (text, needle) in [
            ("", "empty"),
            ("ttft_p99", "not key=seconds"),
            ("ttft_p95=2", "unknown key \"ttft_p95\""),
            ("itl_p99=2", "unknown key"),
            ("ttft=2", "unknown key"),
            ("ttft_p99=fast", "not a number"),
            ("ttft_p99=0", "above 0"),
            ("ttft_p99=-1", "above 0"),
            ("ttft_p99=inf", "above 0"),
            ("ttft_p99=NaN", "above 0"),
            ("ttft_p99=1,ttft_p99=2", "given twice"),
            ("ttft_p99=1,", "not key=seconds"),
        ] {
            let e = SloSpec::parse(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.starts_with("invalid --slo"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn the_request_bound_is_the_loosest_target_of_the_metric() {
        let s = SloSpec::parse("ttft_p50=0.5,ttft_p99=2,e2e_p90=10").unwrap();
        assert_eq!(s.request_bound(Metric::Ttft), Some(2.0));
        assert_eq!(s.request_bound(Metric::E2e), Some(10.0));
        assert_eq!(s.request_bound(Metric::Ttfo), None);
    }
}
