//! `deploy k8s` and `deploy slurm`: print what runs a sharded benchmark on a
//! cluster (a Kubernetes Indexed Job with its headless Service, or an sbatch
//! script). Nothing is applied or submitted: the user reads what is printed
//! and hands it to `kubectl apply -f -` or `sbatch`, so the tool needs no
//! cluster credentials. The benchmark flags after `--` travel unchanged; the
//! shard flags (`--shards`, `--coordinator`; `--shard-index` comes from the
//! environment each scheduler sets) are added here, so they are refused among
//! them, as is the join secret in any spelling; an API key is taken out and
//! handed over from a Secret or the environment ([`flags`]). See
//! docs/deploy.md and docs/security.md.

mod flags;
mod k8s;
mod k8s_hardening;
mod slurm;

use std::io::Write;

use clap::{Args, Subcommand};

use crate::error::{AppError, exit_with};

/// The coordinator's port when none is given (agreed with the shard
/// machinery: `--coordinator HOST` alone means this port).
pub const DEFAULT_COORDINATOR_PORT: u16 = 29517;

/// The environment variable the shards read the join secret from.
pub const SECRET_ENV: &str = "LDB_SHARD_SECRET";

/// `deploy` subcommands.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// Where the shards run.
    #[command(subcommand)]
    pub target: DeployTarget,
}

/// Where the shards run.
#[derive(Debug, Subcommand)]
pub enum DeployTarget {
    /// Print a Kubernetes Indexed Job and its headless Service (YAML) for `kubectl apply -f -`.
    K8s(K8sArgs),
    /// Print an sbatch script that runs one shard per Slurm task.
    Slurm(SlurmArgs),
}

/// `deploy k8s` flags.
#[derive(Debug, Args)]
pub struct K8sArgs {
    /// Number of shards (pods; completions = parallelism = N).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Container image with the llm-decode-bench binary on its PATH (deploy/Containerfile).
    #[arg(long)]
    pub image: String,
    /// Name of the Job and of its headless Service (pods are NAME-0 … NAME-(N-1)).
    #[arg(long, default_value = "llm-decode-bench")]
    pub name: String,
    /// Namespace of the Job, the Service and the Secret.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Secret holding the join secret under the key `secret` (default: NAME-shard-secret).
    #[arg(long)]
    pub secret_name: Option<String>,
    /// The coordinator's port on shard 0.
    #[arg(long, default_value_t = DEFAULT_COORDINATOR_PORT)]
    pub port: u16,
    /// PersistentVolumeClaim for the results (default: an emptyDir, read back with
    /// `kubectl cp` within --keep-seconds, or from the leader's log).
    #[arg(long, value_name = "CLAIM")]
    pub output_volume: Option<String>,
    /// Seconds the leader's pod stays up after the run so `kubectl cp` can fetch the result
    /// (default: 300 with an emptyDir, 0 with --output-volume).
    #[arg(long)]
    pub keep_seconds: Option<u32>,
    /// The cluster's DNS domain (part of the coordinator's name).
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Secret holding the server's API key under the key `api-key`, given to every shard
    /// as LLM_BENCH_API_KEY (default: NAME-api-key when --api-key is among the flags;
    /// its value is never written into the manifests).
    #[arg(long, value_name = "SECRET")]
    pub api_key_secret: Option<String>,
    /// CPU each shard's pod requests (a Kubernetes quantity: 2, 1500m).
    #[arg(long, default_value = "2")]
    pub cpu_request: String,
    /// CPU limit of each shard's pod.
    #[arg(long, default_value = "4")]
    pub cpu_limit: String,
    /// Memory each shard's pod requests (a Kubernetes quantity: 2Gi, 512Mi).
    #[arg(long, default_value = "2Gi")]
    pub memory_request: String,
    /// Memory limit of each shard's pod.
    #[arg(long, default_value = "4Gi")]
    pub memory_limit: String,
    /// Seconds the Job may run in all before Kubernetes ends it (activeDeadlineSeconds).
    #[arg(long, default_value_t = 21_600, value_parser = clap::value_parser!(u32).range(1..))]
    pub deadline_seconds: u32,
    /// Seconds a finished Job and its pods (and logs) stay before Kubernetes deletes them
    /// (ttlSecondsAfterFinished).
    #[arg(long, default_value_t = 86_400)]
    pub ttl_seconds: u32,
    /// Benchmark flags, passed to every shard unchanged (after `--`).
    #[arg(last = true, value_name = "FLAGS")]
    pub flags: Vec<String>,
}

