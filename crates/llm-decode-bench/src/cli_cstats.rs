//! Flags of the completion-token statistics mode (names, aliases and
//! defaults of the reference tool). `None` means "not on the command line":
//! a profile's default applies only then. Validation is in `cstats_config.rs`.

use std::path::PathBuf;

use clap::Args;

/// The reference's default probe levels.
pub const DEFAULT_LEVELS: &str = "1,2,4,8,16,30";
/// The reference's default scorer regex.
pub const DEFAULT_REGEX: &str = r"\bestonia\b";
/// Completed runs wanted by default.
pub const DEFAULT_MIN_RESULTS: usize = 30;
/// `max_tokens` when neither the flag nor a profile sets one.
pub const DEFAULT_MAX_TOKENS: u64 = 40_000;

/// Completion-stats flags.
#[derive(Debug, Args, Default)]
#[command(next_help_heading = "Completion-token statistics")]
pub struct CsArgs {
    /// Measure completion tokens, correctness and the fastest concurrency for one task instead of
    /// the decode matrix (needs --prompt, --prompt-file, --test-profile or --profile-file).
    #[arg(long)]
    pub completion_stats: bool,
    /// Built-in test profile (implies --completion-stats).
    #[arg(long, visible_alias = "profile", value_name = "NAME")]
    pub test_profile: Option<String>,
    /// A TOML profile file (implies --completion-stats).
    #[arg(long, value_name = "FILE")]
    pub profile_file: Option<PathBuf>,
    /// Read the profile's dataset from this file instead of the pinned one.
    #[arg(long, value_name = "FILE")]
    pub dataset_file: Option<PathBuf>,
    /// Let a dataset profile download a missing dataset from its pinned URL
    /// (cached only if its sha256 matches the pin).
    #[arg(long)]
    pub allow_download: bool,
    /// Inline prompt for --completion-stats.
    #[arg(long, allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// Prompt file for --completion-stats (`-` = standard input); UTF-8 text.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub prompt_file: Option<String>,
    /// Completed runs wanted at the selected concurrency (adaptive) [default: 30].
    #[arg(long, value_name = "N")]
    pub completion_stats_min_results: Option<usize>,
    /// Exact number of measured requests (> 0 replaces --completion-stats-min-results) [default: 0].
    #[arg(long, visible_alias = "profile-runs", value_name = "N")]
    pub completion_stats_runs: Option<usize>,
    /// Fixed concurrency; 0 = the adaptive probe [default: 0].
    #[arg(long, visible_alias = "profile-concurrency", value_name = "C")]
    pub completion_stats_concurrency: Option<usize>,
    /// Adaptive probe levels, comma separated (blanks skipped, 1 added) [default: 1,2,4,8,16,30].
    #[arg(long, value_name = "LIST")]
    pub completion_stats_concurrency_levels: Option<String>,
    /// Probe size = C × waves [default: 1].
    #[arg(long, value_name = "N")]
    pub completion_stats_probe_waves: Option<usize>,
    /// Relative gain of aggregate gen tok/s a level needs to count as better [default: 0.03].
    #[arg(long, value_parser = crate::cli_float::number, value_name = "FRACTION")]
    pub completion_stats_min_improvement: Option<f64>,
    /// Levels without improvement before the probe stops [default: 1].
    #[arg(long, value_name = "N")]
    pub completion_stats_patience: Option<usize>,
    /// Stop probing after --completion-stats-patience levels without improvement (default on).
    #[arg(long, overrides_with = "no_completion_stats_auto_stop")]
    pub completion_stats_auto_stop: bool,
    /// Probe every level.
    #[arg(long, overrides_with = "completion_stats_auto_stop")]
    pub no_completion_stats_auto_stop: bool,
    /// Case-insensitive regex a correct answer matches; empty turns scoring off
    /// [default: \bestonia\b; a profile brings its own scorer].
    #[arg(long, value_name = "REGEX", allow_hyphen_values = true)]
    pub completion_stats_correct_regex: Option<String>,
    /// Text the regex reads: final_answer (last non-empty line), content or output [default: final_answer].
    #[arg(long, value_name = "SOURCE")]
    pub completion_stats_score_source: Option<String>,
    /// Keep whole reasoning/content texts (and a 240-character excerpt) in the result.
    #[arg(long)]
    pub completion_stats_save_text: bool,
    /// Skip the max_tokens = 1 prefill scout.
    #[arg(long)]
    pub completion_stats_no_prefill_scout: bool,
    /// `temperature` sent with every request (default: none, or the profile's).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "T", allow_hyphen_values = true)]
    pub completion_stats_temperature: Option<f64>,
    /// `top_p` sent with every request (default: none).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "P", allow_hyphen_values = true)]
    pub completion_stats_top_p: Option<f64>,
}

