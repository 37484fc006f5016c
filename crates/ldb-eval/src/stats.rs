//! Accuracy statistics: the Wilson score interval of a proportion, the exact
//! McNemar test of a paired comparison, and the two compact renderings of a
//! score distribution (the glyph bar and the summary string).

/// z for a two-sided 95% interval (the normal 0.975 quantile).
pub const Z95: f64 = 1.959964;

/// Wilson score interval of `correct` out of `n` at the given `z`:
/// `(p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)`. Unlike the normal
/// approximation it stays inside [0, 1] and is sensible at 0/n and n/n.
/// `n == 0` gives `(0, 0)`.
pub fn wilson_interval(correct: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let n_f = n as f64;
    let p = correct.min(n) as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = p + z2 / (2.0 * n_f);
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    (
        ((centre - half) / denom).clamp(0.0, 1.0),
        ((centre + half) / denom).clamp(0.0, 1.0),
    )
}

/// Exact two-sided McNemar p-value from the discordant counts: `b` items only
/// the baseline got right, `c` only the candidate. Under the null each
/// discordant item is a fair coin, so p = 2·P(X ≤ min(b, c)) for
/// X ~ Binomial(b + c, ½), capped at 1; no discordant items gives 1.
///
/// The binomial terms are summed in log space (each term from the previous
/// one by the ratio (n−i)/(i+1)), so counts in the millions neither overflow
/// nor underflow to a meaningless 0/0.
pub fn mcnemar_exact_p(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // ln of C(n, i) / 2^n for i = 0..=k; the terms rise with i up to n/2,
    // so the last one is the largest and anchors the sum.
    let mut logs = Vec::with_capacity(k as usize + 1);
    let mut l = -(n as f64) * std::f64::consts::LN_2;
    logs.push(l);
    for i in 0..k {
        l += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        logs.push(l);
    }
    let top = *logs.last().expect("at least one term");
    let sum: f64 = logs.iter().map(|&x| (x - top).exp()).sum();
    let log_tail = top + sum.ln();
    (2.0 * log_tail.exp()).min(1.0)
}

/// Outputs per score label, for the bar and the summary string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabelCounts {
    /// `pass`.
    pub pass: u64,
    /// `exact`.
    pub exact: u64,
    /// `near`.
    pub near: u64,
    /// `fail`.
    pub fail: u64,
    /// `truncated`.
    pub truncated: u64,
}

impl LabelCounts {
    /// Count one label.
    pub fn add(&mut self, label: super::score::ScoreLabel) {
        use super::score::ScoreLabel as L;
        match label {
            L::Pass => self.pass += 1,
            L::Exact => self.exact += 1,
            L::Near => self.near += 1,
            L::Fail => self.fail += 1,
            L::Truncated => self.truncated += 1,
        }
    }

    /// All scored outputs.
    pub fn total(&self) -> u64 {
        self.pass + self.exact + self.near + self.fail + self.truncated
    }
}

/// Slots of the glyph bar.
pub const BAR_SLOTS: usize = 10;

/// The 10-slot glyph bar: `★` pass/exact, `☆` near, `✕` fail, `⊘` truncated,
/// apportioned by largest remainder (each group gets the floor of its share,
/// the leftover slots go to the largest fractional parts, ties to the
/// better label). Nothing scored gives ten `✕`.
pub fn glyph_bar(c: &LabelCounts) -> String {
    let groups = [
        ('★', c.pass + c.exact),
        ('☆', c.near),
        ('✕', c.fail),
        ('⊘', c.truncated),
    ];
    let total: u64 = groups.iter().map(|g| g.1).sum();
    if total == 0 {
        return "✕".repeat(BAR_SLOTS);
    }
    let slots = BAR_SLOTS as u64;
    let mut seats: Vec<u64> = groups.iter().map(|g| g.1 * slots / total).collect();
    // remainder numerators, compared as integers so ties are exact
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(groups[i].1 * slots % total));
    let left = slots - seats.iter().sum::<u64>();
    for &i in order.iter().take(left as usize) {
        seats[i] += 1;
    }
    groups
        .iter()
        .zip(seats)
        .map(|(g, n)| g.0.to_string().repeat(n as usize))
        .collect()
}

