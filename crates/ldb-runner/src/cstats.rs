//! The completion-token statistics mode: how many tokens a model spends on a
//! task's answer, whether the answer is right, and at which concurrency the
//! server decodes such answers fastest. It shares the client, discovery, the
//! KV-budget probe and the hardware sampler with the decode matrix; the
//! arithmetic lives in `ldb_eval::cstats`.

mod batch;
mod config;
mod flow;
mod meta;
mod request;

pub use config::CsConfig;
pub use flow::{CsEvent, CsHooks, CsOutcome, run_completion_stats};
