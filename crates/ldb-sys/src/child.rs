//! The one way this workspace starts a program: [`command`], a
//! `std::process::Command` whose environment holds none of the benchmark's
//! secrets. The children (nvidia-smi, `hostname`, `uname`, `scontrol`, the
//! fabric helpers named by `--p2pmark-bin`/`--amd-fabric-bin`) need no
//! credential, and a helper binary from someone else must not read
//! `LDB_SHARD_SECRET` or `LLM_BENCH_API_KEY` from its environment
//! (issue 34; docs/security.md, "Other surfaces"). A test fails when
//! `Command::new` appears anywhere else in the sources.

use std::ffi::{OsStr, OsString};
use std::process::Command;

use ldb_core::redact::is_secret_name;

/// The variables the command line reads a credential from: the join secret
/// of `--shard-secret` and the key of `--api-key`.
pub const CREDENTIAL_ENV: [&str; 2] = ["LDB_SHARD_SECRET", "LLM_BENCH_API_KEY"];

/// True for a variable a child must not inherit: one of [`CREDENTIAL_ENV`],
/// or any name that looks secret (`HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `OPENAI_API_KEY`, …; see `ldb_core::redact::is_secret_name`).
pub fn withheld(name: &str) -> bool {
    CREDENTIAL_ENV.contains(&name) || is_secret_name(name)
}

/// `Command::new(program)` with every [`withheld`] variable removed from
/// the environment it will inherit.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    let names: Vec<OsString> = std::env::vars_os().map(|(name, _)| name).collect();
    withhold(&mut cmd, names);
    cmd
}

/// Removes the [`withheld`] ones of `names` from what `cmd` will inherit
/// (a name that is not UTF-8 is withheld too: it cannot be judged).
fn withhold(cmd: &mut Command, names: impl IntoIterator<Item = OsString>) {
    for name in names {
        if name.to_str().is_none_or(withheld) {
            cmd.env_remove(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_secret_looking_names_are_withheld() {
        for n in
            CREDENTIAL_ENV
                .iter()
                .chain(&["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"])
        {
            assert!(withheld(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "CUDA_VISIBLE_DEVICES",
            "LANG",
            "SLURM_JOB_NODELIST",
        ] {
            assert!(!withheld(n), "{n}");
        }
    }

    #[test]
    fn a_child_inherits_no_secret_of_the_benchmark() {
        let mut cmd = command("true");
        let names = ["LDB_SHARD_SECRET", "LLM_BENCH_API_KEY", "HF_TOKEN", "PATH"];
        withhold(&mut cmd, names.map(OsString::from));
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for n in &names[..3] {
            assert!(removed.iter().any(|r| r == n), "{n} reaches the child");
        }
        assert!(!removed.iter().any(|r| r == "PATH"));
        assert!(cmd.status().is_ok_and(|s| s.success()), "it still runs");
    }

    /// Every spawn goes through [`command`]: `Command::new` appears in no
    /// other source file of the workspace (tests excepted, which start the
    /// binary itself).
    #[test]
    fn no_other_source_file_makes_a_command() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        let mut stack = vec![crates];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).expect("readable").flatten() {
                let p = e.path();
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if p.is_dir() {
                    if !matches!(name, "tests" | "benches" | "target" | "examples") {
                        stack.push(p);
                    }
                } else if name.ends_with(".rs")
                    && !p.ends_with("ldb-sys/src/child.rs")
                    && std::fs::read_to_string(&p).is_ok_and(|t| t.contains("Command::new"))
                {
                    found.push(p.display().to_string());
                }
            }
        }
        assert!(
            found.is_empty(),
            "spawn through ldb_sys::child::command: {found:?}"
        );
    }
}
