//! Phases and cells of llm-decode-bench.
//!
//! `run::run` drives a whole benchmark against one server: discovery, KV
//! budget, prompt sizing, prefill scouts, the hidden decode warmup, and the
//! sustained-decode matrix, saving the result document after every cell.
//! Measurement formulas live in `ldb-core`; HTTP in `ldb-client`.

mod assemble;
pub mod burst;
mod cache_granularity;
mod cache_reset;
mod calibration_cache;
pub mod cell;
mod cell_io;
mod cell_timeline;
mod cell_view;
mod cell_window;
pub mod client_load;
pub mod coding_peak;
mod cold;
pub mod config;
mod confirm_read;
pub mod cstats;
pub mod ctx;
mod energy;
mod interference;
pub mod kvbudget;
pub mod live;
mod loop_lag;
mod matrix;
pub mod open_loop;
mod open_loop_send;
pub mod plan;
mod pool;
pub mod prefill;
mod prefill_phase;
pub mod prefix;
pub mod prefix_achieved;
pub mod prefix_groups;
mod prefix_run;
pub mod prompts;
mod recorder;
pub mod replay;
mod replicas;
pub mod rerun;
pub mod resume;
pub mod run;
pub mod selftest;
mod server_watch;
pub mod shard;
pub mod shared_prefix;
mod slo_search;
mod stall;
pub mod standalone;
mod startup;
pub mod tasks;
mod ttft_breakdown;
mod window_stop;

pub use config::{PrefillMetric, RunConfig};
pub use ctx::{Controls, Hardware};
pub use live::Live;
pub use run::{RunError, RunHooks, RunOutcome, run, run_with};
pub use shard::CellExecutor;
