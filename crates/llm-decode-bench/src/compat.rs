//! Flags of the reference tool that this benchmark does not have. Command
//! lines copied from the reference should not end in clap's bare
//! "unexpected argument": each such flag gets one line saying what became of
//! it (docs/compat.md has the whole table).

/// Why a reference flag is not here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// The reference's GPU-fabric diagnostics run helper binaries it ships
    /// (CUDA peer-to-peer, AMD xGMI); they measure the interconnect, not the
    /// server, and are best run on their own.
    Fabric,
}

impl Gap {
    fn explain(self) -> &'static str {
        match self {
            Gap::Fabric => {
                "the reference's GPU fabric diagnostics (P2P / xGMI helper binaries) are not part \
                 of this benchmark; run those tools on their own"
            }
        }
    }
}

/// Every reference flag without a counterpart here.
const MISSING: &[(&str, Gap)] = &[
    ("--p2pmark", Gap::Fabric),
    ("--p2pmark-only", Gap::Fabric),
    ("--p2pmark-detail", Gap::Fabric),
    ("--p2pmark-bin", Gap::Fabric),
    ("--p2pmark-mode", Gap::Fabric),
    ("--p2pmark-size-mb", Gap::Fabric),
    ("--p2pmark-iters", Gap::Fabric),
    ("--p2pmark-warmup", Gap::Fabric),
    ("--p2pmark-latency-iters", Gap::Fabric),
    ("--p2pmark-max-gpus", Gap::Fabric),
    ("--p2pmark-allreduce-sizes-mb", Gap::Fabric),
    ("--p2pmark-timeout", Gap::Fabric),
    ("--amd-fabric", Gap::Fabric),
    ("--amd-fabric-only", Gap::Fabric),
    ("--amd-fabric-detail", Gap::Fabric),
    ("--amd-fabric-bin", Gap::Fabric),
    ("--amd-fabric-size-mb", Gap::Fabric),
    ("--amd-fabric-latency-mb", Gap::Fabric),
    ("--amd-fabric-iters", Gap::Fabric),
    ("--amd-fabric-warmup", Gap::Fabric),
    ("--amd-fabric-threads", Gap::Fabric),
    ("--amd-fabric-latency-iters", Gap::Fabric),
    ("--amd-fabric-max-nodes", Gap::Fabric),
    ("--amd-fabric-timeout", Gap::Fabric),
];

/// The first reference-only flag on the command line (as `--flag` or
/// `--flag=value`, before any `--`), with the one-line message for it.
pub fn reference_only_flag(argv: &[String]) -> Option<String> {
    argv.iter()
        .skip(1)
        .take_while(|a| a.as_str() != "--")
        .find_map(|arg| {
            let name = arg.split_once('=').map_or(arg.as_str(), |(n, _)| n);
            MISSING
                .iter()
                .find(|(flag, _)| *flag == name)
                .map(|(flag, gap)| format!("{flag}: {} (see docs/compat.md)", gap.explain()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<String> {
        std::iter::once("llm-decode-bench")
            .chain(args.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_reference_only_flag_is_named_with_what_became_of_it() {
        let m = reference_only_flag(&argv(&["--host", "x", "--p2pmark-only"])).expect("found");
        assert!(
            m.starts_with("--p2pmark-only: the reference's GPU fabric"),
            "{m}"
        );
        // the completion-stats flags and the paired comparison are ours now
        assert_eq!(reference_only_flag(&argv(&["--test-profile=gsm8k"])), None);
        assert_eq!(
            reference_only_flag(&argv(&["--compare-baseline", "a.json"])),
            None
        );
    }

    #[test]
    fn our_own_flags_and_values_pass() {
        assert_eq!(reference_only_flag(&argv(&["--concurrency", "1,2"])), None);
        // A value that looks like a flag after `--` is not a flag.
        assert_eq!(reference_only_flag(&argv(&["--", "--p2pmark"])), None);
        // Prefixes are clap's business (and ambiguous here): not matched.
        assert_eq!(reference_only_flag(&argv(&["--p2p"])), None);
    }

    #[test]
    fn no_missing_flag_is_also_one_of_ours() {
        use clap::CommandFactory;
        let cmd = crate::cli::Cli::command();
        let ours: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for (flag, _) in MISSING {
            assert!(!ours.contains(&flag.to_string()), "{flag} is ours too");
        }
    }
}
