//! Turning a profile request (`--test-profile`, `--profile-file`, a dataset)
//! into a [`Task`] the completion-stats mode runs. Reading files and the
//! dataset cache happens here; parsing and scoring are pure (`ldb_eval`).

mod dataset_files;
mod download;
mod profile_file;

use std::path::PathBuf;
use std::sync::Arc;

use ldb_eval::builtin::{LAMPS_ANSWER, LAMPS_PROMPT, NEEDLE_DEFAULT_TOKENS, needle};
use ldb_eval::datasets::{DatasetKind, parse, stride_select};
use ldb_eval::mc_letter::McLetterScorer;
use ldb_eval::numeric::{Gsm8kScorer, NumericExactScorer};
use ldb_eval::score::{ScoreSource, Scorer};
use ldb_eval::task::{Task, TaskDefaults, TaskItem};
use serde_json::Map;

pub use dataset_files::{Archive, Pin, default_cache_dir, pin, pin_for};

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct ProfileRequest {
    /// `--test-profile NAME` (built-in profile or alias).
    pub name: Option<String>,
    /// `--profile-file FILE` (TOML).
    pub file: Option<PathBuf>,
    /// `--dataset-file PATH`: read this file instead of the pinned one.
    pub dataset_file: Option<PathBuf>,
    /// `--allow-download`: fetch a missing dataset from its pinned location.
    pub allow_download: bool,
    /// Dataset cache directory (default under the user's cache dir).
    pub cache_dir: Option<PathBuf>,
    /// `--completion-stats-runs` when given: dataset profiles select this many
    /// evenly spread items.
    pub runs: Option<usize>,
    /// Test hook: replaces the dataset's pin (URL, sha256, record count) so
    /// tests can serve tiny files from a loopback server. `None` in the tool.
    pub pin_override: Option<Pin>,
}

/// Why a profile could not be turned into a task: one line naming the
/// profile, file or field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TaskError(pub String);

/// Built-in profile names (aliases resolve to these), for `--help` and
/// error messages.
pub const BUILTIN_PROFILES: &[&str] = &[
    "needle",
    "toggle-lamps",
    "gsm8k",
    "mmlu-pro",
    "gpqa-diamond",
];

/// Resolve `request` into a task, or say in one line why not.
pub fn load_profile(request: &ProfileRequest) -> Result<Task, TaskError> {
    match (&request.name, &request.file) {
        (Some(_), Some(_)) => Err(TaskError(
            "--test-profile and --profile-file are exclusive; give one".to_owned(),
        )),
        (Some(name), None) => builtin(name, request),
        (None, Some(file)) => profile_file::load(file, request),
        (None, None) => Err(TaskError("no profile given".to_owned())),
    }
}

/// The reference tool's own task names: their texts are not ours to ship,
/// so each points at our equivalent.
fn reference_only(name: &str) -> Option<&'static str> {
    match name {
        "estonia" | "estonia-long" => Some(
            "its long-context task text is not part of this benchmark; use `needle` (a generated \
             long-context retrieval task; pick the length as needle-32k, needle-128k, …)",
        ),
        "hotel-lights" | "hotel" | "lights" => Some(
            "its puzzle text is not part of this benchmark; use `toggle-lamps` (a short reasoning \
             puzzle with a numeric answer)",
        ),
        "lavd-test" | "lavd" | "ledger-lavd" => Some(
            "its ledger task is not part of this benchmark; use `needle` (a generated ledger whose \
             answer needs facts spread over the whole context)",
        ),
        _ => None,
    }
}

