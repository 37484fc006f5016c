//! Answer quality, kept apart from measuring a server: what a task is
//! (prompts with optional expected answers), how an answer is scored, the
//! datasets that make tasks, the pure statistics on top (accuracy intervals,
//! paired tests), and the completion-token statistics mode's result model
//! ([`cstats`]). Pure like `ldb-core`: no I/O, no clocks.
//!
//! The mode's runner (`ldb-runner`) sends a [`task::Task`]'s items and hands
//! each finished output to the task's [`score::Scorer`]; profiles and datasets
//! only produce tasks, so a new profile never touches the runner.

pub mod builtin;
pub mod cstats;
pub mod datasets;
pub mod mc_letter;
pub mod numeric;
pub mod paired;
pub mod regex_scorer;
pub mod score;
pub mod sha256;
pub mod stats;
pub mod task;
