//! Prometheus histograms: read from a scrape, taken apart over a window
//! (bucket-wise deltas), and summarised (count, exact mean, quantiles by
//! linear interpolation inside a bucket, each with its error bound).
//!
//! Definitions in docs/methodology.md §9.4. A histogram's buckets only say
//! how many observations fell between two edges, so a quantile is known to
//! lie inside one bucket; where inside is a guess. The guess here spreads
//! the bucket's observations evenly over it (as Prometheus'
//! `histogram_quantile` does), and the bucket's two edges are reported with
//! it: the true sample quantile lies between them, so the error of the value
//! is at most the bucket's width.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::prometheus::MetricSet;

/// One histogram series: finite upper bucket edges, cumulative counts per
/// edge and a last one for `+Inf` (the total), the sum of observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Finite upper edges (`le`), ascending.
    pub bounds: Vec<f64>,
    /// Cumulative counts: one per finite edge, then `+Inf`.
    pub cumulative: Vec<f64>,
    /// `_sum`: the sum of all observations.
    pub sum: f64,
}

/// A quantile read from buckets: the interpolated value and the edges of the
/// bucket it fell in (the true quantile lies between them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuantileEstimate {
    /// Linear interpolation inside the bucket, seconds.
    pub value: f64,
    /// The bucket's lower edge.
    pub low: f64,
    /// The bucket's upper edge; `None` for the `+Inf` bucket (then `value`
    /// is the last finite edge, a lower bound only).
    pub high: Option<f64>,
}

impl QuantileEstimate {
    /// The most the value can be off: the bucket's width (`None`: unbounded).
    pub fn error_bound(&self) -> Option<f64> {
        self.high.map(|h| h - self.low)
    }
}

impl Histogram {
    /// Observations counted (the `+Inf` bucket).
    pub fn count(&self) -> f64 {
        self.cumulative.last().copied().unwrap_or(0.0)
    }

    /// The exact mean, `_sum / _count` (`None` without observations).
    pub fn mean(&self) -> Option<f64> {
        let n = self.count();
        (n > 0.0).then(|| self.sum / n)
    }

    /// What was observed between `start` and `self` (two reads of one
    /// series): bucket by bucket, end − start. An error when the edges differ
    /// or a bucket went down (the server restarted in between).
    pub fn since(&self, start: &Histogram) -> Result<Histogram, String> {
        if self.bounds != start.bounds {
            return Err("the bucket edges changed between the two scrapes".into());
        }
        let cumulative: Vec<f64> = self
            .cumulative
            .iter()
            .zip(&start.cumulative)
            .map(|(b, a)| b - a)
            .collect();
        if cumulative.iter().any(|d| *d < 0.0) {
            return Err("a bucket went down (the server restarted?)".into());
        }
        Ok(Histogram {
            bounds: self.bounds.clone(),
            cumulative,
            sum: self.sum - start.sum,
        })
    }

    /// Add another series with the same edges (series of one metric from
    /// several engines or label values). An error when the edges differ.
    pub fn add(&mut self, other: &Histogram) -> Result<(), String> {
        if self.bounds.is_empty() && self.cumulative.is_empty() {
            *self = other.clone();
            return Ok(());
        }
        if self.bounds != other.bounds {
            return Err("its series have different bucket edges".into());
        }
        for (a, b) in self.cumulative.iter_mut().zip(&other.cumulative) {
            *a += b;
        }
        self.sum += other.sum;
        Ok(())
    }

    /// The `q` quantile (0 < q ≤ 1) by linear interpolation inside the
    /// bucket that holds rank q·n. The first bucket starts at 0 (durations
    /// are not negative) unless its edge is ≤ 0, when the value is its edge.
    pub fn quantile(&self, q: f64) -> Option<QuantileEstimate> {
        let n = self.count();
        if n <= 0.0 || !(q > 0.0 && q <= 1.0) {
            return None;
        }
        let rank = q * n;
        let i = self.cumulative.iter().position(|&c| c >= rank)?;
        let Some(&high) = self.bounds.get(i) else {
            let last = self.bounds.last().copied().unwrap_or(0.0);
            return Some(QuantileEstimate {
                value: last,
                low: last,
                high: None,
            });
        };
        let low = if i == 0 {
            0.0f64.min(high)
        } else {
            self.bounds[i - 1]
        };
        let below = if i == 0 { 0.0 } else { self.cumulative[i - 1] };
        let inside = self.cumulative[i] - below;
        let share = if inside > 0.0 {
            (rank - below) / inside
        } else {
            1.0
        };
        Some(QuantileEstimate {
            value: low + (high - low) * share,
            low,
            high: Some(high),
        })
    }
}

/// The series of histogram `name` in one scrape, keyed by their labels
/// (all but `le`, sorted, written `k=v,…`) and restricted to `filter`.
/// A series without its `+Inf` bucket, `_sum` or `_count` is left out.
pub fn read_series(
    m: &MetricSet,
    name: &str,
    filter: &[(&str, &str)],
) -> BTreeMap<String, Histogram> {
    let bucket = format!("{name}_bucket");
    let sum = format!("{name}_sum");
    let mut edges: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for s in &m.samples {
        if !filter.iter().all(|(k, v)| s.label(k) == Some(*v)) {
            continue;
        }
        if s.name == bucket {
            let Some(le) = s.label("le").and_then(parse_le) else {
                continue;
            };
            edges.entry(series_key(s)).or_default().push((le, s.value));
        } else if s.name == sum {
            sums.insert(series_key(s), s.value);
        }
    }
    let mut out = BTreeMap::new();
    for (key, mut pairs) in edges {
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let has_inf = pairs.last().is_some_and(|(le, _)| le.is_infinite());
        let Some(&sum) = sums.get(&key) else { continue };
        if !has_inf {
            continue;
        }
        let bounds = pairs[..pairs.len() - 1].iter().map(|p| p.0).collect();
        let cumulative = pairs.iter().map(|p| p.1).collect();
        out.insert(
            key,
            Histogram {
                bounds,
                cumulative,
                sum,
            },
        );
    }
    out
}

