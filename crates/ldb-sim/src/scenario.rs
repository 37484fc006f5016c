//! Scenarios: the data that makes one simulated server (TOML, embedded or from a file).
//!
//! Every key is documented in `docs/simulator.md`. Unknown keys are rejected, and every
//! error is one line that names the origin (file or built-in name), the key and the
//! expected form.

mod builtin;
mod faults;
mod validate;

pub use faults::FaultConfig;

use serde::Deserialize;

use crate::error::{Result, SimError};
use crate::personality::Personality;

/// A complete, validated simulator configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used in logs).
    pub name: String,
    /// Free text describing what the scenario models.
    #[serde(default)]
    pub description: String,
    /// The personality used when the caller does not choose one.
    pub personality: Personality,
    /// Served model name (`/v1/models` id, `model_name` label).
    pub model: String,
    /// Model path reported by `/v1/models` `root`, SGLang `model_path`, llama.cpp `model_path`.
    #[serde(default)]
    pub model_path: Option<String>,
    /// Context length in tokens (vLLM `max_model_len`, SGLang `context_length`,
    /// llama.cpp per-slot `n_ctx`).
    pub max_model_len: u32,
    /// Seed of every random choice (spec-decode acceptance, injected faults).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Batching and prefill.
    pub scheduler: SchedulerConfig,
    /// Decode step time formula.
    pub step_time: StepTimeConfig,
    /// KV cache.
    pub kv: KvConfig,
    /// Speculative decoding (absent = off).
    #[serde(default)]
    pub spec: Option<SpecConfig>,
    /// Tokenizer model.
    pub tokenizer: TokenizerConfig,
    /// What the model writes.
    #[serde(default)]
    pub output: OutputConfig,
    /// Server identity and switches.
    #[serde(default)]
    pub server: ServerConfig,
    /// Injected faults (absent = none).
    #[serde(default)]
    pub faults: FaultConfig,
}

fn default_seed() -> u64 {
    42
}

/// Continuous batching and chunked prefill.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Cap on running sequences (vLLM `max_num_seqs`, SGLang `max_running_requests`,
    /// llama.cpp slots).
    pub max_running: u32,
    /// Prefill speed in tokens per second of uncached prompt.
    pub prefill_tok_s: f64,
    /// Most prompt tokens prefilled in one engine step (vLLM `max_num_batched_tokens`).
    #[serde(default = "default_chunk")]
    pub prefill_chunk_tokens: u32,
    /// Tokens per streamed chunk (SGLang/vLLM `stream_interval`).
    #[serde(default = "one")]
    pub stream_interval: u32,
    /// A per-step token budget shared by decode and prefill (vLLM
    /// `--max-num-batched-tokens` with chunked prefill): a step decodes its
    /// running streams and prefills at most `budget − decode tokens` prompt
    /// tokens. Absent: `prefill_chunk_tokens` alone caps a step's prefill,
    /// whatever the decodes (the older model, unchanged).
    #[serde(default)]
    pub max_num_batched_tokens: Option<u32>,
}

impl SchedulerConfig {
    /// Prompt tokens a step may prefill beside `decode_tokens` decode tokens.
    pub fn prefill_budget(&self, decode_tokens: u32) -> u32 {
        match self.max_num_batched_tokens {
            Some(b) => b.saturating_sub(decode_tokens),
            None => self.prefill_chunk_tokens,
        }
    }
}

fn default_chunk() -> u32 {
    8192
}

fn one() -> u32 {
    1
}

/// Decode step time: `base_s + per_seq_s·B + per_kv_token_s·ΣL` seconds, where `B` is the
/// number of decoding sequences in the step and `ΣL` the sum of their context lengths.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepTimeConfig {
    /// Fixed cost per step, seconds.
    pub base_s: f64,
    /// Cost per decoding sequence, seconds.
    #[serde(default)]
    pub per_seq_s: f64,
    /// Cost per token of context held by the decoding sequences, seconds.
    #[serde(default)]
    pub per_kv_token_s: f64,
    /// Slow drift of the step time: every decode step takes
    /// `(1 + drift_per_s · t)` times the formula, `t` the seconds since the
    /// engine started (thermal throttling, a growing cache). 0 = steady.
    #[serde(default)]
    pub drift_per_s: f64,
}

