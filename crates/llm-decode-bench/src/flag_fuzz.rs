//! Every flag of the CLI that takes a value, fed numbers that used to
//! panic (`1e300`, `inf`, `NaN`, 2⁶⁴, milliseconds for seconds…): every
//! float a flag accepts is finite and within [`FLOAT_FLAG_LIMIT`] (each
//! flag × each hostile number), and parsing and lowering never panic (a
//! property test over random flags and numbers). The flags are read from clap's `Command`,
//! so a flag added later is covered without touching this file.

use std::panic::{AssertUnwindSafe, catch_unwind};

use clap::{ArgMatches, CommandFactory, FromArgMatches as _};
use proptest::prelude::*;

use crate::cli::Cli;
use crate::cli_float::FLOAT_FLAG_LIMIT;
use crate::invocation::Invocation;

/// A flag that takes a value: the subcommand path before it, its long name
/// and its clap id.
#[derive(Debug, Clone)]
struct ValueFlag {
    path: Vec<String>,
    long: String,
    id: String,
}

fn value_flags() -> Vec<ValueFlag> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<ValueFlag>) {
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long()
                && arg.get_action().takes_values()
            {
                out.push(ValueFlag {
                    path: path.clone(),
                    long: long.to_string(),
                    id: arg.get_id().to_string(),
                });
            }
        }
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut out = Vec::new();
    walk(&command(), Vec::new(), &mut out);
    out
}

/// The matches of the innermost subcommand on `path`.
fn innermost<'a>(m: &'a ArgMatches, path: &[String]) -> Option<&'a ArgMatches> {
    path.iter()
        .try_fold(m, |m, name| m.subcommand_matches(name))
}

/// The CLI's clap `Command`, built once (building it costs more than a
/// parse; a clone costs about as much, so the loop reuses one).
fn command() -> clap::Command {
    static CMD: std::sync::OnceLock<clap::Command> = std::sync::OnceLock::new();
    CMD.get_or_init(Cli::command).clone()
}

/// Parse `--flag=value` (and, with `lower`, lower it); `Err` says what went
/// wrong (a panic, or an accepted float out of bounds). A refusal is fine.
fn check(
    cmd: &mut clap::Command,
    flag: &ValueFlag,
    value: &str,
    lower: bool,
) -> Result<(), String> {
    let mut argv = vec!["llm-decode-bench".to_string()];
    argv.extend(flag.path.iter().cloned());
    argv.push(format!("--{}={value}", flag.long));
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let Ok(matches) = cmd.try_get_matches_from_mut(&argv) else {
            return Ok(());
        };
        if let Some(m) = innermost(&matches, &flag.path)
            && let Ok(Some(v)) = m.try_get_one::<f64>(&flag.id)
            && !(v.is_finite() && v.abs() <= FLOAT_FLAG_LIMIT)
        {
            return Err(format!("accepted {v}"));
        }
        if lower && let Ok(cli) = Cli::from_arg_matches(&matches) {
            let _ = Invocation::lower(cli, argv.clone());
        }
        Ok(())
    }));
    ran.unwrap_or_else(|_| Err("panicked".into()))
        .map_err(|why| format!("{}: {why}", argv.join(" ")))
}

/// Values that broke a flag before: huge, non-finite, beyond u64, tiny,
/// negative, and a Unix time in milliseconds.
const HOSTILE: &[&str] = &[
    "1e300",
    "-1e300",
    "inf",
    "-inf",
    "NaN",
    "1e18",
    "18446744073709551616",
    "-1",
    "0",
    "1e-320",
    "1.7976931348623157e308",
    "1765000000000",
];

#[test]
fn every_value_flag_survives_the_hostile_numbers() {
    let flags = value_flags();
    assert!(
        flags.len() > 100,
        "the walk finds the flags: {}",
        flags.len()
    );
    let mut cmd = command();
    let failures: Vec<String> = flags
        .iter()
        .flat_map(|f| HOSTILE.iter().map(move |v| (f, v)))
        .filter_map(|(f, v)| check(&mut cmd, f, v, false).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proptest! {
    // Lowering runs every cross-flag check (tens of ms in a debug build):
    // 128 cases in CI; `LDB_FLAG_FUZZ_CASES=100000` for a long run by hand.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("LDB_FLAG_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128)
    ))]

    #[test]
    fn no_number_makes_any_flag_panic(
        pick in any::<prop::sample::Index>(),
        v in any::<f64>(),
        exponent in any::<bool>(),
    ) {
        let flags = value_flags();
        let flag = &flags[pick.index(flags.len())];
        let text = if exponent { format!("{v:e}") } else { format!("{v}") };
        prop_assert_eq!(check(&mut command(), flag, &text, true), Ok(()));
    }
}
