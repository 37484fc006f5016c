//! `deploy slurm`: an sbatch script that runs one shard per Slurm task.
//!
//! `srun` starts the tasks; each takes its `--shard-index` from
//! `SLURM_PROCID`, and all name as coordinator the first host of the
//! allocation (`scontrol show hostnames`), where task 0 runs (Slurm places
//! rank 0 on the first node). The join secret comes from the submitting
//! shell's environment, which sbatch passes on; the script refuses to start
//! without it. The benchmark flags are written as one bash array of
//! single-quoted words, so spaces, quotes and `$` arrive unchanged. An API
//! key among them is taken out and read from the environment as well, so
//! that the script (kept in the job's records) never holds it.

use std::fmt::Write as _;

use super::flags::BenchFlags;
use super::{API_KEY_ENV, SECRET_ENV, SlurmArgs, shell_quote};
use crate::error::AppError;

/// Values of `#SBATCH` lines must stay on their line and be one word.
fn check_directive(flag: &str, v: &str) -> Result<(), AppError> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AppError::config(format!(
            "{flag} {v:?}: an #SBATCH value must be one word without spaces"
        )));
    }
    Ok(())
}

/// The sbatch script.
pub fn render(a: &SlurmArgs, bench: &BenchFlags) -> Result<String, AppError> {
    check_directive("--job-name", &a.job_name)?;
    let mut s = String::from("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name={}", a.job_name);
    let _ = writeln!(s, "#SBATCH --ntasks={}", a.shards);
    if let Some(n) = a.nodes {
        let _ = writeln!(s, "#SBATCH --nodes={n}");
    }
    if let Some(t) = &a.time {
        check_directive("--time", t)?;
        let _ = writeln!(s, "#SBATCH --time={t}");
    }
    if let Some(p) = &a.partition {
        check_directive("--partition", p)?;
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    let _ = writeln!(s, "#SBATCH --output={}-%j.log", a.job_name);
    let flags: Vec<String> = bench.words.iter().map(|f| shell_quote(f)).collect();
    let api_key = if bench.api_key {
        format!(
            ": \"${{{API_KEY_ENV}:?--api-key was taken out of the script: set {API_KEY_ENV} in the environment before sbatch}}\"\n\
             export {API_KEY_ENV}\n"
        )
    } else {
        String::new()
    };
    let _ = write!(
        s,
        "# llm-decode-bench: {shards} shards, one per Slurm task (docs/deploy.md).\n\
         # Submit with the join secret in the environment (sbatch passes it on):\n\
         #   export {SECRET_ENV}=\"$(head -c 32 /dev/urandom | base64)\"\n\
         #   sbatch this-script.sh\n\
         # Shard 0 writes the result (--output, relative to the submission directory);\n\
         # the others write <stem>.shard-I.json beside it.\n\
         set -euo pipefail\n\
         : \"${{{SECRET_ENV}:?set {SECRET_ENV} in the environment before sbatch (see the comment above)}}\"\n\
         export {SECRET_ENV}\n\
         {api_key}\
         coordinator=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1):{port}\"\n\
         flags=({flags})\n\
         # one task per shard; bash -c expands SLURM_PROCID inside each task\n\
         srun --ntasks={shards} --kill-on-bad-exit=0 bash -c \\\n\
         \x20   'exec {binary} --shards {shards} --shard-index \"$SLURM_PROCID\" --coordinator \"$0\" \"$@\"' \\\n\
         \x20   \"$coordinator\" \"${{flags[@]}}\"\n",
        shards = a.shards,
        port = a.port,
        flags = flags.join(" "),
        binary = shell_quote(&a.binary).replace('\'', r"'\''"),
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(a: &SlurmArgs) -> Result<String, AppError> {
        super::render(a, &super::super::flags::sort_out(&a.flags)?)
    }

    fn args(flags: &[&str]) -> SlurmArgs {
        SlurmArgs {
            shards: 3,
            nodes: Some(3),
            time: Some("00:30:00".into()),
            partition: None,
            job_name: "ldb".into(),
            port: 29517,
            binary: "llm-decode-bench".into(),
            flags: flags.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_script_has_one_task_per_shard_and_quoted_flags() {
        let s = render(&args(&["--host", "http://a b", "--model", "it's"])).unwrap();
        assert!(s.contains("#SBATCH --ntasks=3\n"));
        assert!(s.contains("#SBATCH --nodes=3\n"));
        assert!(s.contains("#SBATCH --time=00:30:00\n"));
        assert!(!s.contains("--partition"));
        assert!(s.contains(r"flags=(--host 'http://a b' --model 'it'\''s')"));
        assert!(s.contains("--shard-index \"$SLURM_PROCID\""));
    }

    #[test]
    fn a_directive_with_a_space_is_refused() {
        let mut a = args(&[]);
        a.partition = Some("gpu nodes".into());
        assert_eq!(render(&a).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn an_api_key_is_read_from_the_environment_not_written_in_the_script() {
        let s = render(&args(&["--api-key", "sk-live-1", "--conc", "8"])).unwrap();
        assert!(!s.contains("sk-live-1"), "{s}");
        assert!(s.contains("flags=(--conc 8)\n"), "{s}");
        assert!(s.contains(": \"${LLM_BENCH_API_KEY:?"), "{s}");
        assert!(!render(&args(&[])).unwrap().contains("LLM_BENCH_API_KEY"));
    }
}
