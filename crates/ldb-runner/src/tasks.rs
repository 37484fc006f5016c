//! Turning a profile request (`--test-profile`, `--profile-file`, a dataset)
//! into a [`Task`] the completion-stats mode runs. Reading files and the
//! dataset cache happens here; parsing and scoring are pure (`ldb_core::eval`).

use std::path::PathBuf;

use ldb_core::eval::task::Task;

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
}

/// Why a profile could not be turned into a task: one line naming the
/// profile, file or field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TaskError(pub String);

/// Resolve `request` into a task, or say in one line why not.
pub fn load_profile(request: &ProfileRequest) -> Result<Task, TaskError> {
    match (&request.name, &request.file) {
        (Some(name), _) => Err(TaskError(format!("unknown test profile {name:?}"))),
        (None, Some(file)) => Err(TaskError(format!(
            "{}: profile files are not supported yet",
            file.display()
        ))),
        (None, None) => Err(TaskError("no profile given".to_owned())),
    }
}