/// `deploy slurm` flags.
#[derive(Debug, Args)]
pub struct SlurmArgs {
    /// Number of shards (Slurm tasks, `--ntasks`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Number of nodes (`--nodes`; default: Slurm's choice).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub nodes: Option<u32>,
    /// Time limit (`--time`, e.g. 01:00:00).
    #[arg(long)]
    pub time: Option<String>,
    /// Partition (`--partition`).
    #[arg(long)]
    pub partition: Option<String>,
    /// Job name (`--job-name`).
    #[arg(long, default_value = "llm-decode-bench")]
    pub job_name: String,
    /// The coordinator's port on the first node.
    #[arg(long, default_value_t = DEFAULT_COORDINATOR_PORT)]
    pub port: u16,
    /// The benchmark binary as the compute nodes see it.
    #[arg(long, default_value = "llm-decode-bench")]
    pub binary: String,
    /// Benchmark flags, passed to every shard unchanged (after `--`).
    #[arg(last = true, value_name = "FLAGS")]
    pub flags: Vec<String>,
}

/// Print the manifests or the script; exit 2 on bad input.
pub fn run(a: &DeployArgs) -> i32 {
    exit_with(render(a).and_then(|text| {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| AppError::Output(format!("cannot write to stdout: {e}")))?;
        Ok(crate::error::exit::OK)
    }))
}

/// The text `deploy` prints.
pub fn render(a: &DeployArgs) -> Result<String, AppError> {
    match &a.target {
        DeployTarget::K8s(k) => k8s::render(k, &flags::sort_out(&k.flags)?),
        DeployTarget::Slurm(s) => slurm::render(s, &flags::sort_out(&s.flags)?),
    }
}

/// The environment variable the benchmark reads the API key from.
pub const API_KEY_ENV: &str = "LLM_BENCH_API_KEY";

/// The result file the leader writes: the last `--output` among the flags,
/// else the benchmark's default (relative paths land in the working
/// directory, which the deployments make the results volume).
pub fn result_file(flags: &[String]) -> String {
    let mut out = "benchmark_results.json".to_string();
    let mut it = flags.iter();
    while let Some(f) = it.next() {
        if f == "--output" {
            if let Some(v) = it.next() {
                out.clone_from(v);
            }
        } else if let Some(v) = f.strip_prefix("--output=") {
            out = v.to_string();
        }
    }
    out
}

/// `s` as one word for a POSIX shell: single-quoted, each `'` as `'\''`.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A Kubernetes object name (RFC 1123 label: lower-case letters, digits and
/// `-`, starting and ending with an alphanumeric, at most `max` characters).
fn check_dns_label(what: &str, s: &str, max: usize) -> Result<(), AppError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(AppError::config(format!(
            "{what} {s:?} is not a valid Kubernetes name: lower-case letters, digits and '-', \
             at most {max} characters, starting and ending with a letter or digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_survive_quotes_and_spaces() {
        assert_eq!(shell_quote("--concurrency"), "--concurrency");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn the_result_file_is_the_last_output_flag() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(result_file(&[]), "benchmark_results.json");
        assert_eq!(result_file(&v(&["--output", "a.json"])), "a.json");
        assert_eq!(
            result_file(&v(&["--output", "a.json", "--output=b.json"])),
            "b.json"
        );
    }

    #[test]
    fn kubernetes_names_are_checked() {
        assert!(check_dns_label("--name", "bench-1", 63).is_ok());
        for bad in ["", "Bench", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(check_dns_label("--name", bad, 63).is_err(), "{bad}");
        }
    }
}