/// `needle`, `needle-32k`, `needle-32000` → the document length in tokens.
fn needle_tokens(name: &str) -> Option<usize> {
    if name == "needle" {
        return Some(NEEDLE_DEFAULT_TOKENS);
    }
    let size = name
        .strip_prefix("needle-")
        .or_else(|| name.strip_prefix("needle:"))?;
    let (digits, scale) = match size.strip_suffix('k') {
        Some(d) => (d, 1000),
        None => (size, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .map(|n| n * scale)
        .filter(|&n| (100..=2_000_000).contains(&n))
}

/// The dataset a profile name or alias stands for.
pub fn dataset_kind(name: &str) -> Option<DatasetKind> {
    match name {
        "gsm8k" | "gsm-8k" => Some(DatasetKind::Gsm8k),
        "mmlu-pro" | "mmlupro" | "mmlu-pro-1000" => Some(DatasetKind::MmluPro),
        "gpqa-diamond" | "gpqa" | "gpqa_diamond" => Some(DatasetKind::GpqaDiamond),
        _ => None,
    }
}

fn numeric(expected: u64) -> Arc<dyn Scorer> {
    Arc::new(NumericExactScorer {
        expected: Some(expected.to_string()),
        source: ScoreSource::FinalAnswer,
        tolerance: 0.0,
    })
}

/// A generated `needle` task of about `tokens` tokens.
pub fn needle_task(tokens: usize) -> Task {
    let n = needle(tokens);
    let mut t = Task::single_prompt(n.prompt, format!("profile:needle-{tokens}"), None);
    t.profile = format!("needle-{tokens}");
    t.title = "Long-Context Retrieval Test".to_owned();
    t.description = format!(
        "Generated warehouse ledger of about {tokens} tokens; the answer needs the last moves of \
         two crates spread over the whole document (numeric, scored exactly)."
    );
    t.items[0].expected_answer = Some(n.answer.to_string());
    t.scorer = Some(numeric(n.answer));
    t.defaults = TaskDefaults {
        max_tokens: Some(16384),
        concurrency: Some(8),
        runs: Some(16),
        ..Default::default()
    };
    t
}

fn lamps_task() -> Task {
    let mut t = Task::single_prompt(
        LAMPS_PROMPT.to_owned(),
        "profile:toggle-lamps".to_owned(),
        None,
    );
    t.profile = "toggle-lamps".to_owned();
    t.title = "Toggle Lamps Reasoning Test".to_owned();
    t.description =
        "Short reasoning puzzle (60 lamps, divisor passes, two resets); numeric answer 23."
            .to_owned();
    t.items[0].expected_answer = Some(LAMPS_ANSWER.to_string());
    t.scorer = Some(numeric(LAMPS_ANSWER));
    t.defaults = TaskDefaults {
        max_tokens: Some(0),
        concurrency: Some(30),
        runs: Some(30),
        ..Default::default()
    };
    t
}

fn builtin(name: &str, request: &ProfileRequest) -> Result<Task, TaskError> {
    let name = name.trim();
    if let Some(why) = reference_only(name) {
        return Err(TaskError(format!(
            "test profile {name:?} is the reference tool's: {why}"
        )));
    }
    if let Some(tokens) = needle_tokens(name) {
        return Ok(needle_task(tokens));
    }
    if matches!(name, "toggle-lamps" | "lamps") {
        return Ok(lamps_task());
    }
    if let Some(kind) = dataset_kind(name) {
        return dataset_task(kind, request);
    }
    Err(TaskError(format!(
        "unknown test profile {name:?} (built-in: {})",
        BUILTIN_PROFILES.join(", ")
    )))
}

/// A dataset profile: read, parse, select `request.runs` items.
pub fn dataset_task(kind: DatasetKind, request: &ProfileRequest) -> Result<Task, TaskError> {
    let read = dataset_files::read_dataset(kind, request)?;
    let parsed =
        parse(kind, &read.text).map_err(|e| TaskError(format!("{}: {e}", read.info.path)))?;
    if parsed.items.is_empty() {
        return Err(TaskError(format!("{}: no records", read.info.path)));
    }
    let mut info = read.info;
    info.items_total = parsed.items.len();
    let expected_rows = pin_for(kind, request).rows;
    if info.source == "dataset-file" && info.items_total != expected_rows {
        let count = format!(
            "{} records instead of the published {expected_rows}",
            info.items_total
        );
        info.note = if info.note.is_empty() {
            count
        } else {
            format!("{count}; {}", info.note)
        };
    } else if info.source != "dataset-file" && info.items_total != expected_rows {
        return Err(TaskError(format!(
            "{}: {} records, the published file has {expected_rows}",
            info.path, info.items_total
        )));
    }
    let picked = stride_select(parsed.items.len(), request.runs.unwrap_or(0));
    let items: Vec<TaskItem> = picked.iter().map(|&i| parsed.items[i].clone()).collect();
    let (title, scorer): (&str, Arc<dyn Scorer>) = match kind {
        DatasetKind::Gsm8k => ("GSM8K Accuracy Benchmark", Arc::new(Gsm8kScorer)),
        DatasetKind::MmluPro => (
            "MMLU-Pro Accuracy Benchmark",
            Arc::new(McLetterScorer {
                options_per_item: parsed.options.clone(),
            }),
        ),
        DatasetKind::GpqaDiamond => (
            "GPQA Diamond Accuracy Benchmark",
            Arc::new(McLetterScorer {
                options_per_item: parsed.options.clone(),
            }),
        ),
    };
    let profile = match kind {
        DatasetKind::Gsm8k => "gsm8k",
        DatasetKind::MmluPro => "mmlu-pro",
        DatasetKind::GpqaDiamond => "gpqa-diamond",
    };
    Ok(Task {
        profile: profile.to_owned(),
        description: format!(
            "Accuracy on {} ({} of {} items) with the completion tokens each answer needs.",
            kind.name(),
            items.len(),
            info.items_total
        ),
        title: title.to_owned(),
        prompt_source: format!("profile:{profile}"),
        system_prompt: None,
        defaults: TaskDefaults {
            max_tokens: Some(131_072),
            temperature: Some(0.0),
            concurrency: Some(30),
            runs: Some(items.len()),
            no_prefill_scout: true,
            score_source: None,
        },
        items,
        one_item_per_run: true,
        scorer: Some(scorer),
        request_overrides: Map::new(),
        dataset: Some(info),
    })
}

#[cfg(test)]
mod download_tests;
#[cfg(test)]
mod tests;
