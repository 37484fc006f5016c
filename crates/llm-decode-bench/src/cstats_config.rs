//! The completion-stats configuration from the command line: the prompt
//! source, the task, and the profile defaults under the explicit flags.
//! Every check runs here, before anything is sent; each failure is one line
//! (exit code 2).

use std::io::Read;
use std::sync::Arc;

use ldb_eval::cstats::normalize_levels;
use ldb_eval::regex_scorer::RegexScorer;
use ldb_eval::score::{ScoreSource, Scorer};
use ldb_eval::task::Task;
use ldb_runner::cstats::CsConfig;
use ldb_runner::tasks::{ProfileRequest, load_profile};

use crate::cli::BenchArgs;
use crate::cli_cstats::{
    CsArgs, DEFAULT_LEVELS, DEFAULT_MAX_TOKENS, DEFAULT_MIN_RESULTS, DEFAULT_REGEX,
};
use crate::config::{ConfigError, build};

const SOURCES: &str = "--prompt, --prompt-file, --test-profile or --profile-file";

fn bad(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// Build the configuration, or say in one line what is wrong.
pub fn build_cs(a: &mut BenchArgs, argv: Vec<String>) -> Result<CsConfig, ConfigError> {
    refuse_matrix_flags(a)?;
    let c = &a.cstats;
    check_numbers(c)?;
    let regex = c.completion_stats_correct_regex.clone();
    let source = score_source(c)?;
    // the regex is checked before the task is loaded: a typo costs nothing
    if let Some(r) = regex.as_deref().filter(|r| !r.is_empty()) {
        RegexScorer::new(r, ScoreSource::FinalAnswer).map_err(bad)?;
    }
    let levels_spec = c
        .completion_stats_concurrency_levels
        .clone()
        .unwrap_or_else(|| DEFAULT_LEVELS.to_owned());
    let levels = normalize_levels(&levels_spec).map_err(bad)?;
    let mut task = load_task(c)?;
    let profile = !task.profile.is_empty() || c.profile_file.is_some();
    let score_source = source.or(task.defaults.score_source).unwrap_or_default();
    // the generic scorer: a custom prompt always, a profile only when the
    // regex is given explicitly
    let pattern = match (&regex, profile) {
        (Some(r), _) => Some(r.clone()),
        (None, false) => Some(DEFAULT_REGEX.to_owned()),
        (None, true) => None,
    };
    if let Some(p) = &pattern {
        task.scorer = if p.is_empty() {
            None
        } else {
            let s: Arc<dyn Scorer> = Arc::new(RegexScorer::new(p, score_source).map_err(bad)?);
            Some(s)
        };
    }
    let d = task.defaults.clone();
    let max_tokens = match a.max_tokens {
        Some(n) => Some(n),
        None if profile => d.max_tokens.or(Some(DEFAULT_MAX_TOKENS)),
        None => Some(DEFAULT_MAX_TOKENS),
    }
    .filter(|n| *n > 0);
    let fixed_concurrency = match c.completion_stats_concurrency {
        Some(0) => None,
        Some(n) => Some(n),
        None if c.completion_stats_concurrency_levels.is_some() => None,
        None => d.concurrency.filter(|n| *n > 0),
    };
    let items = task.items.len();
    let mut requested_runs = match c.completion_stats_runs {
        Some(n) => n,
        None if c.completion_stats_min_results.is_some() => 0,
        None => d
            .runs
            .or_else(|| task.one_item_per_run.then_some(items))
            .unwrap_or(0),
    };
    let mut min_results = c
        .completion_stats_min_results
        .unwrap_or(DEFAULT_MIN_RESULTS);
    if requested_runs > 0 {
        min_results = requested_runs;
    }
    if task.one_item_per_run {
        min_results = min_results.min(items).max(1);
        requested_runs = requested_runs.min(items);
    }
    let prefill_scout = !(c.completion_stats_no_prefill_scout || d.no_prefill_scout);
    let temperature = c.completion_stats_temperature.or(d.temperature);
    let correct_regex = match &task.scorer {
        Some(s) if s.name() == "regex" => pattern.clone().unwrap_or_default(),
        _ => String::new(),
    };
    let cs = CsConfig {
        base: base_config(a, argv)?,
        task,
        max_tokens,
        fixed_concurrency,
        requested_runs,
        min_results,
        levels,
        probe_waves: a.cstats.completion_stats_probe_waves.unwrap_or(1),
        min_improvement: a.cstats.completion_stats_min_improvement.unwrap_or(0.03),
        patience: a.cstats.completion_stats_patience.unwrap_or(1),
        auto_stop: !a.cstats.no_completion_stats_auto_stop,
        correct_regex,
        score_source,
        save_text: a.cstats.completion_stats_save_text,
        prefill_scout,
        temperature,
        top_p: a.cstats.completion_stats_top_p,
    };
    Ok(cs)
}

/// The shared settings (server, model, KV, timeouts, output). The matrix's
/// own checks reject `--max-tokens 0`, which this mode allows (no cap), so
/// they see a placeholder.
fn base_config(a: &mut BenchArgs, argv: Vec<String>) -> Result<ldb_runner::RunConfig, ConfigError> {
    let max_tokens = a.max_tokens.replace(1);
    let base = build(a, a.sim.is_some(), argv);
    a.max_tokens = max_tokens;
    base
}

/// The decode matrix's own flags have no meaning here.
fn refuse_matrix_flags(a: &BenchArgs) -> Result<(), ConfigError> {
    for (flag, on) in [
        ("--resume", a.resume),
        ("--dry-run", a.dry_run),
        ("--html", a.html.is_some()),
        ("--requests-jsonl", a.requests_jsonl.is_some()),
        ("--slo", a.slo.is_some()),
        (
            "--mixed-prefill-contexts",
            a.mixed.mixed_prefill_contexts.is_some(),
        ),
    ] {
        if on {
            return Err(bad(format!(
                "{flag} applies to the decode matrix, not to the completion-stats mode"
            )));
        }
    }
    Ok(())
}

/// `--completion-stats-score-source`, when given.
fn score_source(c: &CsArgs) -> Result<Option<ScoreSource>, ConfigError> {
    c.completion_stats_score_source
        .as_deref()
        .map(|s| {
            ScoreSource::parse(s).ok_or_else(|| {
                bad(format!(
                    "invalid --completion-stats-score-source: {s:?} (use final_answer, content or output)"
                ))
            })
        })
        .transpose()
}

fn check_numbers(c: &CsArgs) -> Result<(), ConfigError> {
    let at_least_one = [
        (
            "--completion-stats-min-results",
            c.completion_stats_min_results,
        ),
        (
            "--completion-stats-probe-waves",
            c.completion_stats_probe_waves,
        ),
        ("--completion-stats-patience", c.completion_stats_patience),
    ];
    for (flag, v) in at_least_one {
        if v == Some(0) {
            return Err(bad(format!("invalid {flag}: must be at least 1")));
        }
    }
    if let Some(m) = c.completion_stats_min_improvement
        && !(m.is_finite() && m >= 0.0)
    {
        return Err(bad(format!(
            "invalid --completion-stats-min-improvement: {m} (must be a number >= 0)"
        )));
    }
    if let Some(t) = c.completion_stats_temperature
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(bad(format!(
            "invalid --completion-stats-temperature: {t} (must be a number >= 0)"
        )));
    }
    if let Some(p) = c.completion_stats_top_p
        && !(p.is_finite() && p > 0.0 && p <= 1.0)
    {
        return Err(bad(format!(
            "invalid --completion-stats-top-p: {p} (must be in (0, 1])"
        )));
    }
    Ok(())
}