impl StepTimeConfig {
    /// Step time `since_start_s` seconds after the engine started: the
    /// formula times the drift factor `1 + drift_per_s · since_start_s`.
    pub fn decode_seconds_at(&self, batch: usize, kv_tokens: u64, since_start_s: f64) -> f64 {
        self.decode_seconds(batch, kv_tokens) * (1.0 + self.drift_per_s * since_start_s.max(0.0))
    }

    /// Step time in seconds for `batch` decoding sequences holding `kv_tokens` in total.
    pub fn decode_seconds(&self, batch: usize, kv_tokens: u64) -> f64 {
        if batch == 0 {
            return 0.0;
        }
        self.base_s + self.per_seq_s * batch as f64 + self.per_kv_token_s * kv_tokens as f64
    }
}

/// KV cache in blocks. Capacity in tokens = `block_size × num_blocks × cp`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvConfig {
    /// Physical block size in tokens (`cache_config_info{block_size}`).
    pub block_size: u32,
    /// Number of blocks (`cache_config_info{num_gpu_blocks}`).
    pub num_blocks: u32,
    /// Context-parallel multiplier (DCP): a logical block holds `block_size × cp` tokens.
    #[serde(default = "one")]
    pub cp: u32,
    /// Whether identical prompt prefixes reuse cached blocks.
    #[serde(default = "yes")]
    pub prefix_caching: bool,
    /// Most free blocks that keep a cached prefix, evicted least recently
    /// freed first (absent: every free block keeps its prefix until reused).
    #[serde(default)]
    pub prefix_cache_blocks: Option<u32>,
}

fn yes() -> bool {
    true
}

impl KvConfig {
    /// Tokens per logical (scheduler) block: `block_size × cp`.
    pub fn logical_block_tokens(&self) -> u32 {
        self.block_size.saturating_mul(self.cp)
    }

    /// Total KV capacity in tokens: `block_size × num_blocks × cp`.
    pub fn capacity_tokens(&self) -> u64 {
        u64::from(self.logical_block_tokens()) * u64::from(self.num_blocks)
    }

    /// Capacity of one context-parallel rank (what SGLang reports as `max_total_num_tokens`).
    pub fn local_capacity_tokens(&self) -> u64 {
        u64::from(self.block_size) * u64::from(self.num_blocks)
    }
}

/// Speculative decoding.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecConfig {
    /// Draft tokens per step (`num_speculative_tokens`, k).
    pub num_speculative_tokens: u32,
    /// Unconditional probability that draft position i is accepted (non-increasing, one per
    /// position). The engine accepts position i with conditional probability
    /// `accept_probs[i] / accept_probs[i-1]`.
    pub accept_probs: Vec<f64>,
    /// Method name reported by SGLang `speculative_algorithm` (e.g. `EAGLE`, `NEXTN`, `MTP`).
    #[serde(default = "default_method")]
    pub method: String,
    /// `false` (default): draw acceptance from the seeded generator. `true`: accept by error
    /// diffusion, so the realized per-position rates track `accept_probs` exactly (no sampling
    /// noise; used where a test needs exact truth).
    #[serde(default)]
    pub deterministic: bool,
}

fn default_method() -> String {
    "MTP".to_string()
}

impl SpecConfig {
    /// Mean tokens produced by one decode step of one sequence: `1 + Σ accept_probs`.
    pub fn mean_tokens_per_step(&self) -> f64 {
        1.0 + self.accept_probs.iter().sum::<f64>()
    }

    /// Conditional acceptance probability of each position given all earlier were accepted.
    pub fn conditional_probs(&self) -> Vec<f64> {
        let mut prev = 1.0;
        self.accept_probs
            .iter()
            .map(|&p| {
                let q = if prev > 0.0 { (p / prev).min(1.0) } else { 0.0 };
                prev = p;
                q
            })
            .collect()
    }
}

/// Tokenizer model: `tokens = per_request + Σ(per_message + ⌈chars / chars_per_token⌉)`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizerConfig {
    /// Characters (Unicode scalar values) per token of text.
    pub chars_per_token: f64,
    /// Chat-template tokens added once per chat request (BOS, generation prompt).
    #[serde(default)]
    pub tokens_per_request: u32,
    /// Chat-template tokens added per message (role markers).
    #[serde(default)]
    pub tokens_per_message: u32,
}

