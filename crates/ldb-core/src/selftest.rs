//! The client self-check (`llm-decode-bench selftest`): at rising numbers of
//! streams from a simulator with a known count, does the client still count
//! every token, on time? Arithmetic and the printed table only; the runner
//! measures the levels (methodology §9.3).

use crate::headroom::LOOP_LAG_LIMIT_S;

/// Measured/truth below this means the client lost or missed tokens.
pub const KEEP_UP_RATIO: f64 = 0.99;

/// One level of the self-check.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelResult {
    /// Streams kept open.
    pub streams: u32,
    /// Window length, seconds.
    pub window_s: f64,
    /// Tokens the simulator generated over the window (its counter).
    pub truth_tokens: f64,
    /// Tokens the client counted inside the window.
    pub measured_tokens: u64,
    /// CPU seconds of the client's threads over the window (not the simulator's).
    pub client_cpu_s: Option<f64>,
    /// Event-loop lag p99, seconds.
    pub loop_lag_p99_s: Option<f64>,
    /// Streams that failed.
    pub failed: u64,
}

impl LevelResult {
    /// Measured / truth (0 without truth).
    pub fn ratio(&self) -> f64 {
        if self.truth_tokens > 0.0 {
            self.measured_tokens as f64 / self.truth_tokens
        } else {
            0.0
        }
    }

    /// The simulator's rate over the window, tok/s.
    pub fn truth_tps(&self) -> f64 {
        self.truth_tokens / self.window_s.max(1e-9)
    }

    /// The client's rate over the window, tok/s.
    pub fn measured_tps(&self) -> f64 {
        self.measured_tokens as f64 / self.window_s.max(1e-9)
    }

    /// Client CPU per counted token, microseconds.
    pub fn cpu_us_per_token(&self) -> Option<f64> {
        let cpu = self.client_cpu_s?;
        (self.measured_tokens > 0).then(|| cpu * 1e6 / self.measured_tokens as f64)
    }

    /// The client counted (nearly) every token, without failures, on time.
    /// A ratio above 1 by more than the same margin is a miscount too.
    pub fn kept_up(&self) -> bool {
        let r = self.ratio();
        self.failed == 0
            && (KEEP_UP_RATIO..=2.0 - KEEP_UP_RATIO).contains(&r)
            && self.loop_lag_p99_s.is_none_or(|l| l <= LOOP_LAG_LIMIT_S)
    }
}

/// Where the client stopped keeping up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    /// Index of the last level kept up with before the first miss.
    pub last_ok: Option<usize>,
    /// Index of the first level that missed.
    pub first_miss: Option<usize>,
}

/// The ceiling of a run of levels in rising order.
pub fn ceiling(levels: &[LevelResult]) -> Ceiling {
    let first_miss = levels.iter().position(|l| !l.kept_up());
    let last_ok = match first_miss {
        Some(0) => None,
        Some(i) => Some(i - 1),
        None => levels.len().checked_sub(1),
    };
    Ceiling {
        last_ok,
        first_miss,
    }
}

/// One line of the table.
pub fn level_line(l: &LevelResult) -> String {
    let opt = |v: Option<f64>, digits: usize| {
        v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
    };
    format!(
        "{:>8} {:>12.0} {:>12.0} {:>8.4} {:>10} {:>10} {:>6}  {}",
        l.streams,
        l.truth_tps(),
        l.measured_tps(),
        l.ratio(),
        opt(l.cpu_us_per_token(), 2),
        opt(l.loop_lag_p99_s.map(|s| s * 1e3), 1),
        l.failed,
        if l.kept_up() { "ok" } else { "MISSED" }
    )
}

/// The table's header line.
pub fn header_line() -> String {
    format!(
        "{:>8} {:>12} {:>12} {:>8} {:>10} {:>10} {:>6}",
        "streams", "truth tok/s", "client tok/s", "ratio", "CPU µs/tok", "lag p99 ms", "failed"
    )
}

