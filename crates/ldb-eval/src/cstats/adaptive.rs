//! The adaptive concurrency search: probe rising levels, keep the fastest,
//! stop after `patience` levels that did not beat it by `min_improvement`.

/// The probe levels as given: blanks skipped, deduplicated, sorted, 1 added
/// when missing (the first level is the single-stream baseline).
pub fn normalize_levels(spec: &str) -> Result<Vec<usize>, String> {
    let mut levels = vec![1usize];
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<usize>() {
            Ok(c) if c >= 1 => levels.push(c),
            _ => {
                return Err(format!(
                    "invalid --completion-stats-concurrency-levels: {part:?} is not a whole number >= 1"
                ));
            }
        }
    }
    levels.sort_unstable();
    levels.dedup();
    Ok(levels)
}

/// What one probed level meant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelVerdict {
    /// The level became the best so far.
    pub improved: bool,
    /// Probing should stop after this level.
    pub stop: bool,
}

/// The decision state across probed levels.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveRule {
    /// Relative gain of aggregate gen tok/s that counts as an improvement.
    pub min_improvement: f64,
    /// Non-improving levels tolerated before stopping.
    pub patience: usize,
    /// Whether `patience` stops the probe at all.
    pub auto_stop: bool,
    /// Best level so far and its aggregate gen tok/s.
    pub best: Option<(usize, f64)>,
    misses: usize,
}

impl AdaptiveRule {
    /// A fresh search.
    pub fn new(min_improvement: f64, patience: usize, auto_stop: bool) -> AdaptiveRule {
        AdaptiveRule {
            min_improvement,
            patience: patience.max(1),
            auto_stop,
            best: None,
            misses: 0,
        }
    }

    /// Record level `c` with aggregate gen tok/s `rate`. The first level
    /// always becomes the best; a later one must exceed
    /// `best · (1 + min_improvement)`.
    pub fn observe(&mut self, c: usize, rate: f64) -> LevelVerdict {
        let improved = match self.best {
            None => true,
            Some((_, best)) => rate > best * (1.0 + self.min_improvement),
        };
        if improved {
            self.best = Some((c, rate));
            self.misses = 0;
        } else {
            self.misses += 1;
        }
        LevelVerdict {
            improved,
            stop: self.auto_stop && self.misses >= self.patience,
        }
    }

    /// The selected concurrency (1 before any level).
    pub fn best_c(&self) -> usize {
        self.best.map_or(1, |(c, _)| c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_cleaned_and_start_at_one() {
        assert_eq!(normalize_levels("8, 2,,4,2").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(normalize_levels("").unwrap(), vec![1]);
        assert!(normalize_levels("2,x").unwrap_err().contains("\"x\""));
        assert!(normalize_levels("0").is_err());
    }

    #[test]
    fn stops_after_patience_non_improving_levels() {
        let mut r = AdaptiveRule::new(0.03, 1, true);
        assert_eq!(
            r.observe(1, 10.0),
            LevelVerdict {
                improved: true,
                stop: false
            }
        );
        assert!(r.observe(2, 19.0).improved);
        // +2 % is not enough
        let v = r.observe(4, 19.38);
        assert_eq!((v.improved, v.stop), (false, true));
        assert_eq!(r.best_c(), 2);
    }

    #[test]
    fn patience_and_no_auto_stop() {
        let mut r = AdaptiveRule::new(0.0, 2, true);
        r.observe(1, 10.0);
        assert!(!r.observe(2, 9.0).stop);
        assert!(r.observe(4, 12.0).improved, "a later gain resets the count");
        assert!(!r.observe(8, 11.0).stop);
        assert!(r.observe(16, 11.0).stop);
        let mut r = AdaptiveRule::new(0.0, 1, false);
        r.observe(1, 10.0);
        assert!(!r.observe(2, 1.0).stop);
        assert_eq!(r.best_c(), 1);
    }
}
