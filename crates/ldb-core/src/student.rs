//! Student's t distribution, the 95 % confidence interval of a mean and
//! Welch's two-sample t-test: what repeated measurements (`--repeat N`) and
//! `compare` need to say how sure a number is.
//!
//! Definitions: `docs/methodology.md`, section "Repeats and confidence
//! intervals". No table is used: the t distribution function is computed
//! from the regularized incomplete beta function (continued fraction), and
//! quantiles by bisection on it, so every degree of freedom — Welch's are
//! fractional — gets the same accuracy (about 1e-10).

use serde::{Deserialize, Serialize};

/// Mean, spread and 95 % confidence interval of a handful of measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    /// Number of measurements.
    pub n: u32,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); `null` for n < 2.
    pub std_dev: Option<f64>,
    /// Half width of the 95 % interval, t(0.975, n − 1) · s / √n; `null` for n < 2.
    pub ci95: Option<f64>,
}

impl MeanCi {
    /// Summary of `xs` (non-finite values are left out); `None` when empty.
    pub fn of(xs: &[f64]) -> Option<MeanCi> {
        let xs: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        if xs.is_empty() {
            return None;
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let (std_dev, ci95) = if xs.len() < 2 {
            (None, None)
        } else {
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let s = var.sqrt();
            (Some(s), Some(t_quantile(0.975, n - 1.0) * s / n.sqrt()))
        };
        Some(MeanCi {
            n: xs.len() as u32,
            mean,
            std_dev,
            ci95,
        })
    }

    /// Lower end of the 95 % interval.
    pub fn low(&self) -> Option<f64> {
        self.ci95.map(|h| self.mean - h)
    }

    /// Upper end of the 95 % interval.
    pub fn high(&self) -> Option<f64> {
        self.ci95.map(|h| self.mean + h)
    }
}

/// Natural log of the gamma function (Lanczos, g = 7, n = 9; relative error
/// below 1e-13 for positive arguments, which is all this module needs).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        // Even step, then odd step of the fraction.
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        for num in [
            even,
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// Regularized incomplete beta function I_x(a, b), 0 ≤ x ≤ 1.
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    // The fraction converges fast only on one side of the mean; use the
    // symmetry I_x(a, b) = 1 − I_{1−x}(b, a) on the other.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom (df > 0, may be fractional).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 1.0 } else { 0.0 };
    }
    // P(|T| > |t|) = I_{df/(df+t²)}(df/2, 1/2).
    let tail = inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail / 2.0
    } else {
        tail / 2.0
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom (0 < p < 1),
/// by bisection on [`t_cdf`].
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if p.is_nan() || p <= 0.0 || p >= 1.0 || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    let (mut lo, mut hi) = (-1.0, 1.0);
    while t_cdf(lo, df) > p {
        lo *= 2.0;
    }
    while t_cdf(hi, df) < p {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Welch's unequal-variance t-test of two samples given by their summaries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// t = (mean_b − mean_a) / √(s_a²/n_a + s_b²/n_b).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value, 2 · P(T > |t|).
    pub p_value: f64,
}

/// Welch's test of `b` against `a`; `None` when a side has fewer than two
/// measurements or both spreads are 0 (no test is possible: equal means are
/// not a difference, unequal ones are one without any doubt, and neither is
/// what a p-value describes).
pub fn welch(a: &MeanCi, b: &MeanCi) -> Option<Welch> {
    let (sa, sb) = (a.std_dev?, b.std_dev?);
    let (na, nb) = (f64::from(a.n), f64::from(b.n));
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    let se2 = va + vb;
    if !se2.is_finite() || se2 <= 0.0 {
        return None;
    }
    let t = (b.mean - a.mean) / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let p_value = 2.0 * (1.0 - t_cdf(t.abs(), df));
    Some(Welch {
        t,
        df,
        p_value: p_value.clamp(0.0, 1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    // Reference values were computed once, independently of this code, with
    // python3 (no scipy): the t density integrated by Simpson's rule on
    // 200 000 panels, and quantiles by bisection on that integral. The
    // script is in docs/methodology.md, "Repeats and confidence intervals".

    #[test]
    fn quantiles_match_an_independent_computation() {
        // (df, t(0.975, df))
        for (df, q) in [
            (1.0, 12.706_204_736),
            (2.0, 4.302_652_730),
            (4.0, 2.776_445_105),
            (9.0, 2.262_157_163),
            (29.0, 2.045_229_642),
            (3.5, 2.940_088_638),
        ] {
            let got = t_quantile(0.975, df);
            assert!(close(got, q, 1e-6), "df {df}: {got} vs {q}");
        }
    }

    #[test]
    fn the_cdf_matches_an_independent_computation() {
        // (t, df, P(T ≤ t))
        for (t, df, p) in [
            (0.0, 3.0, 0.5),
            (1.0, 1.0, 0.75),
            (2.0, 5.0, 0.949_030_261),
            (-1.5, 7.3, 0.087_781_546),
        ] {
            let got = t_cdf(t, df);
            assert!(close(got, p, 1e-7), "t {t} df {df}: {got} vs {p}");
        }
    }

    #[test]
    fn mean_and_interval_of_three_repeats() {
        let m = MeanCi::of(&[100.0, 104.0, 96.0]).unwrap();
        assert_eq!(m.n, 3);
        assert!(close(m.mean, 100.0, 1e-12));
        assert!(close(m.std_dev.unwrap(), 4.0, 1e-12));
        // t(0.975, 2) · 4 / √3
        assert!(close(
            m.ci95.unwrap(),
            4.302_652_730 * 4.0 / 3f64.sqrt(),
            1e-6
        ));
        let one = MeanCi::of(&[5.0]).unwrap();
        assert_eq!((one.std_dev, one.ci95), (None, None));
        assert_eq!(MeanCi::of(&[]), None);
    }

    #[test]
    fn welch_matches_an_independent_computation() {
        let a = MeanCi::of(&[100.0, 102.0, 98.0, 101.0]).unwrap();
        let b = MeanCi::of(&[90.0, 95.0, 93.0]).unwrap();
        let w = welch(&a, &b).unwrap();
        // t = −4.499 660 4, df = 3.353 467 1, p = 0.016 100 5 (python3).
        assert!(close(w.t, -4.499_660_4, 1e-6), "{w:?}");
        assert!(close(w.df, 3.353_467_1, 1e-6), "{w:?}");
        assert!(close(w.p_value, 0.016_100_5, 1e-6), "{w:?}");
        // Overlapping samples: not significant.
        let c = MeanCi::of(&[99.0, 103.0, 97.0]).unwrap();
        let w = welch(&a, &c).unwrap();
        assert!(w.p_value > 0.5, "{w:?}");
        // A single measurement or no spread: no test.
        assert!(welch(&a, &MeanCi::of(&[1.0]).unwrap()).is_none());
        let flat = MeanCi::of(&[1.0, 1.0]).unwrap();
        assert!(welch(&flat, &flat).is_none());
    }
}
