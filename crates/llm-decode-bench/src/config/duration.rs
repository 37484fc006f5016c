//! `--duration` (seconds or `auto`) with `--max-duration`, `--target-ci` and
//! `--min-duration` → the window's maximum and the rule that may close it
//! early (see `ldb_core::autostop`, docs/methodology.md §"Cells that stop
//! when their number is known").
//!
//! Spelling: `--duration N` keeps the reference's meaning (every window is N
//! seconds). `--duration auto` turns the early stop on; its maximum is
//! `--max-duration` (30 s unless given), which is also what the result's
//! `duration_per_test` and every request count derived from the duration
//! (open-loop cells) use. The three auto flags without `auto` are an error,
//! not silently ignored.

use ldb_core::autostop::AutoStop;

use super::{ConfigError, bad};
use crate::cli::{BenchArgs, DurationArg};

/// `--max-duration` when not given, seconds (the fixed window's default).
pub const DEFAULT_MAX_DURATION: f64 = 30.0;
/// `--target-ci` when not given, percent.
pub const DEFAULT_TARGET_CI_PCT: f64 = 1.0;
/// `--min-duration` when not given, seconds.
pub const DEFAULT_MIN_DURATION: f64 = 5.0;

/// The window's length (the maximum when auto) and the early-stop rule.
pub fn window_settings(
    a: &BenchArgs,
    default_s: f64,
) -> Result<(f64, Option<AutoStop>), ConfigError> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    match a.duration {
        Some(DurationArg::Auto) => {
            let max = a.max_duration.unwrap_or(DEFAULT_MAX_DURATION);
            if !positive(max) {
                return Err(bad(
                    "--max-duration",
                    "must be a positive number of seconds",
                ));
            }
            let pct = a.target_ci.unwrap_or(DEFAULT_TARGET_CI_PCT);
            if !(positive(pct) && pct < 100.0) {
                return Err(bad(
                    "--target-ci",
                    "must be a percentage above 0 and below 100",
                ));
            }
            let min = a.min_duration.unwrap_or(DEFAULT_MIN_DURATION);
            if !(min.is_finite() && min >= 0.0) {
                return Err(bad("--min-duration", "must be ≥ 0 seconds"));
            }
            if min > max {
                return Err(bad(
                    "--min-duration",
                    format!("{min} s is longer than the maximum window ({max} s, --max-duration)"),
                ));
            }
            let rule = AutoStop {
                target_rel: pct / 100.0,
                min_s: min,
            };
            Ok((max, Some(rule)))
        }
        other => {
            for (given, flag) in [
                (a.max_duration.is_some(), "--max-duration"),
                (a.target_ci.is_some(), "--target-ci"),
                (a.min_duration.is_some(), "--min-duration"),
            ] {
                if given {
                    return Err(bad(flag, "only applies with --duration auto"));
                }
            }
            let s = match other {
                Some(DurationArg::Seconds(s)) => s,
                _ => default_s,
            };
            if !positive(s) {
                return Err(bad(
                    "--duration",
                    "must be a positive number of seconds or auto",
                ));
            }
            Ok((s, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(d: Option<DurationArg>) -> BenchArgs {
        BenchArgs {
            duration: d,
            ..Default::default()
        }
    }

    #[test]
    fn numeric_duration_keeps_its_reference_meaning() {
        let (s, rule) = window_settings(&args(Some(DurationArg::Seconds(12.0))), 30.0).unwrap();
        assert_eq!((s, rule), (12.0, None));
        let (s, rule) = window_settings(&args(None), 4.0).unwrap();
        assert_eq!((s, rule), (4.0, None));
    }

    #[test]
    fn auto_has_documented_defaults_and_takes_the_maximum() {
        let (s, rule) = window_settings(&args(Some(DurationArg::Auto)), 4.0).unwrap();
        assert_eq!(s, DEFAULT_MAX_DURATION);
        assert_eq!(
            rule,
            Some(AutoStop {
                target_rel: 0.01,
                min_s: 5.0
            })
        );
        let mut a = args(Some(DurationArg::Auto));
        a.max_duration = Some(12.0);
        a.target_ci = Some(2.0);
        a.min_duration = Some(3.0);
        let (s, rule) = window_settings(&a, 30.0).unwrap();
        assert_eq!(s, 12.0);
        assert_eq!(
            rule,
            Some(AutoStop {
                target_rel: 0.02,
                min_s: 3.0
            })
        );
    }

    /// `--duration`, `--max-duration`, `--target-ci`, `--min-duration`, the error's start.
    type Case = (
        Option<DurationArg>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        &'static str,
    );

    #[test]
    fn bad_auto_input_is_a_one_line_error_naming_the_flag() {
        let cases: &[Case] = &[
            (
                Some(DurationArg::Seconds(0.0)),
                None,
                None,
                None,
                "invalid --duration",
            ),
            (
                Some(DurationArg::Seconds(f64::NAN)),
                None,
                None,
                None,
                "invalid --duration",
            ),
            (
                Some(DurationArg::Seconds(30.0)),
                Some(60.0),
                None,
                None,
                "invalid --max-duration: only applies",
            ),
            (
                None,
                None,
                Some(1.0),
                None,
                "invalid --target-ci: only applies",
            ),
            (
                None,
                None,
                None,
                Some(5.0),
                "invalid --min-duration: only applies",
            ),
            (
                Some(DurationArg::Auto),
                Some(-1.0),
                None,
                None,
                "invalid --max-duration",
            ),
            (
                Some(DurationArg::Auto),
                None,
                Some(0.0),
                None,
                "invalid --target-ci",
            ),
            (
                Some(DurationArg::Auto),
                None,
                Some(f64::INFINITY),
                None,
                "invalid --target-ci",
            ),
            (
                Some(DurationArg::Auto),
                Some(10.0),
                None,
                Some(20.0),
                "invalid --min-duration",
            ),
        ];
        for (d, max, pct, min, want) in cases {
            let mut a = args(*d);
            a.max_duration = *max;
            a.target_ci = *pct;
            a.min_duration = *min;
            let e = window_settings(&a, 30.0).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e} (want {want})");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
