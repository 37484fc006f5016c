//! Completion-token statistics mode: the pure parts. What one run recorded,
//! the summaries over runs, the adaptive concurrency rule, the accuracy
//! interval, and the result document. The runner (`ldb-runner::cstats`)
//! sends the requests; everything here is arithmetic on what came back.

pub mod active;
pub mod adaptive;
pub mod document;
pub mod live;
mod notes;
pub mod run;
pub mod summary;

pub use active::{ActiveSet, ActiveStream, LATEST_CHARS, StreamStatus, latest_line};
pub use adaptive::{AdaptiveRule, LevelVerdict, normalize_levels};
pub use document::{
    Accuracy, CategorySummary, CsDocument, CsMetadata, CsMethodology, LevelSummary,
};
pub use live::{CsEvent, CsLive, LiveLevel};
pub use run::{CsRun, Phase};
pub use summary::{DistSpread, RunSummary, summarize_runs, union_seconds};
