//! # ldb-sim: a simulated LLM inference server with a known truth
//!
//! Speaks the HTTP dialect of vLLM, SGLang, llama.cpp or a bare OpenAI-compatible proxy
//! ([`Personality`]) on top of one engine model: continuous batching with a running cap, a
//! block KV cache with prefix reuse, admission, FIFO queueing and recompute preemption,
//! chunked prefill at a fixed rate, a decode step time of `base + per_seq·B + per_kv·ΣL`,
//! speculative decoding with per-position acceptance, and a tokenizer model shared by
//! `/tokenize` and `usage`. Everything is configured by a [`Scenario`] (TOML, see
//! `docs/simulator.md`) and deterministic for a given seed.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ldb_sim::SimError> {
//! use ldb_sim::{Personality, Scenario, SimServer};
//!
//! let scenario = Scenario::load("quickstart")?;          // built-in name or a file path
//! let engine: Personality = "sglang".parse()?;             // or None: the scenario's default
//! let sim = SimServer::start(scenario, Some(engine), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("{}", sim.base_url());                          // http://127.0.0.1:PORT
//! let truth = sim.stats();                                 // exact counters
//! println!("{} tokens generated", truth.engine.generated_tokens);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! See also: `docs/simulator.md` (the model, every scenario key, each personality's surface,
//! fault injection, measured speed) and `benches/firehose.rs`.

mod engine;
mod error;
mod personality;
mod scenario;
mod server;
mod tokenizer;

pub use engine::stats::{EngineStats, Histogram};
pub use error::{Result, SimError};
pub use personality::Personality;
pub use scenario::{
    FaultConfig, KvConfig, OutputConfig, ReasoningField, Scenario, SchedulerConfig, ScriptedAnswer,
    ServerConfig, SpecConfig, StepTimeConfig, TokenizerConfig,
};
pub use server::{HttpStats, SimHandle, SimServer, SimStats, TruthProbe};
pub use tokenizer::{ChatMessage, count_text, encode_chat, encode_prompt};