/// The score summary string: `EXACT a / NEAR b / FAIL c[ / TRUNC t]` for
/// scorers with a near band (`graded`), `PASS a / FAIL c[ / TRUNC t]` for
/// pass/fail scorers, `correct/completed` when only a correct count is
/// known, `-` when nothing was scored.
pub fn score_summary(c: &LabelCounts, graded: bool, correct_of: Option<(u64, u64)>) -> String {
    let trunc = if c.truncated > 0 {
        format!(" / TRUNC {}", c.truncated)
    } else {
        String::new()
    };
    if c.total() > 0 {
        if graded || c.exact + c.near > 0 {
            format!(
                "EXACT {} / NEAR {} / FAIL {}{trunc}",
                c.exact + c.pass,
                c.near,
                c.fail
            )
        } else {
            format!("PASS {} / FAIL {}{trunc}", c.pass, c.fail)
        }
    } else if let Some((correct, completed)) = correct_of {
        format!("{correct}/{completed}")
    } else {
        "-".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_reference_values() {
        // reference values from the closed form evaluated in python3 (float64)
        // with z = 1.959964:
        //   7/10   -> (0.39677814534597083, 0.892208733443606)
        //   0/10   -> (0.0, 0.2775328030260577)
        //   50/100 -> (0.40383152963549296, 0.596168470364507)
        let close = |a: (f64, f64), b: (f64, f64)| {
            assert!(
                (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12,
                "{a:?} vs {b:?}"
            );
        };
        close(
            wilson_interval(7, 10, Z95),
            (0.39677814534597083, 0.892208733443606),
        );
        close(wilson_interval(0, 10, Z95), (0.0, 0.2775328030260577));
        close(
            wilson_interval(50, 100, Z95),
            (0.40383152963549296, 0.596168470364507),
        );
        assert_eq!(wilson_interval(0, 0, Z95), (0.0, 0.0));
        let (lo, hi) = wilson_interval(10, 10, Z95);
        assert!(hi > 1.0 - 1e-12 && lo > 0.7, "{lo} {hi}");
    }

    #[test]
    fn mcnemar_matches_exact_binomial_sums() {
        // reference: min(1, 2 * sum(comb(n, i) for i in 0..=k) / 2**n) with
        // python3's exact integers (math.comb, fractions):
        //   (0, 0) -> 1.0;  (5, 0) -> 0.0625;  (10, 2) -> 0.03857421875
        //   (3, 3) -> 1.0;  (20, 35) -> 0.058064146792409066
        //   (1000, 1100) -> 0.030720707864242296
        //   (500000, 501000) -> 0.31803654084032257
        let close = |got: f64, want: f64| {
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1e-300),
                "{got} vs {want}"
            );
        };
        assert_eq!(mcnemar_exact_p(0, 0), 1.0);
        close(mcnemar_exact_p(5, 0), 0.0625);
        close(mcnemar_exact_p(0, 5), 0.0625);
        close(mcnemar_exact_p(10, 2), 0.03857421875);
        assert_eq!(mcnemar_exact_p(3, 3), 1.0);
        close(mcnemar_exact_p(20, 35), REF_20_35);
        close(mcnemar_exact_p(1000, 1100), REF_1000_1100);
        let big = mcnemar_exact_p(500_000, 501_000);
        assert!((big - REF_BIG).abs() < 1e-6, "{big}");
        // extreme imbalance: tiny but finite and not NaN
        let tiny = mcnemar_exact_p(0, 5000);
        assert!((0.0..1e-300).contains(&tiny), "{tiny}");
        assert!(!mcnemar_exact_p(100_000, 0).is_nan());
    }

    const REF_20_35: f64 = 0.058_064_146_792_409_066;
    const REF_1000_1100: f64 = 0.030_720_707_864_242_296;
    const REF_BIG: f64 = 0.318_036_540_840_322_57;

    #[test]
    fn glyph_bar_uses_largest_remainders() {
        let c = LabelCounts {
            pass: 7,
            fail: 2,
            truncated: 1,
            ..Default::default()
        };
        assert_eq!(glyph_bar(&c), "★★★★★★★✕✕⊘");
        // 1/3 each of pass, fail, truncated: 3 + 3 + 3, one leftover slot to
        // the best label on the tie
        let c = LabelCounts {
            exact: 1,
            fail: 1,
            truncated: 1,
            ..Default::default()
        };
        assert_eq!(glyph_bar(&c), "★★★★✕✕✕⊘⊘⊘");
        // 2 near of 30: 0.67 slot rounds up over fail's 9.33
        let c = LabelCounts {
            pass: 0,
            near: 2,
            fail: 28,
            ..Default::default()
        };
        assert_eq!(glyph_bar(&c), "☆✕✕✕✕✕✕✕✕✕");
        assert_eq!(glyph_bar(&LabelCounts::default()), "✕✕✕✕✕✕✕✕✕✕");
        assert_eq!(glyph_bar(&c).chars().count(), BAR_SLOTS);
    }

    #[test]
    fn summary_strings() {
        let c = LabelCounts {
            pass: 27,
            fail: 2,
            truncated: 1,
            ..Default::default()
        };
        assert_eq!(score_summary(&c, false, None), "PASS 27 / FAIL 2 / TRUNC 1");
        let c = LabelCounts {
            exact: 5,
            near: 3,
            fail: 2,
            ..Default::default()
        };
        assert_eq!(score_summary(&c, true, None), "EXACT 5 / NEAR 3 / FAIL 2");
        let none = LabelCounts::default();
        assert_eq!(score_summary(&none, false, Some((3, 4))), "3/4");
        assert_eq!(score_summary(&none, false, None), "-");
    }
}
