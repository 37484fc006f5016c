//! The one validated type every float flag is parsed through.
//!
//! A float from the command line, a `--config` file or a replayed result
//! reaches `Duration::from_secs_f64`, sleeps and sums of several flags; a
//! value like `1e300`, `inf` or `NaN` used to panic there (issue 34). Each
//! float flag names a [`FloatRange`] in its `value_parser`; the range is
//! checked when clap parses the flag, so a bad value is clap's one-line
//! error with exit code 2 and no later code sees it. The flag's own meaning
//! (seconds > 0, a share from 0 to 1, …) is still checked where the flag is
//! lowered, with a message that names it; this bound only keeps every value
//! finite and small enough that no arithmetic on it overflows.
//! `docs/security.md` ("Other surfaces") lists the rule and its tests.

use std::time::{SystemTime, UNIX_EPOCH};

/// Largest magnitude any float flag accepts: 10⁹ (as seconds, 31 years).
/// Sums of a few flags, × 1000 for milliseconds and `Duration` conversions
/// all stay far below overflow.
pub const FLOAT_FLAG_LIMIT: f64 = 1e9;

/// `--start-at` may lie at most this many seconds ahead of the clock (a
/// day): a shard waits for it, and a later time is a typo or milliseconds.
pub const START_AT_HORIZON_S: f64 = 86_400.0;

/// Unix times from here on are taken for milliseconds (10¹¹ s is the year
/// 5138; 10¹¹ ms is 1973).
const MILLISECONDS_FROM: f64 = 1e11;

/// The inclusive range of one kind of float flag and how its error names it.
#[derive(Debug, Clone, Copy)]
pub struct FloatRange {
    min: f64,
    max: f64,
    what: &'static str,
}

/// Any number a flag may carry (its meaning is checked where it is lowered).
pub const NUMBER: FloatRange = FloatRange {
    min: -FLOAT_FLAG_LIMIT,
    max: FLOAT_FLAG_LIMIT,
    what: "a number from -1e9 to 1e9",
};

/// `selftest --window`.
pub const SELFTEST_WINDOW: FloatRange = FloatRange {
    min: 0.5,
    max: 600.0,
    what: "a number of seconds from 0.5 to 600",
};

/// A sampling temperature.
pub const TEMPERATURE: FloatRange = FloatRange {
    min: 0.0,
    max: 100.0,
    what: "a temperature from 0 to 100",
};

/// A Unix time in seconds (further bounded by the clock in [`unix_time`]).
const UNIX_TIME: FloatRange = FloatRange {
    min: 0.0,
    max: FLOAT_FLAG_LIMIT * 1e3,
    what: "a Unix time in seconds",
};

impl FloatRange {
    /// `text` as a finite number in this range, or why not (one line).
    pub fn parse(&self, text: &str) -> Result<f64, String> {
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && (self.min..=self.max).contains(&v) => Ok(v),
            _ => Err(format!("{text:?} is not {}", self.what)),
        }
    }
}

/// `value_parser` of a float flag with no range of its own.
pub fn number(s: &str) -> Result<f64, String> {
    NUMBER.parse(s)
}

/// `value_parser` of `selftest --window`.
pub fn selftest_window(s: &str) -> Result<f64, String> {
    SELFTEST_WINDOW.parse(s)
}

/// `value_parser` of a temperature flag.
pub fn temperature(s: &str) -> Result<f64, String> {
    TEMPERATURE.parse(s)
}

/// `value_parser` of `--start-at`: a Unix time in seconds, at most
/// [`START_AT_HORIZON_S`] ahead of this machine's clock; a value that looks
/// like milliseconds says so.
pub fn unix_time(s: &str) -> Result<f64, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    start_at_checked(UNIX_TIME.parse(s)?, now)
}

/// [`unix_time`]'s checks against a given clock (`now`, Unix seconds).
fn start_at_checked(t: f64, now: f64) -> Result<f64, String> {
    if t >= MILLISECONDS_FROM {
        return Err(format!(
            "{t} looks like milliseconds: give seconds since 1970 (e.g. `date +%s`)"
        ));
    }
    if t > now + START_AT_HORIZON_S {
        return Err(format!(
            "{t} is {:.0} s from now; the start must be within {START_AT_HORIZON_S:.0} s (a day)",
            t - now
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_and_non_finite_values_are_refused_in_one_line() {
        for bad in ["1e300", "-1e300", "inf", "-inf", "NaN", "1e10", "x", ""] {
            let e = number(bad).expect_err(bad);
            assert!(!e.contains('\n'), "{e}");
        }
        for good in ["0", "-1.5", "1e9", "0.02", " 7 "] {
            assert!(number(good).is_ok(), "{good}");
        }
        assert!(temperature("-0.1").is_err() && temperature("100").is_ok());
        assert!(selftest_window("0.4").is_err() && selftest_window("600").is_ok());
    }

    #[test]
    fn start_at_far_ahead_or_in_milliseconds_is_refused_with_the_reason() {
        let now = 1_765_000_000.0;
        assert_eq!(start_at_checked(now + 60.0, now), Ok(now + 60.0));
        assert_eq!(start_at_checked(now - 3600.0, now), Ok(now - 3600.0));
        let e = start_at_checked(now * 1000.0, now).unwrap_err();
        assert!(e.contains("milliseconds"), "{e}");
        let e = start_at_checked(now + 2.0 * START_AT_HORIZON_S, now).unwrap_err();
        assert!(e.contains("within 86400 s"), "{e}");
        assert!(unix_time("1e300").is_err());
        assert!(unix_time("-1").is_err());
    }
}