/// What the model writes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Tokens after which the model emits EOS when the request does not set `ignore_eos`
    /// (0 = never; generation then runs to `max_tokens` or the context end).
    #[serde(default)]
    pub natural_length: u32,
    /// Leading generated tokens streamed as reasoning (0 = none).
    #[serde(default)]
    pub reasoning_tokens: u32,
    /// Every n-th generated token writes no text (0 = never): a token that
    /// ends inside a multi-byte character (CJK, emoji). With one token per
    /// chunk its chunk has an empty delta while usage still grows, as on vLLM.
    #[serde(default)]
    pub textless_token_every: u32,
    /// The n-th generated token (1-based; 0 = never) writes a Han ideograph
    /// instead of its word: a model drifting into Chinese at a known point,
    /// for the coding-peak `cjk_chars` and the CJK watchdog.
    #[serde(default)]
    pub han_at_token: u32,
    /// Scripted answers for chat requests, served in request order and
    /// cycling (empty = the generated filler text). Each fixes the answer's
    /// text, its length in tokens and its finish reason, so a test knows the
    /// truth the completion-stats mode should report.
    #[serde(default)]
    pub answers: Vec<ScriptedAnswer>,
}

/// One scripted chat answer (`output.answers`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedAnswer {
    /// The answer text (`delta.content`).
    #[serde(default)]
    pub content: String,
    /// Thinking streamed before the content (`delta.reasoning…`).
    #[serde(default)]
    pub reasoning: String,
    /// Length of the answer in tokens (usage `completion_tokens`), reasoning
    /// included; the text is spread over these tokens. A request's
    /// `max_tokens` below it cuts the answer (finish `length`).
    pub completion_tokens: u32,
    /// Of `completion_tokens`, how many carry the reasoning (default: half
    /// when there is reasoning, else none).
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
    /// `stop` (default) or `length`: what the answer's last chunk reports.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ScriptedAnswer {
    /// Tokens of the reasoning part.
    pub fn reasoning_share(&self) -> u32 {
        let n = self.completion_tokens;
        match self.reasoning_tokens {
            Some(r) => r.min(n),
            None if self.reasoning.is_empty() => 0,
            None if self.content.is_empty() => n,
            None => (n / 2).max(1).min(n.saturating_sub(1)),
        }
    }
}

/// Which delta field carries reasoning text in the vLLM personality.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `delta.reasoning` (newest vLLM).
    #[default]
    Reasoning,
    /// `delta.reasoning_content` (older vLLM).
    ReasoningContent,
    /// Both fields with the same text (vLLM ~0.11–0.15).
    Both,
}

/// Server identity and switches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Version string (`/version`, `/get_server_info.version`).
    #[serde(default = "default_version")]
    pub version: String,
    /// llama.cpp `build_info` / `system_fingerprint`.
    #[serde(default = "default_build")]
    pub build_info: String,
    /// Fixed `created` timestamp for chunks (0 = the real clock). Makes output reproducible.
    #[serde(default)]
    pub created: u64,
    /// vLLM reasoning delta field.
    #[serde(default)]
    pub reasoning_field: ReasoningField,
    /// vLLM: expose CP labels (`decode_context_parallel_size`, `dcp_world_size`, …) on
    /// `vllm:cache_config_info` when `kv.cp > 1`.
    #[serde(default = "yes")]
    pub cp_labels: bool,
    /// SGLang: update scheduler gauges every this many decode steps
    /// (`decode_log_interval`).
    #[serde(default = "default_log_interval")]
    pub decode_log_interval: u32,
    /// Require `Authorization: Bearer <key>` on `/v1/*` routes (vLLM's
    /// `--api-key`); a missing or wrong key gets HTTP 401.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Honour the request's `ignore_eos` (default). `false` models a server
    /// that does not support it: requests stop at `output.natural_length`.
    #[serde(default = "yes")]
    pub honor_ignore_eos: bool,
    /// The prefix-cache reset routes real servers guard: vLLM's
    /// `POST /reset_prefix_cache` exists only with `VLLM_SERVER_DEV_MODE=1`
    /// (404 otherwise), llama.cpp's slot erase needs `--slot-save-path`
    /// (501 otherwise). SGLang's `/flush_cache` is always there.
    #[serde(default)]
    pub cache_reset_enabled: bool,
}

