//! The Wilson score interval for a proportion (95 %, z = 1.959964).
//!
//! Written here because the mode needs it for `accuracy`; the paired
//! comparison may bring its own copy, and the two must agree (same z).

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.959964;

/// The 95 % Wilson interval of `correct` successes in `n` trials, as
/// `(low, high)`; `(0, 0)` when `n` is 0.
pub fn wilson95(correct: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let (k, n) = (correct.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * ((p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // 8 of 10: the textbook interval 0.4902 .. 0.9433
        let (lo, hi) = wilson95(8, 10);
        assert!((lo - 0.4902).abs() < 1e-3, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-3, "{hi}");
        let (lo, hi) = wilson95(0, 10);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 1e-3, "{hi}");
        let (lo, hi) = wilson95(10, 10);
        assert!((lo - 0.7225).abs() < 1e-3 && (hi - 1.0).abs() < 1e-12);
        assert_eq!(wilson95(0, 0), (0.0, 0.0));
    }
}
