//! Which recorded flags `rerun` may replay from a result file, which may
//! come from someone else (docs/security.md, "Files never act on their
//! own"). A file may shape the measurement — matrix, durations, lengths,
//! sampling, load shape, SLOs, presentation — and nothing else: a flag that
//! runs a program, reads or writes a local path, listens on a port, talks
//! to an endpoint other than the server, chooses the server, or carries a
//! credential is left out unless the user gives it again (or passes
//! `--trust-recorded-flags`).
//!
//! Every benchmark flag is in exactly one of the two lists; a unit test
//! walks clap's definitions, so a new flag cannot be added unclassified.

/// Why a recorded flag is left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Risk {
    /// Names a program that the run starts.
    RunsProgram,
    /// Names a local file (or a folder, or stdin) that the run reads.
    ReadsFile,
    /// Names a local file that the run writes.
    WritesFile,
    /// Opens a listening port.
    Listens,
    /// Makes this process a shard: it leads (listening) or joins (connecting,
    /// proving the shard secret) other processes.
    Shard,
    /// Sends requests to an endpoint other than the measured server.
    OtherEndpoint,
    /// Chooses the measured server, which also receives the API key.
    ChoosesServer,
    /// Is a credential.
    Credential,
    /// Says how a command was started, not what it measured.
    Invocation,
    /// Not in either list (a flag newer than this classification).
    Unclassified,
}

impl Risk {
    /// The reason, as printed after a left-out flag.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Risk::RunsProgram => "runs a program",
            Risk::ReadsFile => "reads a local file",
            Risk::WritesFile => "writes a local file",
            Risk::Listens => "opens a listening port",
            Risk::Shard => "joins or leads other shard processes over the network",
            Risk::OtherEndpoint => "contacts an endpoint other than the server",
            Risk::ChoosesServer => "chooses the server (which receives the API key)",
            Risk::Credential => "carries a credential",
            Risk::Invocation => "says how a command was started",
            Risk::Unclassified => "is not classified as safe to replay",
        }
    }
}

/// Flags replayed from a result file: they shape what is measured and how
/// it is shown, and act only through requests to the server this
/// invocation measures. (`sim` only as a built-in scenario name: see
/// [`risk`].)
pub(crate) const REPLAYED: &[&str] = &[
    // the measured model and matrix
    "model",
    "api",
    "concurrency",
    "contexts",
    "max-tokens",
    "duration",
    "max-duration",
    "target-ci",
    "min-duration",
    "decode-warmup-seconds",
    "cell-warmup-timeout-seconds",
    "respect-eos",
    "max-error-rate",
    // energy and cost: arithmetic over what was measured, nothing acts
    // the interference probe: prompts to the same server after each window
    "mixed-prefill-contexts",
    "energy-baseline",
    "gpu-hour-price",
    "gpu-count",
    "wait-for-server",
    "stream-idle-timeout",
    "server-down-grace",
    "max-total-tokens",
    "kv-budget",
    "dcp-size",
    "token-targeting",
    "calibration-context",
    "no-calibration-cache",
    "prefill-contexts",
    "prefill-metric",
    "skip-prefill",
    "standalone-prefill",
    "prefill-duration",
    "prefill-only",
    "request-count",
    "warmup-request-count",
    "run-burst",
    "request-rate",
    "arrival",
    "seed",
    "max-in-flight",
    "stop-at-saturation",
    "burst-request-count",
    "burst-warmup-request-count",
    "burst-requests-per-concurrency",
    "temperature",
    "accept-len-ref",
    "metrics-interval",
    "repeat",
    // SLOs
    "slo",
    "slo-preset",
    "slo-search",
    "slo-bisect",
    // the built-in simulator (a scenario name; a path is read: see `risk`)
    "sim",
    "sim-engine",
    // presentation and sampling of this host
    "show-capacity-limited-values",
    "hw-monitor-interval",
    "no-hw-monitor",
    "hw-gpu-limit",
    "display-mode",
    "refresh-rate",
    "dry-run",
    // coding peak (requests to the same server)
    "coding-peak",
    "coding-peak-runs",
    "coding-peak-max-tokens",
    "coding-peak-prompt",
    "coding-peak-temperature",
    // completion statistics (a built-in profile, an inline prompt)
    "completion-stats",
    "test-profile",
    "prompt",
    "completion-stats-min-results",
    "completion-stats-runs",
    "completion-stats-concurrency",
    "completion-stats-concurrency-levels",
    "completion-stats-probe-waves",
    "completion-stats-min-improvement",
    "completion-stats-patience",
    "completion-stats-auto-stop",
    "no-completion-stats-auto-stop",
    "completion-stats-correct-regex",
    "completion-stats-score-source",
    "completion-stats-save-text",
    "completion-stats-no-prefill-scout",
    "completion-stats-temperature",
    "completion-stats-top-p",
    // fabric diagnostics, built-in measurements only (helpers are programs)
    "p2pmark",
    "p2pmark-only",
    "p2pmark-detail",
    "p2pmark-mode",
    "p2pmark-size-mb",
    "p2pmark-iters",
    "p2pmark-warmup",
    "p2pmark-latency-iters",
    "p2pmark-max-gpus",
    "p2pmark-allreduce-sizes-mb",
    "p2pmark-timeout",
    "amd-fabric",
    "amd-fabric-only",
    "amd-fabric-detail",
    "amd-fabric-size-mb",
    "amd-fabric-latency-mb",
    "amd-fabric-iters",
    "amd-fabric-warmup",
    "amd-fabric-threads",
    "amd-fabric-latency-iters",
    "amd-fabric-max-nodes",
    "amd-fabric-timeout",
    // prefix cache (its reset is a request to the same server)
    "shared-prefix-tokens",
    "prefix-groups",
    "reset-prefix-cache",
    "prefix-cache-block",
    // shard settings that only matter once --shards is given again
    "on-shard-loss",
    "shard-join-timeout",
    "ramp-seconds",
    // trace and session shape (the trace file itself is read: not replayed)
    "trace-format",
    "trace-speed",
    "trace-start",
    "trace-duration",
    "trace-limit",
    "trace-model",
    "trace-log-type",
    "trace-skip-bad",
    "trace-sort",
    "trace-tokenize-checks",
    "trace-sessions",
    "sessions",
    "turns",
    "user-tokens",
    "think-time",
    "replay-limit",
    // router headers: sent only to the measured server; a credential or
    // framing header name is refused and the value template expands only
    // {run} and {session} (docs/security.md)
    "session-header",
    "session-header-value",
    "replica-header",
    // what tool calls look like (the tools file itself is left out)
    "tool-choice",
    "tool-latency",
    "tool-result-tokens",
];

