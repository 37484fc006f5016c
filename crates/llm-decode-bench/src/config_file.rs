//! `--config FILE`: a TOML file of flags, turned into command-line tokens.
//!
//! Every key is a flag's long name (`max-tokens = 512`), checked against the
//! clap definitions of the benchmark, so a flag added anywhere in `cli.rs` is
//! a key at once. The file's flags are put before the command line's, and a
//! repeated flag takes its last value: the command line overrides the file.
//! A key that is not a flag is an error naming the file and its line.

use std::path::Path;

use clap::{ArgAction, CommandFactory};

use crate::cli::Cli;

/// Flags that make no sense inside a configuration file.
const NOT_IN_FILE: &[&str] = &["config", "print-config", "help", "version"];

/// The benchmark's flags by long name, with whether each is an on/off switch.
pub fn bench_flags() -> Vec<(String, bool)> {
    Cli::command()
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let switch = matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
            Some((long.to_string(), switch))
        })
        .collect()
}

/// The argv with the file's flags inserted after the program name, when the
/// command line names a `--config` file; else the argv unchanged.
pub fn expand(argv: &[String]) -> Result<Vec<String>, String> {
    let Some(path) = config_path(argv) else {
        return Ok(argv.to_vec());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("--config {path}: cannot read it: {e}"))?;
    let from_file = file_args(Path::new(&path), &text)?;
    let mut out = Vec::with_capacity(argv.len() + from_file.len());
    out.extend(argv.first().cloned());
    out.extend(from_file);
    out.extend(argv.iter().skip(1).cloned());
    Ok(out)
}

/// The `--config` value as clap reads the command line (prefixes, `=` and
/// the last repetition included); `None` when the line does not parse, so
/// the usual parse reports that.
fn config_path(argv: &[String]) -> Option<String> {
    let m = Cli::command().try_get_matches_from(argv).ok()?;
    if m.subcommand_name().is_some() {
        return None;
    }
    m.get_one::<std::path::PathBuf>("config")
        .map(|p| p.display().to_string())
}

/// `--key=value` tokens from the text of a configuration file.
pub fn file_args(path: &Path, text: &str) -> Result<Vec<String>, String> {
    let at = |offset: usize| format!("{}:{}", path.display(), line_of(text, offset));
    let spanned = toml::de::DeTable::parse(text).map_err(|e| {
        let where_ = e.span().map_or(path.display().to_string(), |s| at(s.start));
        format!("--config {where_}: not valid TOML: {}", e.message().trim())
    })?;
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        format!(
            "--config {}: not valid TOML: {}",
            path.display(),
            e.message()
        )
    })?;
    let flags = bench_flags();
    let mut out = Vec::new();
    for (key, _) in spanned.get_ref().iter() {
        let name: &str = key.get_ref();
        let here = at(key.span().start);
        let known = flags.iter().find(|(f, _)| f == name);
        let Some((_, switch)) = known.filter(|_| !NOT_IN_FILE.contains(&name)) else {
            return Err(format!(
                "--config {here}: unknown key {name:?} (keys are the long flag names, e.g. max-tokens)"
            ));
        };
        let value = table
            .get(name)
            .ok_or_else(|| format!("--config {here}: {name:?}"))?;
        if let Some(token) =
            token(name, *switch, value).map_err(|e| format!("--config {here}: {e}"))?
        {
            out.push(token);
        }
    }
    Ok(out)
}

/// One command-line token for a key; `None` for a switch set to false.
fn token(name: &str, switch: bool, value: &toml::Value) -> Result<Option<String>, String> {
    use toml::Value as V;
    if switch {
        return match value {
            V::Boolean(true) => Ok(Some(format!("--{name}"))),
            V::Boolean(false) => Ok(None),
            _ => Err(format!(
                "{name} is an on/off flag: write {name} = true or false"
            )),
        };
    }
    let text = match value {
        V::String(s) => s.clone(),
        V::Integer(i) => i.to_string(),
        V::Float(f) => f.to_string(),
        V::Boolean(b) => b.to_string(),
        V::Array(items) => items
            .iter()
            .map(scalar)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{name}: {e}"))?
            .join(","),
        V::Datetime(_) | V::Table(_) => {
            return Err(format!("{name} takes a string, a number or a list"));
        }
    };
    Ok(Some(format!("--{name}={text}")))
}

fn scalar(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        _ => Err("list items must be strings or numbers".into()),
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Result<Vec<String>, String> {
        file_args(Path::new("run.toml"), text)
    }

    #[test]
    fn keys_are_long_flag_names_and_become_tokens() {
        let mut got = args(
            "max-tokens = 512\nconcurrency = [1, 4]\ncontexts = \"0,8k\"\nrespect-eos = true\n\
             skip-prefill = false\nduration = 2.5\n",
        )
        .expect("valid");
        // a key appears once in TOML, so the order of the tokens does not matter
        got.sort();
        assert_eq!(
            got,
            [
                "--concurrency=1,4",
                "--contexts=0,8k",
                "--duration=2.5",
                "--max-tokens=512",
                "--respect-eos",
            ]
        );
    }

    #[test]
    fn an_unknown_key_names_the_file_and_its_line() {
        let e = args("max-tokens = 512\n\nmax-token = 3\n").expect_err("unknown");
        assert!(
            e.starts_with("--config run.toml:3: unknown key \"max-token\""),
            "{e}"
        );
        let e = args("config = \"x.toml\"\n").expect_err("nested");
        assert!(e.contains("run.toml:1: unknown key"), "{e}");
    }

    #[test]
    fn bad_toml_names_the_file_and_its_line() {
        let e = args("max-tokens = 512\nduration = \n").expect_err("bad");
        assert!(e.starts_with("--config run.toml:2: not valid TOML"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let e = args("respect-eos = 1\n").expect_err("switch");
        assert!(
            e.contains("run.toml:1: respect-eos is an on/off flag"),
            "{e}"
        );
    }

    #[test]
    fn the_command_line_overrides_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "max-tokens = 512\nduration = 9\n").expect("write");
        let argv: Vec<String> = [
            "x",
            "--conf",
            file.to_str().expect("utf-8"),
            "--max-tok",
            "7",
        ]
        .map(String::from)
        .to_vec();
        let expanded = expand(&argv).expect("expands");
        let cli = <Cli as clap::Parser>::try_parse_from(&expanded).expect("parses");
        assert_eq!(
            (cli.bench.max_tokens, cli.bench.duration),
            (Some(7), Some(crate::cli::DurationArg::Seconds(9.0)))
        );
        let missing: Vec<String> = ["x", "--config", "/nonexistent/c.toml"]
            .map(String::from)
            .to_vec();
        assert!(
            expand(&missing)
                .expect_err("missing")
                .starts_with("--config /nonexistent/c.toml: cannot read")
        );
    }
}