/// `le` as a number (`+Inf` included).
fn parse_le(le: &str) -> Option<f64> {
    match le {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        other => other.parse().ok(),
    }
}

/// A series' labels other than `le`, sorted, as `k=v,…`.
fn series_key(s: &crate::prometheus::Sample) -> String {
    let mut labels: Vec<String> = s
        .labels
        .iter()
        .filter(|(k, _)| k != "le")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    labels.sort();
    labels.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(bounds: &[f64], cumulative: &[f64], sum: f64) -> Histogram {
        Histogram {
            bounds: bounds.to_vec(),
            cumulative: cumulative.to_vec(),
            sum,
        }
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket_and_carry_its_edges() {
        // 10 observations: 2 in (0, 1], 6 in (1, 2], 2 in (2, 4]
        let x = h(&[1.0, 2.0, 4.0], &[2.0, 8.0, 10.0, 10.0], 17.0);
        assert_eq!(x.count(), 10.0);
        assert_eq!(x.mean(), Some(1.7));
        // p50: rank 5, bucket (1, 2] holds ranks 3..8: 1 + (5 − 2)/6 = 1.5
        let p50 = x.quantile(0.5).unwrap();
        assert_eq!((p50.value, p50.low, p50.high), (1.5, 1.0, Some(2.0)));
        assert_eq!(p50.error_bound(), Some(1.0));
        // p90: rank 9, bucket (2, 4]: 2 + 2 × (9 − 8)/2 = 3
        assert_eq!(x.quantile(0.9).unwrap().value, 3.0);
        // p10: rank 1 in the first bucket, which starts at 0: 0.5
        let p10 = x.quantile(0.1).unwrap();
        assert_eq!((p10.value, p10.low), (0.5, 0.0));
        assert_eq!(x.quantile(0.0), None);
    }

    #[test]
    fn the_inf_bucket_gives_a_lower_bound_and_an_empty_histogram_nothing() {
        let x = h(&[1.0, 2.0], &[0.0, 1.0, 4.0], 30.0);
        let p99 = x.quantile(0.99).unwrap();
        assert_eq!((p99.value, p99.low, p99.high), (2.0, 2.0, None));
        assert_eq!(p99.error_bound(), None);
        let empty = h(&[1.0], &[0.0, 0.0], 0.0);
        assert_eq!((empty.mean(), empty.quantile(0.5)), (None, None));
        // SGLang's queue histogram starts with an edge at 0: the value is 0
        let zero = h(&[0.0, 0.001], &[3.0, 4.0, 4.0], 0.0005);
        assert_eq!(zero.quantile(0.5).unwrap().value, 0.0);
        assert_eq!(zero.quantile(0.5).unwrap().error_bound(), Some(0.0));
    }

    #[test]
    fn deltas_are_bucket_wise_and_a_restart_or_new_edges_is_an_error() {
        let start = h(&[1.0, 2.0], &[5.0, 7.0, 7.0], 8.0);
        let end = h(&[1.0, 2.0], &[6.0, 10.0, 11.0], 20.0);
        let d = end.since(&start).unwrap();
        assert_eq!(d.cumulative, vec![1.0, 3.0, 4.0]);
        assert_eq!(d.sum, 12.0);
        assert_eq!(d.mean(), Some(3.0));
        assert!(start.since(&end).unwrap_err().contains("went down"));
        let other = h(&[1.0, 3.0], &[6.0, 10.0, 11.0], 20.0);
        assert!(other.since(&start).unwrap_err().contains("edges"));
        let mut sum = Histogram::default();
        sum.add(&d).unwrap();
        sum.add(&d).unwrap();
        assert_eq!((sum.count(), sum.sum), (8.0, 24.0));
        assert!(sum.add(&other).is_err());
    }

    #[test]
    fn series_are_read_by_their_labels_without_le() {
        let text = "x_bucket{engine=\"0\",le=\"1.0\"} 1\nx_bucket{engine=\"0\",le=\"+Inf\"} 3\n\
x_sum{engine=\"0\"} 4.5\nx_count{engine=\"0\"} 3\n\
x_bucket{le=\"0.5\",engine=\"1\"} 2\nx_bucket{engine=\"1\",le=\"+Inf\"} 2\nx_sum{engine=\"1\"} 0.4\n\
x_bucket{engine=\"2\",le=\"1.0\"} 1\nx_sum{engine=\"2\"} 1\n";
        let m = MetricSet::parse(text);
        let s = read_series(&m, "x", &[]);
        // engine 2 has no +Inf bucket: left out
        assert_eq!(s.len(), 2);
        let e0 = &s["engine=0"];
        assert_eq!(
            (e0.bounds.clone(), e0.count(), e0.sum),
            (vec![1.0], 3.0, 4.5)
        );
        assert_eq!(s["engine=1"].bounds, vec![0.5]);
        assert_eq!(read_series(&m, "x", &[("engine", "1")]).len(), 1);
    }
}