/// The task from the one prompt source given.
fn load_task(c: &CsArgs) -> Result<Task, ConfigError> {
    let given: Vec<&str> = [
        ("--prompt", c.prompt.is_some()),
        ("--prompt-file", c.prompt_file.is_some()),
        ("--test-profile", c.test_profile.is_some()),
        ("--profile-file", c.profile_file.is_some()),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(f, _)| *f)
    .collect();
    if given.len() > 1 {
        return Err(bad(format!(
            "{} conflict: give one prompt source ({SOURCES})",
            given.join(" and ")
        )));
    }
    let profile = c.test_profile.is_some() || c.profile_file.is_some();
    if !profile {
        for (flag, on) in [
            ("--dataset-file", c.dataset_file.is_some()),
            ("--allow-download", c.allow_download),
        ] {
            if on {
                return Err(bad(format!(
                    "{flag} needs a dataset profile (--test-profile or --profile-file)"
                )));
            }
        }
    }
    if profile {
        let req = ProfileRequest {
            name: c.test_profile.clone(),
            file: c.profile_file.clone(),
            dataset_file: c.dataset_file.clone(),
            allow_download: c.allow_download,
            cache_dir: None,
            runs: c.completion_stats_runs.filter(|n| *n > 0),
            pin_override: None,
        };
        return load_profile(&req).map_err(|e| bad(e.to_string()));
    }
    let (prompt, source) = match (&c.prompt, &c.prompt_file) {
        (Some(p), _) => (p.clone(), "inline --prompt".to_owned()),
        (None, Some(f)) => read_prompt_file(f)?,
        (None, None) => {
            return Err(bad(format!(
                "--completion-stats needs a prompt: give {SOURCES} (the reference's default \
                 profile is not part of this tool)"
            )));
        }
    };
    if prompt.trim().is_empty() {
        return Err(bad(format!("the prompt from {source} is empty")));
    }
    Ok(Task::single_prompt(prompt, source, None))
}

/// `--prompt-file`: a UTF-8 file, or standard input for `-`.
fn read_prompt_file(f: &str) -> Result<(String, String), ConfigError> {
    let (bytes, source) = if f == "-" {
        let mut b = Vec::new();
        std::io::stdin()
            .read_to_end(&mut b)
            .map_err(|e| bad(format!("--prompt-file -: cannot read standard input: {e}")))?;
        (b, "stdin".to_owned())
    } else {
        let b = std::fs::read(f).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                _ => e.to_string(),
            };
            bad(format!("--prompt-file {f}: cannot read: {why}"))
        })?;
        (b, format!("file:{f}"))
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        bad(format!(
            "--prompt-file {f}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok((text, source))
}