/// The verdict in one or two sentences.
pub fn verdict(levels: &[LevelResult]) -> String {
    let c = ceiling(levels);
    let describe = |l: &LevelResult| {
        format!(
            "{} streams, {:.0} tok/s",
            l.streams,
            l.measured_tps().max(l.truth_tps())
        )
    };
    match (c.last_ok, c.first_miss) {
        (_, None) if levels.is_empty() => "no level was measured".to_string(),
        (Some(i), None) => format!(
            "client ceiling not reached: this host's client kept up at every level, up to {} \
             (measured/truth ≥ {KEEP_UP_RATIO}, event-loop lag p99 ≤ {:.0} ms)",
            describe(&levels[i]),
            LOOP_LAG_LIMIT_S * 1e3
        ),
        (ok, Some(m)) => {
            let miss = &levels[m];
            let why = if miss.failed > 0 {
                format!("{} streams failed", miss.failed)
            } else if !(KEEP_UP_RATIO..=2.0 - KEEP_UP_RATIO).contains(&miss.ratio()) {
                format!("measured/truth {:.4}", miss.ratio())
            } else {
                format!(
                    "event-loop lag p99 {:.0} ms",
                    miss.loop_lag_p99_s.unwrap_or(0.0) * 1e3
                )
            };
            match ok {
                Some(i) => format!(
                    "client ceiling: kept up to {}; missed at {} ({why})",
                    describe(&levels[i]),
                    describe(miss)
                ),
                None => format!(
                    "client ceiling below the first level: missed at {} ({why})",
                    describe(miss)
                ),
            }
        }
        (None, None) => "no level was measured".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(streams: u32, truth: f64, measured: u64, lag_ms: f64) -> LevelResult {
        LevelResult {
            streams,
            window_s: 3.0,
            truth_tokens: truth,
            measured_tokens: measured,
            client_cpu_s: Some(measured as f64 * 4e-6),
            loop_lag_p99_s: Some(lag_ms / 1e3),
            failed: 0,
        }
    }

    #[test]
    fn ratios_rates_and_cpu_per_token() {
        let l = level(64, 24_000.0, 23_880, 2.0);
        assert!((l.ratio() - 0.995).abs() < 1e-12);
        assert_eq!(l.truth_tps(), 8000.0);
        assert_eq!(l.measured_tps(), 7960.0);
        assert!((l.cpu_us_per_token().expect("cpu") - 4.0).abs() < 1e-9);
        assert!(l.kept_up());
    }

    #[test]
    fn a_short_count_a_late_loop_an_overcount_or_a_failure_miss() {
        assert!(!level(1024, 384_000.0, 370_000, 3.0).kept_up());
        assert!(!level(1024, 384_000.0, 384_000, 80.0).kept_up());
        assert!(!level(16, 6_000.0, 6_200, 1.0).kept_up());
        let mut failed = level(16, 6_000.0, 6_000, 1.0);
        failed.failed = 1;
        assert!(!failed.kept_up());
    }

    #[test]
    fn the_ceiling_is_the_last_level_before_the_first_miss() {
        let levels = vec![
            level(16, 6_000.0, 6_000, 1.0),
            level(64, 24_000.0, 23_990, 2.0),
            level(256, 96_000.0, 90_000, 40.0),
            level(1024, 384_000.0, 383_900, 3.0),
        ];
        let c = ceiling(&levels);
        assert_eq!(c.last_ok, Some(1));
        assert_eq!(c.first_miss, Some(2));
        let v = verdict(&levels);
        assert!(v.contains("kept up to 64 streams"), "{v}");
        assert!(
            v.contains("missed at 256 streams") && v.contains("0.9375"),
            "{v}"
        );
    }

    #[test]
    fn all_kept_up_none_kept_up_and_nothing_measured() {
        let all = vec![
            level(16, 6_000.0, 6_000, 1.0),
            level(64, 24_000.0, 24_000, 1.0),
        ];
        assert_eq!(
            ceiling(&all),
            Ceiling {
                last_ok: Some(1),
                first_miss: None
            }
        );
        assert!(verdict(&all).contains("not reached"), "{}", verdict(&all));
        let none = vec![level(16, 6_000.0, 100, 1.0)];
        assert!(verdict(&none).contains("below the first level"));
        assert_eq!(verdict(&[]), "no level was measured");
    }

    #[test]
    fn table_lines_line_up() {
        let h = header_line();
        let l = level_line(&level(16, 6_000.0, 6_000, 1.0));
        assert!(l.ends_with("ok"), "{l}");
        assert!(h.len() <= l.len() + 2, "{h}\n{l}");
        let mut unknown = level(16, 0.0, 0, 0.0);
        unknown.client_cpu_s = None;
        unknown.loop_lag_p99_s = None;
        assert!(
            level_line(&unknown).contains(" - "),
            "{}",
            level_line(&unknown)
        );
    }
}
