//! The benchmark flags after `--`, read the way the benchmark's own parser
//! will read them inside the pod or the Slurm task.
//!
//! They travel unchanged into the pod spec (the container's `args`) and the
//! sbatch script, where anyone who can read the Job, the script or `ps` sees
//! them. The parser accepts unambiguous prefixes of long flags
//! (`infer_long_args`), so `--shard-secr=…` *is* `--shard-secret` there: a
//! check of exact names would let the secret through. So every word that
//! starts with `--` is resolved against the benchmark's real flag list, and
//! a word that could mean a watched flag (its exact name, or a prefix of it
//! that is not itself another flag, ambiguous prefixes included: those would
//! fail in the pod, but only after the value was printed) counts as that
//! flag.

use clap::CommandFactory;

use crate::error::AppError;

/// Flags the deployment sets itself; given among the benchmark flags they
/// would disagree with it.
const OWN_FLAGS: [&str; 3] = ["shards", "shard-index", "coordinator"];

/// The join secret: never on a command line (it comes from the environment).
const SECRET_FLAG: &str = "shard-secret";

/// The API key: taken out of the flags and given to the shards from a
/// Secret (Kubernetes) or the submitting shell's environment (Slurm).
pub const API_KEY_FLAG: &str = "api-key";

/// The benchmark flags with the API key taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchFlags {
    /// What the shards get on their command line.
    pub words: Vec<String>,
    /// `--api-key` (in any spelling) was among them: its value was dropped,
    /// and the shards read the key from `LLM_BENCH_API_KEY` instead.
    pub api_key: bool,
}

/// Check and sort the flags given after `--`.
pub fn sort_out(words: &[String]) -> Result<BenchFlags, AppError> {
    sort_out_with(words, &benchmark_long_flags())
}

/// Every long flag name (and alias) of the benchmark's command line.
fn benchmark_long_flags() -> Vec<String> {
    crate::cli::Cli::command()
        .get_arguments()
        .flat_map(|a| {
            a.get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The watched flag `word` stands for, if any (see the module doc).
fn meant<'w>(word: &str, longs: &[String], watched: &[&'w str]) -> Option<&'w str> {
    let name = word.strip_prefix("--")?.split('=').next()?;
    if name.is_empty() {
        return None;
    }
    if longs.iter().any(|l| l == name) {
        return watched.iter().copied().find(|w| *w == name);
    }
    watched.iter().copied().find(|w| w.starts_with(name))
}

/// [`sort_out`] against a given flag list (the tests use the real one).
fn sort_out_with(words: &[String], longs: &[String]) -> Result<BenchFlags, AppError> {
    let watched: Vec<&str> = OWN_FLAGS
        .iter()
        .copied()
        .chain([SECRET_FLAG, API_KEY_FLAG])
        .collect();
    let mut out = BenchFlags {
        words: Vec::with_capacity(words.len()),
        api_key: false,
    };
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match meant(w, longs, &watched) {
            None => out.words.push(w.clone()),
            Some(API_KEY_FLAG) => {
                out.api_key = true;
                if !w.contains('=') {
                    // the value is the next word: drop it too
                    it.next();
                }
            }
            Some(SECRET_FLAG) => {
                return Err(AppError::config(format!(
                    "{} names --{SECRET_FLAG}: the join secret never goes on a command line \
                     or into a manifest; deploy passes it from the environment variable {}",
                    spelled(w),
                    super::SECRET_ENV
                )));
            }
            Some(own) => {
                return Err(AppError::config(format!(
                    "deploy sets --{own} itself; leave {} out of the benchmark flags after `--`",
                    spelled(w)
                )));
            }
        }
    }
    Ok(out)
}

/// How the user wrote a flag, without its value (which may be a secret).
fn spelled(word: &str) -> &str {
    word.split('=').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_spelling_of_the_secret_is_refused_without_echoing_its_value() {
        for bad in [
            "--shard-secret=hunter2",
            "--shard-secr=hunter2",
            "--shard-se=hunter2",
            "--shard-s",
        ] {
            let e = sort_out(&v(&[bad, "hunter2"])).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn the_shard_flags_are_refused_in_any_spelling() {
        for bad in [
            "--shards",
            "--shard-index=1",
            "--shard-ind",
            "--coordinator",
            "--coord=x",
        ] {
            let e = sort_out(&v(&[bad])).unwrap_err();
            assert!(e.to_string().contains("deploy sets --"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_api_key_in_any_spelling_is_taken_out_with_its_value() {
        for words in [
            v(&["--api-key", "sk-1", "--concurrency", "8"]),
            v(&["--api-key=sk-1", "--concurrency", "8"]),
            v(&["--api-k", "sk-1", "--concurrency", "8"]),
        ] {
            let f = sort_out(&words).unwrap();
            assert!(f.api_key, "{words:?}");
            assert_eq!(f.words, v(&["--concurrency", "8"]), "{words:?}");
        }
        // a longer word is not a spelling of it (the benchmark would
        // refuse it as unknown; it carries no key here)
        let f = sort_out(&v(&["--api-key-file", "/run/key"])).unwrap();
        assert_eq!((f.api_key, f.words.len()), (false, 2));
    }

    #[test]
    fn other_flags_and_prefixes_of_other_flags_travel_unchanged() {
        let words = v(&["--conc", "8", "--model", "--shards-like value", "--", "x"]);
        let f = sort_out(&words).unwrap();
        assert_eq!(f.words, words);
        assert!(!f.api_key);
    }

    #[test]
    fn the_flag_list_is_the_benchmarks() {
        let longs = benchmark_long_flags();
        for name in [
            "shard-secret",
            "shards",
            "shard-index",
            "coordinator",
            "api-key",
        ] {
            assert!(longs.iter().any(|l| l == name), "{name}");
        }
    }
}
