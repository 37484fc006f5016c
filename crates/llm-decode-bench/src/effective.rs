//! The effective configuration of a run: every benchmark flag by long name
//! with the value it has after defaults, presets (`--sim`'s small matrix)
//! and `--config`, read from the clap definitions so new flags join
//! without work. It is printed by `--print-config` (as TOML that `--config`
//! reads back), and recorded in the result as `metadata.config`, without
//! secrets, which `rerun` turns back into flags.

use clap::{ArgAction, CommandFactory};
use serde_json::{Map, Value};

use crate::cli::Cli;

/// Flags that describe how this command was started, not the run.
const NOT_RECORDED: &[&str] = &["config", "print-config", "help", "version"];

/// Every benchmark flag with its value (`null`: unset, no default).
pub fn from_argv(argv: &[String]) -> Map<String, Value> {
    let Ok(m) = Cli::command().try_get_matches_from(argv) else {
        return Map::new();
    };
    let mut out = Map::new();
    for arg in Cli::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if NOT_RECORDED.contains(&long) {
            continue;
        }
        let id = arg.get_id().as_str();
        let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let value = if switch {
            Value::Bool(m.get_flag(id))
        } else {
            match m.get_raw(id) {
                Some(raw) => {
                    let parts: Vec<String> =
                        raw.map(|v| v.to_string_lossy().into_owned()).collect();
                    typed(&parts.join(","))
                }
                None => Value::Null,
            }
        };
        out.insert(long.to_string(), value);
    }
    out
}

/// The presets a run resolves (`--sim`'s small matrix, the defaults of
/// unset matrix flags) written in, as the run will use them.
pub fn with_presets(mut c: Map<String, Value>, cfg: &ldb_runner::RunConfig) -> Map<String, Value> {
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let concs: Vec<u64> = cfg
        .matrix
        .concurrency
        .iter()
        .map(|&c| u64::from(c))
        .collect();
    for (k, v) in [
        ("concurrency", typed(&list(&concs))),
        ("contexts", typed(&list(&cfg.matrix.contexts))),
        (
            "prefill-contexts",
            Value::String(list(&cfg.prefill.prefill_contexts)),
        ),
        ("max-tokens", Value::from(cfg.matrix.max_tokens)),
        ("duration", Value::from(cfg.matrix.duration)),
        (
            "decode-warmup-seconds",
            Value::from(cfg.matrix.decode_warmup_seconds),
        ),
    ] {
        if c.contains_key(k) {
            c.insert(k.to_string(), v);
        }
    }
    c
}

/// What the result records: presets resolved, secrets removed.
pub fn recorded(c: Map<String, Value>, cfg: &ldb_runner::RunConfig) -> Map<String, Value> {
    without_secrets(&with_presets(c, cfg))
}

/// `--print-config`: the effective configuration as TOML (printed on
/// stdout), with the presets resolved where the flags are valid (else as
/// given). The API key is left out; URLs lose `user:password@` and secret
/// query parameters, and values that look like keys are redacted.
pub fn toml(a: &crate::cli::BenchArgs, argv: &[String]) -> String {
    let mut c = from_argv(argv);
    if let Ok(cfg) = crate::config::build(a, a.sim.is_some(), argv.to_vec()) {
        c = with_presets(c, &cfg);
    }
    to_toml(&without_secrets(&c))
}

/// A number where the text is one, else the text.
fn typed(text: &str) -> Value {
    if let Ok(i) = text.parse::<i64>() {
        return Value::from(i);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && !text.contains(['e', 'E']) => Value::from(f),
        _ => Value::String(text.to_string()),
    }
}

/// Secrets removed: keys named like one (API keys, tokens) are dropped, and
/// values that look secret, or URLs with credentials, are redacted.
pub fn without_secrets(config: &Map<String, Value>) -> Map<String, Value> {
    config
        .iter()
        .filter(|(k, _)| !ldb_core::redact::is_secret_name(k))
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => Value::String(ldb_core::redact::redact_value(k, s)),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// The configuration as a TOML file `--config` reads back; unset flags as
/// comments.
pub fn to_toml(config: &Map<String, Value>) -> String {
    let mut out =
        String::from("# llm-decode-bench effective configuration (--config reads it back)\n");
    for (k, v) in config {
        let line = match v {
            Value::Null => format!("# {k} = (unset)"),
            Value::String(s) => format!("{k} = {}", toml_string(s)),
            other => format!("{k} = {other}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Command-line tokens that set each recorded flag again (`rerun`); unset
/// flags and switches that are off are left out. Keys this build does not
/// know are returned apart, for a warning.
pub fn to_args(config: &Map<String, Value>) -> (Vec<String>, Vec<String>) {
    let known = crate::config_file::bench_flags();
    let (mut args, mut unknown) = (Vec::new(), Vec::new());
    for (k, v) in config {
        let Some((_, switch)) = known.iter().find(|(f, _)| f == k) else {
            unknown.push(k.clone());
            continue;
        };
        match v {
            Value::Null | Value::Bool(false) => {}
            Value::Bool(true) if *switch => args.push(format!("--{k}")),
            Value::String(s) => args.push(format!("--{k}={s}")),
            other => args.push(format!("--{k}={other}")),
        }
    }
    (args, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        std::iter::once("x")
            .chain(args.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn every_flag_is_there_with_defaults_and_given_values() {
        let c = from_argv(&argv(&[
            "--conc",
            "1,2",
            "--respect-eos",
            "--api-key",
            "sk-secret",
        ]));
        assert_eq!(c["concurrency"], "1,2");
        assert_eq!(c["respect-eos"], true);
        assert_eq!(c["skip-prefill"], false);
        assert_eq!(c["max-error-rate"], 0.02);
        assert_eq!(c["output"], "benchmark_results.json");
        assert_eq!(c["model"], Value::Null);
        assert!(!c.contains_key("config") && !c.contains_key("print-config"));
        let clean = without_secrets(&c);
        assert!(!clean.contains_key("api-key"));
        assert!(
            !serde_json::to_string(&clean)
                .expect("json")
                .contains("sk-secret")
        );
    }

    #[test]
    fn print_config_shows_no_credential_of_a_url() {
        let args = argv(&[
            "--host",
            "http://bob:hunter2@h.example:8000/?api_key=k3y",
            "--metrics-url",
            "http://h.example:9/metrics?token=t0k",
        ]);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(&args).expect("parses");
        let text = toml(&cli.bench, &args);
        for secret in ["hunter2", "k3y", "t0k"] {
            assert!(!text.contains(secret), "{secret} in\n{text}");
        }
        assert!(text.contains("h.example:8000"), "{text}");
    }

    #[test]
    fn the_toml_form_reads_back_to_the_same_configuration() {
        let c = from_argv(&argv(&[
            "--contexts",
            "0,8k",
            "--model",
            "a \"b\"",
            "--duration",
            "2",
        ]));
        let text = to_toml(&c);
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, &text).expect("write");
        let again = crate::config_file::expand(&argv(&["--config", file.to_str().expect("utf-8")]))
            .expect("reads back");
        assert_eq!(from_argv(&again), c);
        let (args, unknown) = to_args(&c);
        assert!(unknown.is_empty());
        assert_eq!(
            from_argv(&argv(&args.iter().map(String::as_str).collect::<Vec<_>>())),
            c
        );
    }
}
