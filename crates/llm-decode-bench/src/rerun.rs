//! `llm-decode-bench rerun RESULT.json [FLAGS…]`: the flags a result file
//! recorded (`metadata.config`) become the command line again, with FLAGS
//! after them (so they win: `--host`, `--output`, …), lowered like any
//! command line (`invocation.rs`). The run plans afresh; before it starts,
//! the benchmark mode (`bench.rs`) says where the plan and the server
//! differ from the recorded run.

use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
use ldb_core::document::ResultDocument;
use serde_json::{Map, Value};

use crate::cli::{Cli, RerunArgs};
use crate::error::AppError;
use crate::rerun_policy::{Risk, is_builtin_scenario, risk};

/// Recorded flags never replayed, trusted or not: a rerun starts a new file.
const NEVER_REPLAYED: &[&str] = &["resume", "output", "print-config", "config"];

/// The opt-in that replays the flags a stranger's file must not set.
const TRUST_FLAG: &str = "--trust-recorded-flags";

/// Each credential the environment may hold, with the flags naming the
/// endpoints it goes to: taken from the environment, it never goes to one
/// of them that came from the file (trusted or not).
const CREDENTIAL_ENDPOINTS: &[(&str, &str, &[&str])] = &[
    (
        "api-key",
        "LLM_BENCH_API_KEY",
        &["host", "port", "metrics-url"],
    ),
    ("shard-secret", "LDB_SHARD_SECRET", &["coordinator"]),
];

/// The benchmark's flags and argv for the rerun, and the recorded document.
/// Prints, before anything is sent, what was left out and why, and the
/// exact command line that runs (secrets redacted).
pub(crate) fn prepare(
    a: &RerunArgs,
    program: String,
) -> Result<(crate::cli::BenchArgs, Vec<String>, ResultDocument), AppError> {
    let path = a.result.display().to_string();
    let prior = ldb_report::load_result_file(&a.result)
        .map_err(|e| AppError::Config(format!("rerun: {e}")))?;
    let Some(config) = prior.metadata.config.clone() else {
        return Err(AppError::Config(format!(
            "rerun: {path} records no configuration to run again (written by llm-decode-bench {} \
             before `metadata.config` existed); run its command again by hand",
            if prior.metadata.version.is_empty() {
                "?"
            } else {
                &prior.metadata.version
            }
        )));
    };
    // the opt-in is a `rerun` flag, but is also found after RESULT
    let trust = a.trust_recorded_flags || a.flags.iter().any(|f| f == TRUST_FLAG);
    let overrides = crate::config_file::expand(
        &std::iter::once(program.clone())
            .chain(a.flags.iter().filter(|f| *f != TRUST_FLAG).cloned())
            .collect::<Vec<_>>(),
    )
    .map_err(AppError::Config)?;
    let given = Cli::command()
        .try_get_matches_from(&overrides)
        .map_err(|e| AppError::Config(format!("rerun: {}", first_line(&e.to_string()))))?;
    if given.subcommand_name().is_some() {
        return Err(AppError::config(
            "rerun: the flags after RESULT must be benchmark flags",
        ));
    }
    let set = |long: &str| {
        arg_id(long).is_some_and(|id| given.value_source(&id) == Some(ValueSource::CommandLine))
    };
    if !trust {
        check_target(&config, &path, &set)?;
    }
    let (recorded, unknown) = crate::effective::to_args(&config);
    for k in unknown {
        eprintln!(
            "warning: rerun: {path} records --{}, which this build does not know; left out",
            shell_word(&k)
        );
    }
    let mut argv = vec![program];
    let (mut left_out, mut replayed) = (Vec::new(), Vec::new());
    // another server given: the recorded built-in simulator is not started
    let new_server = set("host") || set("port");
    for token in recorded {
        let (name, value) = split_token(&token);
        if NEVER_REPLAYED.contains(&name) || (new_server && name.starts_with("sim")) {
            continue;
        }
        if token.contains(ldb_core::redact::REDACTED) {
            eprintln!(
                "warning: rerun: the recorded --{name} was redacted; give it again after {path}"
            );
            continue;
        }
        if let Some(why) = risk(name, value).filter(|_| !trust) {
            // a flag given again, or left at its default, loses nothing
            if !set(name) && !is_default(name, value) {
                left_out.push((token.clone(), why));
            }
            continue;
        }
        // (a default, such as localhost, is not the file's choice)
        if !set(name) && !is_default(name, value) {
            replayed.push(name.to_string());
        }
        argv.push(token);
    }
    if !set("output") {
        argv.push(format!("--output={}", default_output(&a.result).display()));
    }
    argv.extend(overrides.into_iter().skip(1));
    let m = Cli::command()
        .try_get_matches_from(&argv)
        .map_err(|e| AppError::Config(format!("rerun: {}", first_line(&e.to_string()))))?;
    let mut cli = Cli::from_arg_matches(&m).map_err(|e| AppError::Config(e.to_string()))?;
    tell(&path, trust, &left_out, &command_line(&argv, &m));
    withhold_env_credentials(&mut cli.bench, &m, &replayed, &path);
    Ok((cli.bench, argv, prior))
}

