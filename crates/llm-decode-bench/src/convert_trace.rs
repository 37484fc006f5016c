//! `convert-trace --from aiperf|agentx INPUT… [--output FILE]`: the agent
//! traces AIPerf and AgentX replay, written as our JSONL for `--trace FILE
//! --trace-sessions` (docs/workloads.md, "Converting AIPerf and AgentX
//! traces"). The conversion itself is `ldb_core::trace::convert`; here the
//! files are read and written. A row that cannot be converted is one line
//! `FILE:LINE: reason`, exit 2 (or counted and skipped under `--skip-bad`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use ldb_core::trace::convert::{ConvertOptions, Converted, Source};

use crate::error::{AppError, exit};

/// `convert-trace` flags.
#[derive(Debug, Args)]
pub struct ConvertTraceArgs {
    /// The source format: `aiperf` (AIPerf's Mooncake-style multi-turn JSONL)
    /// or `agentx` (AgentX's per-conversation JSON traces).
    #[arg(long, value_name = "FORMAT")]
    pub from: String,
    /// Input files; a folder stands for its `.json` and `.jsonl` files, in
    /// name order.
    #[arg(value_name = "INPUT", required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Where our JSONL goes (default: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Seconds between the starts of conversations that carry no start time
    /// of their own (AgentX traces all start at 0): conversation i starts at
    /// i × this.
    #[arg(long, value_name = "SECONDS", default_value = "0", value_parser = crate::cli_float::number)]
    pub start_every: f64,
    /// Count and skip rows (AIPerf) or traces (AgentX) that cannot be
    /// converted, instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
}

/// Converts, or says why not (exit 2; 5 when the output cannot be written).
pub fn run(a: &ConvertTraceArgs) -> Result<i32, AppError> {
    let source = Source::parse(&a.from)
        .ok_or_else(|| AppError::Config(format!("--from {:?}: use aiperf or agentx", a.from)))?;
    if !(a.start_every.is_finite() && a.start_every >= 0.0) {
        return Err(AppError::Config(
            "--start-every must be seconds (a number ≥ 0)".into(),
        ));
    }
    let o = ConvertOptions {
        start_every_s: a.start_every,
        skip_bad: a.skip_bad,
    };
    let mut c = Converted::default();
    for path in inputs(&a.inputs)? {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| AppError::Config(format!("{}: {e}", path.display())))?;
        source.convert(&text, &o, &mut c).map_err(|e| {
            AppError::Config(format!("{}:{}: {}", path.display(), e.line, e.reason))
        })?;
    }
    c.finish().map_err(|e| AppError::Config(e.reason))?;
    if c.rows.is_empty() {
        return Err(AppError::Config(format!(
            "no request to write ({} bad skipped)",
            c.bad_skipped
        )));
    }
    write(a.output.as_deref(), &c)?;
    eprintln!("convert-trace: {}", c.summary());
    Ok(exit::OK)
}

/// The files to read: each file given, and each folder's `.json` and
/// `.jsonl` files in name order.
fn inputs(given: &[PathBuf]) -> Result<Vec<PathBuf>, AppError> {
    let mut out = Vec::new();
    for p in given {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let listed =
            std::fs::read_dir(p).map_err(|e| AppError::Config(format!("{}: {e}", p.display())))?;
        let mut files: Vec<PathBuf> = listed
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "json" || x == "jsonl"))
            .collect();
        if files.is_empty() {
            return Err(AppError::Config(format!(
                "{}: no .json or .jsonl file in the folder",
                p.display()
            )));
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

/// Writes the rows to `path`, or to standard output.
fn write(path: Option<&Path>, c: &Converted) -> Result<(), AppError> {
    let failed = |e: std::io::Error| {
        AppError::Output(format!(
            "{}: {e}",
            path.map_or("standard output".into(), |p| p.display().to_string())
        ))
    };
    match path {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(failed)?;
            let mut w = std::io::BufWriter::new(f);
            c.write_jsonl(&mut w).map_err(failed)?;
            w.flush().map_err(failed)
        }
        None => c.write_jsonl(&mut std::io::stdout().lock()).map_err(failed),
    }
}