impl CsArgs {
    /// The mode is on: the flag, or a profile.
    pub fn mode(&self) -> bool {
        self.completion_stats || self.test_profile.is_some() || self.profile_file.is_some()
    }

    /// The first flag that only means something in this mode, when given
    /// outside it.
    pub fn stray_flag(&self) -> Option<&'static str> {
        let flags: [(&str, bool); 19] = [
            ("--prompt", self.prompt.is_some()),
            ("--prompt-file", self.prompt_file.is_some()),
            ("--dataset-file", self.dataset_file.is_some()),
            ("--allow-download", self.allow_download),
            (
                "--completion-stats-min-results",
                self.completion_stats_min_results.is_some(),
            ),
            (
                "--completion-stats-runs",
                self.completion_stats_runs.is_some(),
            ),
            (
                "--completion-stats-concurrency",
                self.completion_stats_concurrency.is_some(),
            ),
            (
                "--completion-stats-concurrency-levels",
                self.completion_stats_concurrency_levels.is_some(),
            ),
            (
                "--completion-stats-probe-waves",
                self.completion_stats_probe_waves.is_some(),
            ),
            (
                "--completion-stats-min-improvement",
                self.completion_stats_min_improvement.is_some(),
            ),
            (
                "--completion-stats-patience",
                self.completion_stats_patience.is_some(),
            ),
            (
                "--completion-stats-auto-stop",
                self.completion_stats_auto_stop,
            ),
            (
                "--no-completion-stats-auto-stop",
                self.no_completion_stats_auto_stop,
            ),
            (
                "--completion-stats-correct-regex",
                self.completion_stats_correct_regex.is_some(),
            ),
            (
                "--completion-stats-score-source",
                self.completion_stats_score_source.is_some(),
            ),
            (
                "--completion-stats-save-text",
                self.completion_stats_save_text,
            ),
            (
                "--completion-stats-no-prefill-scout",
                self.completion_stats_no_prefill_scout,
            ),
            (
                "--completion-stats-temperature",
                self.completion_stats_temperature.is_some(),
            ),
            (
                "--completion-stats-top-p",
                self.completion_stats_top_p.is_some(),
            ),
        ];
        flags.iter().find(|(_, on)| *on).map(|(f, _)| *f)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    fn parse(args: &[&str]) -> super::CsArgs {
        let argv = std::iter::once("x").chain(args.iter().copied());
        Cli::try_parse_from(argv).expect("parses").bench.cstats
    }

    #[test]
    fn the_reference_aliases_parse() {
        let c = parse(&[
            "--profile",
            "gsm8k",
            "--profile-runs",
            "5",
            "--profile-concurrency",
            "3",
        ]);
        assert_eq!(c.test_profile.as_deref(), Some("gsm8k"));
        assert_eq!(
            (c.completion_stats_runs, c.completion_stats_concurrency),
            (Some(5), Some(3))
        );
        assert!(c.mode());
        let c = parse(&[
            "--completion-stats",
            "--prompt",
            "p",
            "--no-completion-stats-auto-stop",
        ]);
        assert!(c.no_completion_stats_auto_stop && !c.completion_stats_auto_stop);
        let c = parse(&[
            "--no-completion-stats-auto-stop",
            "--completion-stats-auto-stop",
        ]);
        assert!(!c.no_completion_stats_auto_stop, "the last one wins");
        // unset flags stay unset, so profile defaults can tell
        let c = parse(&["--completion-stats", "--prompt-file", "-"]);
        assert_eq!(c.completion_stats_min_results, None);
        assert_eq!(c.prompt_file.as_deref(), Some("-"));
    }

    #[test]
    fn a_flag_outside_the_mode_is_named() {
        assert_eq!(parse(&["--prompt", "p"]).stray_flag(), Some("--prompt"));
        assert_eq!(parse(&[]).stray_flag(), None);
        assert!(!parse(&["--prompt", "p"]).mode());
    }
}