/// A credential taken from the environment is dropped when an endpoint it
/// would go to came from the file (possible only with the opt-in): the user
/// names the endpoint again, or types the credential on the command line.
fn withhold_env_credentials(
    bench: &mut crate::cli::BenchArgs,
    m: &clap::ArgMatches,
    replayed: &[String],
    path: &str,
) {
    for (credential, var, endpoints) in CREDENTIAL_ENDPOINTS {
        let from_env = arg_id(credential)
            .is_some_and(|id| m.value_source(&id) == Some(ValueSource::EnvVariable));
        let chosen: Vec<String> = endpoints
            .iter()
            .filter(|e| replayed.iter().any(|r| r == *e))
            .map(|e| format!("--{e}"))
            .collect();
        if !from_env || chosen.is_empty() {
            continue;
        }
        match *credential {
            "api-key" => bench.api_key = None,
            _ => bench.shard.shard_secret = None,
        }
        eprintln!(
            "rerun: {var} is not sent to the {} recorded in {path}: name it again after {path}, \
             or give --{credential} on the command line",
            chosen.join(", ")
        );
    }
}

/// A result file does not choose the server (it would also receive the API
/// key): unless this command line names one (`--host`, `--port`, `--sim`),
/// the recorded server must be the default or a built-in simulator.
fn check_target(
    config: &Map<String, Value>,
    path: &str,
    set: &dyn Fn(&str) -> bool,
) -> Result<(), AppError> {
    if set("host") || set("port") || set("sim") {
        return Ok(());
    }
    let text = |k: &str| match config.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let recorded = match text("sim") {
        Some(s) if is_builtin_scenario(&s) => return Ok(()),
        Some(s) => format!("--sim={}", shell_word(&s)),
        None => {
            let named: Vec<String> = ["host", "port"]
                .into_iter()
                .filter_map(|k| text(k).map(|v| (k, v)))
                .filter(|(k, v)| !is_default(k, v))
                .map(|(k, v)| format!("--{k}={}", shell_word(&v)))
                .collect();
            if named.is_empty() {
                return Ok(());
            }
            named.join(" ")
        }
    };
    Err(AppError::Config(format!(
        "rerun: {path} measured {recorded}; a result file does not choose the server: name it \
         after {path} (--host URL [--port N], or --sim NAME), or put {TRUST_FLAG} before {path} \
         if you trust that file"
    )))
}

/// What was left out and why, then the command line: on stderr, before the
/// run sends anything.
fn tell(path: &str, trust: bool, left_out: &[(String, Risk)], command: &str) {
    if trust {
        eprintln!(
            "rerun: {TRUST_FLAG}: every recorded flag of {path} is replayed (programs, files, \
             ports and the server included)"
        );
    }
    for (token, why) in left_out {
        eprintln!("rerun: left out {}: {}", shell_word(token), why.reason());
    }
    if !left_out.is_empty() {
        eprintln!(
            "rerun: give a left-out flag again after {path} to use it, or put {TRUST_FLAG} \
             before {path} if you trust that file"
        );
    }
    eprintln!("rerun: running: {command}");
}

/// `--name=value` (or a switch `--name`) as its long name and value.
fn split_token(token: &str) -> (&str, &str) {
    let t = token.trim_start_matches("--");
    t.split_once('=').unwrap_or((t, ""))
}

/// The clap id of a benchmark flag's long name.
fn arg_id(long: &str) -> Option<String> {
    Cli::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .map(|a| a.get_id().to_string())
}

/// True when `value` is the flag's default (nothing is lost leaving it out).
fn is_default(long: &str, value: &str) -> bool {
    Cli::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .is_some_and(|a| {
            let d: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            !d.is_empty() && d.join(",") == value
        })
}

