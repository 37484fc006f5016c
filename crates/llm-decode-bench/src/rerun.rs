//! `llm-decode-bench rerun RESULT.json [FLAGS…]`: the flags a result file
//! recorded (`metadata.config`) become the command line again, with FLAGS
//! after them (so they win: `--host`, `--output`, …), lowered like any
//! command line (`invocation.rs`). The run plans afresh; before it starts,
//! the benchmark mode (`bench.rs`) says where the plan and the server
//! differ from the recorded run.

use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
use ldb_core::document::ResultDocument;

use crate::cli::{Cli, RerunArgs};
use crate::error::AppError;

/// Recorded flags never replayed: a rerun starts a new file.
const NOT_REPLAYED: &[&str] = &["resume", "output", "print-config", "config"];

/// The benchmark's flags and argv for the rerun, and the recorded document.
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
    let overrides = crate::config_file::expand(
        &std::iter::once(program.clone())
            .chain(a.flags.iter().cloned())
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
    let set = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);
    // another server given: the recorded built-in simulator is not started
    let new_server = set("host") || set("port");
    let (recorded, unknown) = crate::effective::to_args(&config);
    for k in unknown {
        eprintln!("warning: rerun: {path} records --{k}, which this build does not know; left out");
    }
    let mut argv = vec![program];
    for token in recorded {
        let name = token
            .trim_start_matches("--")
            .split('=')
            .next()
            .unwrap_or_default()
            .to_string();
        if NOT_REPLAYED.contains(&name.as_str()) || (new_server && name.starts_with("sim")) {
            continue;
        }
        if token.contains(ldb_core::redact::REDACTED) {
            eprintln!(
                "warning: rerun: the recorded --{name} was redacted; give it again after {path}"
            );
            continue;
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
    let cli = Cli::from_arg_matches(&m).map_err(|e| AppError::Config(e.to_string()))?;
    Ok((cli.bench, argv, prior))
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

    #[test]
    fn the_default_output_is_beside_the_result_and_not_it() {
        assert_eq!(
            default_output(std::path::Path::new("/r/run.json")),
            std::path::PathBuf::from("/r/run-rerun.json")
        );
    }
}
