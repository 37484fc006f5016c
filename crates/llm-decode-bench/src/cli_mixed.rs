//! `--mixed-prefill-contexts`: the prefill–decode interference probe run
//! after each sustained cell's window (docs/methodology.md, "Prefill–decode
//! interference"). Sustained cells only: every other mode refuses it.

use clap::Args;
use ldb_core::tokens::parse_token_list;

use crate::cli::BenchArgs;
use crate::config::{ConfigError, bad};

/// The interference probe's flag.
#[derive(Debug, Args, Clone, Default)]
pub struct MixedArgs {
    /// After each sustained cell's window, inject one fresh prompt of each of these lengths
    /// (comma list of token counts, k/m suffixes as --contexts) while its C streams keep
    /// decoding; records TTFT against the same prompt alone, the streams' stall and lost tok/s.
    #[arg(long, value_name = "L1,L2,...")]
    pub mixed_prefill_contexts: Option<String>,
}

const FLAG: &str = "--mixed-prefill-contexts";

/// The lengths to inject (empty without the flag); refused, with the mode
/// named, outside the sustained matrix.
pub fn lengths(a: &BenchArgs) -> Result<Vec<u64>, ConfigError> {
    let Some(s) = &a.mixed.mixed_prefill_contexts else {
        return Ok(Vec::new());
    };
    let ls = parse_token_list(s).map_err(|e| bad(FLAG, e))?;
    if ls.is_empty() || ls.contains(&0) {
        return Err(bad(FLAG, "needs one or more lengths above 0 tokens"));
    }
    if let Some(mode) = other_mode(a) {
        return Err(bad(
            FLAG,
            format!("probes sustained-decode cells only; {mode} runs none"),
        ));
    }
    Ok(ls)
}

/// The flag of a mode without sustained cells (or that runs them in
/// several processes), if one is given.
fn other_mode(a: &BenchArgs) -> Option<&'static str> {
    let w = &a.workload;
    [
        (a.request_count > 0, "--request-count"),
        (a.run_burst, "--run-burst (its burst cells)"),
        (a.request_rate.is_some(), "--request-rate"),
        (a.slo_search, "--slo-search"),
        (a.prefill_only, "--prefill-only"),
        (w.trace.is_some(), "--trace"),
        (w.sessions.is_some(), "--sessions"),
        (a.cstats.completion_stats, "--completion-stats"),
        (a.shard.shards.is_some_and(|n| n > 1), "--shards"),
    ]
    .into_iter()
    .find_map(|(on, flag)| on.then_some(flag))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn build(args: &[&str]) -> Result<Vec<u64>, String> {
        let mut argv = vec!["llm-decode-bench"];
        argv.extend_from_slice(args);
        let a = crate::cli::Cli::try_parse_from(argv).expect("parses").bench;
        crate::config::build(&a, false, vec![])
            .map(|c| c.matrix.mixed_prefill_contexts)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn lengths_parse_like_contexts() {
        assert_eq!(
            build(&["--mixed-prefill-contexts", "4k,32768"]),
            Ok(vec![4096, 32768])
        );
        assert_eq!(build(&[]), Ok(vec![]));
        let e = build(&["--mixed-prefill-contexts", "0"]).unwrap_err();
        assert!(e.starts_with("invalid --mixed-prefill-contexts"), "{e}");
        assert!(build(&["--mixed-prefill-contexts", "4q"]).is_err());
    }

    /// Every mode without sustained cells refuses the flag, naming itself.
    #[test]
    fn other_modes_refuse_it_in_one_line() {
        for (mode, needle) in [
            (vec!["--request-count", "8"], "--request-count"),
            (vec!["--run-burst"], "--run-burst"),
            (vec!["--request-rate", "2"], "--request-rate"),
            (vec!["--prefill-only"], "--prefill-only"),
            (vec!["--sessions", "4"], "--sessions"),
        ] {
            let mut args = vec!["--mixed-prefill-contexts", "4k"];
            args.extend(mode);
            let e = build(&args).unwrap_err();
            assert!(e.starts_with("invalid --mixed-prefill-contexts"), "{e}");
            assert!(e.contains(needle), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