/// The command line as a shell would take it back, with the values of
/// secret flags (however they were spelt) and secret-looking values
/// redacted.
fn command_line(argv: &[String], m: &clap::ArgMatches) -> String {
    let secrets: Vec<String> = Cli::command()
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(ldb_core::redact::is_secret_name))
        .filter(|a| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| m.get_raw(a.get_id().as_str()))
        .flatten()
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
        .collect();
    let hidden = argv.iter().map(|t| {
        let secret = |v: &str| secrets.iter().any(|s| s == v);
        match t.split_once('=') {
            Some((flag, v)) if flag.starts_with('-') && secret(v) => {
                format!("{flag}={}", ldb_core::redact::REDACTED)
            }
            _ if secret(t) => ldb_core::redact::REDACTED.to_string(),
            _ => t.clone(),
        }
    });
    let hidden: Vec<String> = hidden.collect();
    ldb_core::redact::redact_argv(&hidden)
        .iter()
        .map(|t| shell_word(t))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One shell word; control characters (a hostile file's escape codes)
/// written as `$'\uNNNN'` so that printing it cannot drive the terminal.
fn shell_word(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return crate::deploy::shell_quote(s);
    }
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Before the rerun starts: where its fresh plan and the server differ from
/// the recorded run, one line each on stderr (nothing when all is the same).
/// A server that cannot be asked now is left to the run itself to report.
pub async fn announce(cfg: &ldb_runner::RunConfig, prior: &ResultDocument, gpus_now: Option<u64>) {
    let Ok((plan, now)) = ldb_runner::run::preview(cfg).await else {
        return;
    };
    let diffs = ldb_runner::rerun::differences(prior, &plan, &now, gpus_now);
    if diffs.is_empty() {
        eprintln!("rerun: same plan and server settings as the recorded run");
    }
    for d in diffs {
        eprintln!("rerun: differs from the recorded run: {d}");
    }
}

/// `RESULT-rerun.json` beside RESULT: never the recorded file itself.
fn default_output(result: &std::path::Path) -> std::path::PathBuf {
    let stem = result
        .file_stem()
        .map_or("result".into(), |s| s.to_string_lossy());
    result.with_file_name(format!("{stem}-rerun.json"))
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepare_with(config: serde_json::Value, flags: &[&str], trust: bool) -> Vec<String> {
        let dir = tempfile::tempdir().expect("dir");
        let result = dir.path().join("r.json");
        let doc = serde_json::json!({
            "metadata": {"version": "0.1.0", "schema_version": 1, "config": config},
            "results": []
        });
        std::fs::write(&result, doc.to_string()).expect("write");
        let a = RerunArgs {
            trust_recorded_flags: trust,
            result,
            flags: flags.iter().map(|f| (*f).to_string()).collect(),
        };
        prepare(&a, "ldb".into()).expect("prepares").1
    }

    #[test]
    fn only_the_allow_list_is_replayed_unless_the_file_is_trusted() {
        let config = serde_json::json!({
            "sim": "quickstart", "max-tokens": 64, "p2pmark-bin": "./x",
            "prompt-file": "/home/u/.aws/credentials", "metrics-url": "http://their-host",
            "html": "/tmp/h.html", "shards": 2, "coordinator": "their-host:1",
        });
        let argv = prepare_with(config.clone(), &[], false);
        let has = |argv: &[String], f: &str| argv.iter().any(|t| t.starts_with(f));
        assert!(has(&argv, "--max-tokens=64") && has(&argv, "--sim=quickstart"));
        for f in [
            "--p2pmark-bin",
            "--prompt-file",
            "--metrics-url",
            "--html",
            "--shards",
            "--coordinator",
        ] {
            assert!(!has(&argv, f), "{f} replayed: {argv:?}");
        }
        // given again on the command line: used
        let argv = prepare_with(config.clone(), &["--html", "mine.html"], false);
        assert!(argv.ends_with(&["--html".into(), "mine.html".into()]));
        // trusted (either side of RESULT): everything but the output and resume
        let argv = prepare_with(config, &["--trust-recorded-flags"], false);
        assert!(has(&argv, "--p2pmark-bin=./x") && has(&argv, "--metrics-url=http://their-host"));
        assert!(!argv.iter().any(|t| t == "--trust-recorded-flags"));
    }

    #[test]
    fn the_printed_command_line_hides_secrets_however_spelt_and_escape_codes() {
        let argv: Vec<String> = [
            "ldb",
            "--api-k",
            "abc123",
            "--model=m\u{1b}[2J",
            "--shard-secret=s3",
        ]
        .map(String::from)
        .to_vec();
        let m = Cli::command().try_get_matches_from(&argv).expect("parses");
        let line = command_line(&argv, &m);
        assert!(!line.contains("abc123") && !line.contains("s3"), "{line}");
        assert!(!line.contains('\u{1b}'), "{line}");
        assert!(line.contains("$'--model=m\\u001b[2J'"), "{line}");
    }

    #[test]
    fn the_default_output_is_beside_the_result_and_not_it() {
        assert_eq!(
            default_output(std::path::Path::new("/r/run.json")),
            std::path::PathBuf::from("/r/run-rerun.json")
        );
    }
}
