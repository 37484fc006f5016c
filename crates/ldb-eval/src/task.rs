//! A task: the prompts a completion-stats run sends, with what is known about
//! the right answers, and the defaults a profile brings.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::score::{ScoreSource, Scorer};

/// One prompt of a task. Plain prompts have a single item that every run
/// repeats; dataset profiles have one item per dataset record.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskItem {
    /// Stable id used to pair runs across results (`gsm8k-0001`); `None` for
    /// a repeated plain prompt.
    pub item_id: Option<String>,
    /// Category for per-category summaries (dataset subject), if any.
    pub category: Option<String>,
    /// The user message.
    pub prompt: String,
    /// The expected answer as the scorer reads it, if known.
    pub expected_answer: Option<String>,
}

/// Request and run defaults a profile brings; a flag given on the command
/// line always wins over these.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskDefaults {
    /// `max_tokens` to send; `Some(0)` means "omit the field" (no client cap).
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Fixed concurrency (no adaptive probe).
    pub concurrency: Option<usize>,
    /// Measured runs.
    pub runs: Option<usize>,
    /// Skip the `max_tokens = 1` prefill scout.
    pub no_prefill_scout: bool,
    /// Where the scorer reads the answer.
    pub score_source: Option<ScoreSource>,
}

/// Where a dataset task's records came from, recorded in the result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatasetInfo {
    /// Dataset name (`gsm8k_test`).
    pub name: String,
    /// File the records were read from.
    pub path: String,
    /// `pinned-cache`, `download`, `dataset-file`, …
    pub source: String,
    /// sha256 of the file as read (hex).
    pub sha256: String,
    /// Records in the file.
    pub items_total: usize,
    /// A note when the file differs from the pinned one (a `--dataset-file`
    /// subset), else empty.
    pub note: String,
}

/// Everything the completion-stats runner needs to know about what to send
/// and how to judge it.
#[derive(Clone)]
pub struct Task {
    /// Profile name (`gsm8k`), or `""` for an inline prompt / prompt file.
    pub profile: String,
    /// One line saying what the task measures.
    pub description: String,
    /// Title for the report and the live view.
    pub title: String,
    /// `profile:<name>`, `file:<path>`, `stdin` or `inline --prompt`.
    pub prompt_source: String,
    /// Optional system message sent before every item.
    pub system_prompt: Option<String>,
    /// The prompts; never empty.
    pub items: Vec<TaskItem>,
    /// `true` when each run takes a distinct item (datasets); `false` when
    /// every run repeats `items[0]`.
    pub one_item_per_run: bool,
    /// Judges an output; `None` when scoring is off.
    pub scorer: Option<Arc<dyn Scorer>>,
    /// Profile defaults.
    pub defaults: TaskDefaults,
    /// Extra JSON fields merged into every request body.
    pub request_overrides: Map<String, Value>,
    /// Dataset provenance, for dataset tasks.
    pub dataset: Option<DatasetInfo>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("profile", &self.profile)
            .field("prompt_source", &self.prompt_source)
            .field("items", &self.items.len())
            .field("one_item_per_run", &self.one_item_per_run)
            .field("scorer", &self.scorer.as_ref().map(|s| s.name().to_owned()))
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl Task {
    /// A task that repeats one prompt, scored by `scorer` if given.
    pub fn single_prompt(
        prompt: String,
        prompt_source: String,
        scorer: Option<Arc<dyn Scorer>>,
    ) -> Task {
        Task {
            profile: String::new(),
            description: "Completion-token statistics for a custom prompt".to_owned(),
            title: "Completion Token Statistics".to_owned(),
            prompt_source,
            system_prompt: None,
            items: vec![TaskItem {
                item_id: None,
                category: None,
                prompt,
                expected_answer: None,
            }],
            one_item_per_run: false,
            scorer,
            defaults: TaskDefaults::default(),
            request_overrides: Map::new(),
            dataset: None,
        }
    }

    /// The item run number `run_index` (0-based) sends.
    pub fn item_for_run(&self, run_index: usize) -> Option<&TaskItem> {
        if self.one_item_per_run {
            self.items.get(run_index)
        } else {
            self.items.first()
        }
    }
}