/// Flags never replayed from a result file, each with its reason.
pub(crate) const NOT_REPLAYED: &[(&str, Risk)] = &[
    ("p2pmark-bin", Risk::RunsProgram),
    ("amd-fabric-bin", Risk::RunsProgram),
    ("prompt-file", Risk::ReadsFile),
    ("profile-file", Risk::ReadsFile),
    ("dataset-file", Risk::ReadsFile),
    ("trace", Risk::ReadsFile),
    ("prompt-corpus", Risk::ReadsFile),
    ("tools", Risk::ReadsFile),
    ("compare-baseline", Risk::ReadsFile),
    ("compare-candidate", Risk::ReadsFile),
    ("resume", Risk::ReadsFile),
    ("config", Risk::ReadsFile),
    ("output", Risk::WritesFile),
    ("html", Risk::WritesFile),
    ("requests-jsonl", Risk::WritesFile),
    ("calibration-cache", Risk::WritesFile),
    ("metrics-listen", Risk::Listens),
    ("shards", Risk::Shard),
    ("shard-index", Risk::Shard),
    ("coordinator", Risk::Shard),
    ("coordinator-listen", Risk::Listens),
    ("start-at", Risk::Shard),
    ("metrics-url", Risk::OtherEndpoint),
    ("allow-download", Risk::OtherEndpoint),
    ("host", Risk::ChoosesServer),
    ("port", Risk::ChoosesServer),
    ("api-key", Risk::Credential),
    ("shard-secret", Risk::Credential),
    ("print-config", Risk::Invocation),
    ("help", Risk::Invocation),
    ("version", Risk::Invocation),
];

/// `None` when the recorded `--flag=value` may be replayed, else why not.
pub(crate) fn risk(flag: &str, value: &str) -> Option<Risk> {
    if flag == "sim" && !is_builtin_scenario(value) {
        return Some(Risk::ReadsFile);
    }
    if REPLAYED.contains(&flag) {
        return None;
    }
    Some(
        NOT_REPLAYED
            .iter()
            .find(|(f, _)| *f == flag)
            .map_or(Risk::Unclassified, |(_, r)| *r),
    )
}

/// A scenario compiled into the binary (anything else is a file to read).
pub(crate) fn is_builtin_scenario(name: &str) -> bool {
    ldb_sim::Scenario::builtin_names().contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_benchmark_flag_is_either_replayed_or_left_out_with_a_reason() {
        let mut unclassified = Vec::new();
        let mut twice = Vec::new();
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let replayed = REPLAYED.contains(&long);
            let left_out = NOT_REPLAYED.iter().any(|(f, _)| *f == long);
            match (replayed, left_out) {
                (false, false) => unclassified.push(long),
                (true, true) => twice.push(long),
                _ => {}
            }
        }
        assert!(
            unclassified.is_empty(),
            "classify these flags in rerun_policy.rs (REPLAYED only when a file from a stranger \
             may set them) and in docs/security.md: {unclassified:?}"
        );
        assert!(twice.is_empty(), "in both lists: {twice:?}");
        // and no stale names: each listed flag exists
        let known: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect();
        for f in REPLAYED.iter().chain(NOT_REPLAYED.iter().map(|(f, _)| f)) {
            assert!(known.iter().any(|k| k == f), "--{f} is not a flag any more");
        }
    }

    #[test]
    fn the_threat_model_writes_out_both_lists() {
        let doc = include_str!("../../../docs/security.md");
        let section = doc
            .split("\n## ")
            .find(|s| s.starts_with("Files never act on their own"))
            .expect("docs/security.md has the section");
        for f in REPLAYED.iter().chain(NOT_REPLAYED.iter().map(|(f, _)| f)) {
            assert!(
                section.contains(&format!("`--{f}`")),
                "docs/security.md does not list --{f}"
            );
        }
    }

    #[test]
    fn a_simulator_scenario_file_is_a_local_read() {
        assert_eq!(risk("sim", "quickstart"), None);
        assert_eq!(risk("sim", "/etc/passwd"), Some(Risk::ReadsFile));
        assert_eq!(risk("p2pmark-bin", "./x"), Some(Risk::RunsProgram));
        assert_eq!(risk("no-such-flag", "1"), Some(Risk::Unclassified));
    }
}
