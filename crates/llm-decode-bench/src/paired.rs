//! `--compare-baseline A.json --compare-candidate B.json [--output OUT.json]`:
//! the standalone paired comparison of two completion-stats results. No
//! server is contacted; the comparison JSON is written only when `--output`
//! is on the command line (its default names the benchmark's result file,
//! which a comparison must not overwrite).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use ldb_report::export;

use crate::cli::BenchArgs;
use crate::error::{AppError, exit};

/// Whether `--output` (or an unambiguous prefix of it, which clap accepts)
/// was given explicitly.
fn output_given(argv: &[String]) -> bool {
    argv.iter().skip(1).any(|a| {
        let flag = a.split('=').next().unwrap_or("");
        flag.len() >= "--out".len() && "--output".starts_with(flag)
    })
}

/// The standalone comparison, lowered: the two files and where the
/// comparison JSON goes (only when `--output` is on the command line).
pub(crate) struct Standalone {
    baseline: PathBuf,
    candidate: PathBuf,
    output: Option<PathBuf>,
}

impl Standalone {
    /// The flags checked: both files are needed.
    pub(crate) fn lower(a: &BenchArgs, argv: &[String]) -> Result<Standalone, AppError> {
        let (Some(baseline), Some(candidate)) = (&a.compare_baseline, &a.compare_candidate) else {
            return Err(AppError::config(
                "--compare-candidate needs --compare-baseline (the earlier result to compare against)",
            ));
        };
        Ok(Standalone {
            baseline: baseline.clone(),
            candidate: candidate.clone(),
            output: output_given(argv).then(|| a.output.clone()),
        })
    }

    /// Run the standalone comparison. Unreadable inputs, files that are not
    /// completion-stats results and results with no common scored item are
    /// configuration errors (exit 2) naming the file; a comparison JSON that
    /// cannot be written is exit 5.
    pub(crate) fn run(&self) -> Result<i32, AppError> {
        let (baseline, candidate) = (&self.baseline, &self.candidate);
        let base = ldb_report::paired::load_runs(baseline).map_err(AppError::Config)?;
        let cand = ldb_report::paired::load_runs(candidate).map_err(AppError::Config)?;
        let c = ldb_eval::paired::compare(&base, &cand);
        if let Some(e) = &c.error {
            return Err(AppError::Config(format!(
                "{} vs {}: {e}",
                baseline.display(),
                candidate.display()
            )));
        }
        let opts = ldb_report::text::TextOptions {
            color: std::io::stdout().is_terminal(),
            ..Default::default()
        };
        let _ = export::write_to(&export::Text(opts), &c, &mut std::io::stdout().lock());
        if let Some(out) = &self.output {
            write(out, &c, baseline, candidate)?;
            println!("Results saved to {}", out.display());
        }
        Ok(exit::OK)
    }
}

fn write(
    out: &Path,
    c: &ldb_eval::paired::Comparison,
    baseline: &Path,
    candidate: &Path,
) -> Result<(), AppError> {
    let doc = ldb_report::paired::standalone_document(
        c,
        baseline,
        candidate,
        env!("CARGO_PKG_VERSION"),
        &chrono::Local::now()
            .format("%Y-%m-%dT%H:%M:%S%.6f")
            .to_string(),
    );
    export::write_atomic(&export::Json, &doc, out)
        .map(drop)
        .map_err(|e| AppError::Output(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::output_given;

    fn argv(a: &[&str]) -> Vec<String> {
        std::iter::once("llm-decode-bench")
            .chain(a.iter().copied())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn output_is_explicit_only_when_on_the_command_line() {
        assert!(output_given(&argv(&["--output", "x.json"])));
        assert!(output_given(&argv(&["--output=x.json"])));
        assert!(output_given(&argv(&["--outp", "x.json"])));
        assert!(!output_given(&argv(&["--compare-baseline", "a.json"])));
        assert!(!output_given(&argv(&["--o", "x"])));
    }
}
