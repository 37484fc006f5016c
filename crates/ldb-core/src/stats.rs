//! Descriptive statistics used by every latency and rate field.
//!
//! Percentiles use linear interpolation between closest ranks
//! (Hyndman & Fan type 7, numpy's default "linear", Excel PERCENTILE.INC):
//! with the values sorted ascending and `k = (n − 1) · p / 100`, the result is
//! `x[⌊k⌋] + (k − ⌊k⌋) · (x[⌊k⌋ + 1] − x[⌊k⌋])`. The reference tool uses the same
//! method, so percentiles compare across tools.

/// avg / min / max / p50 / p90 / p99 / population standard deviation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Number of values summarized.
    pub n: usize,
    /// Arithmetic mean.
    pub avg: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Population standard deviation.
    pub std: f64,
}

/// Percentile `p` (0–100) of values already sorted ascending; 0 when empty.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let k = (n - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
            let lo = k.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let frac = k - lo as f64;
            sorted[lo] + frac * (sorted[hi] - sorted[lo])
        }
    }
}

/// Summary of the strictly positive, finite values (zeros mean "not measured").
pub fn summarize(values: impl IntoIterator<Item = f64>) -> Summary {
    summarize_kept(
        values
            .into_iter()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect(),
    )
}

/// Like [`summarize`], but for values where 0 is a measurement (time to
/// second token: two chunks of one read): keeps finite values ≥ 0. The
/// caller leaves "not measured" out (`None`) rather than writing 0.
pub fn summarize_measured(values: impl IntoIterator<Item = f64>) -> Summary {
    summarize_kept(
        values
            .into_iter()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .collect(),
    )
}

/// The summary of values already filtered.
fn summarize_kept(mut v: Vec<f64>) -> Summary {
    if v.is_empty() {
        return Summary::default();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let avg = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n as f64;
    Summary {
        n,
        avg,
        min: v[0],
        max: v[n - 1],
        p50: percentile_sorted(&v, 50.0),
        p90: percentile_sorted(&v, 90.0),
        p99: percentile_sorted(&v, 99.0),
        std: var.sqrt(),
    }
}

/// Median of the finite values (all of them, zeros included); 0 when empty.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, 50.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 50.0), 2.5);
        assert!((percentile_sorted(&v, 90.0) - 3.7).abs() < 1e-12);
        assert!((percentile_sorted(&v, 99.0) - 3.97).abs() < 1e-12);
        assert_eq!(percentile_sorted(&[5.0], 99.0), 5.0);
        assert_eq!(percentile_sorted(&[], 50.0), 0.0);
    }

    #[test]
    fn summarize_drops_non_positive_values() {
        let s = summarize([0.0, -1.0, 2.0, 4.0, f64::NAN]);
        assert_eq!(s.n, 2);
        assert_eq!(s.avg, 3.0);
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 4.0);
        assert_eq!(s.std, 1.0);
        assert_eq!(summarize([0.0]), Summary::default());
    }

    #[test]
    fn summarize_measured_keeps_true_zeros() {
        let s = summarize_measured([0.0, 0.0, 0.3, -1.0, f64::NAN]);
        assert_eq!(s.n, 3);
        assert_eq!(s.min, 0.0);
        assert!((s.avg - 0.1).abs() < 1e-12, "{s:?}");
        assert_eq!(summarize_measured([]), Summary::default());
    }

    #[test]
    fn seed_two_sample_ttft_percentiles() {
        // The seed's C=1/ctx=0 cell: two TTFT samples; avg = p50, p90/p99 interpolate.
        let a = 0.12672009895322844;
        let b = 0.14115925044857752;
        let s = summarize([a, b]);
        assert!((s.p50 - (a + b) / 2.0).abs() < 1e-15);
        assert!((s.p90 - (a + 0.9 * (b - a))).abs() < 1e-15);
    }

    proptest::proptest! {
        #[test]
        fn percentiles_are_ordered_and_bounded(mut v in proptest::collection::vec(0.001f64..1e6, 1..200)) {
            let s = summarize(v.clone());
            v.sort_by(f64::total_cmp);
            proptest::prop_assert!(s.min <= s.p50 && s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.max);
            proptest::prop_assert!(s.min == v[0] && s.max == v[v.len() - 1]);
        }
    }
}