fn default_version() -> String {
    "0.11.0-sim".to_string()
}

fn default_build() -> String {
    "b6800-sim".to_string()
}

fn default_log_interval() -> u32 {
    40
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            version: default_version(),
            build_info: default_build(),
            created: 0,
            reasoning_field: ReasoningField::default(),
            cp_labels: true,
            decode_log_interval: default_log_interval(),
            api_key: None,
            honor_ignore_eos: true,
            cache_reset_enabled: false,
        }
    }
}

impl Scenario {
    /// A built-in scenario by name (see [`Scenario::builtin_names`]).
    pub fn builtin(name: &str) -> Result<Scenario> {
        match builtin::text(name) {
            Some(text) => Scenario::from_toml_str(text, &format!("builtin:{name}")),
            None => Err(SimError::UnknownScenario {
                name: name.to_string(),
                builtins: builtin::NAMES.join(", "),
                reason: "not a file".to_string(),
            }),
        }
    }

    /// Names of the embedded scenarios.
    pub fn builtin_names() -> &'static [&'static str] {
        builtin::NAMES
    }

    /// Parse and validate TOML text. `origin` (a path or name) prefixes every error.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| SimError::Scenario {
            origin: origin.to_string(),
            message: validate::describe_toml_error(text, &e),
        })?;
        scenario.validate().map_err(|message| SimError::Scenario {
            origin: origin.to_string(),
            message,
        })?;
        Ok(scenario)
    }

    /// A built-in name, else a path to a TOML file.
    pub fn load(name_or_path: &str) -> Result<Scenario> {
        if builtin::text(name_or_path).is_some() {
            return Scenario::builtin(name_or_path);
        }
        match std::fs::read_to_string(name_or_path) {
            Ok(text) => Scenario::from_toml_str(&text, name_or_path),
            Err(e) => Err(SimError::UnknownScenario {
                name: name_or_path.to_string(),
                builtins: builtin::NAMES.join(", "),
                reason: e.to_string().to_lowercase(),
            }),
        }
    }

    /// Truth: decode steps per second of one sequence at context `ctx` in a batch of `batch`
    /// sequences of the same length.
    pub fn steps_per_second(&self, batch: usize, ctx: u64) -> f64 {
        1.0 / self.step_time.decode_seconds(batch, ctx * batch as u64)
    }

    /// Truth: mean tokens per decode step per sequence (1 without speculative decoding).
    pub fn mean_tokens_per_step(&self) -> f64 {
        self.spec
            .as_ref()
            .map_or(1.0, SpecConfig::mean_tokens_per_step)
    }

    /// Truth: the served model's `root`/path.
    pub fn model_path(&self) -> String {
        self.model_path
            .clone()
            .unwrap_or_else(|| format!("/models/{}", self.model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(budget: &str) -> Result<Scenario> {
        let toml = format!(
            "name = \"t\"\npersonality = \"vllm\"\nmodel = \"m\"\nmax_model_len = 4096\n\
             [scheduler]\nmax_running = 8\nprefill_tok_s = 1000.0\nprefill_chunk_tokens = 512\n{budget}\n\
             [step_time]\nbase_s = 0.01\n[kv]\nblock_size = 16\nnum_blocks = 1000\n\
             [tokenizer]\nchars_per_token = 4.0\n"
        );
        Scenario::from_toml_str(&toml, "test")
    }

    /// Unset, a step prefills `prefill_chunk_tokens` whatever its decodes
    /// (the older model); set, decodes take their share of the budget.
    #[test]
    fn the_step_budget_is_shared_with_decodes_only_when_set() {
        let old = scenario("").unwrap_or_else(|e| panic!("{e}")).scheduler;
        assert_eq!((old.prefill_budget(0), old.prefill_budget(7)), (512, 512));
        let shared = scenario("max_num_batched_tokens = 100")
            .unwrap_or_else(|e| panic!("{e}"))
            .scheduler;
        assert_eq!(shared.prefill_budget(0), 100);
        assert_eq!(shared.prefill_budget(8), 92);
    }

    /// A budget that a full batch of decodes would use up is refused.
    #[test]
    fn a_budget_without_room_beside_a_full_batch_is_refused() {
        let e = scenario("max_num_batched_tokens = 8")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("scheduler.max_num_batched_tokens"), "{e}");
    }
}
