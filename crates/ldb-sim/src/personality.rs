//! Which inference engine the simulator pretends to be.

use std::fmt;
use std::str::FromStr;

use crate::error::SimError;

/// The HTTP dialect the simulator speaks.
///
/// All personalities share the same engine model; they differ in routes, chunk shapes, error
/// JSON and Prometheus metric names (see `docs/simulator.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Personality {
    /// vLLM V1 OpenAI-compatible server (`vllm:` metrics, nested error JSON).
    Vllm,
    /// SGLang (`/get_server_info`, `/abort_request`, `sglang:` metrics, flat error JSON).
    Sglang,
    /// llama.cpp `llama-server` (`/props`, `/slots`, `llamacpp:` metrics).
    #[serde(alias = "llama.cpp")]
    LlamaCpp,
    /// A bare OpenAI-compatible proxy: only `/v1/*`, everything else 404.
    OpenAi,
}

impl Personality {
    /// Every personality, in a stable order.
    pub const ALL: [Personality; 4] = [
        Personality::Vllm,
        Personality::Sglang,
        Personality::LlamaCpp,
        Personality::OpenAi,
    ];

    /// The canonical lower-case name (`vllm`, `sglang`, `llamacpp`, `openai`).
    pub fn as_str(self) -> &'static str {
        match self {
            Personality::Vllm => "vllm",
            Personality::Sglang => "sglang",
            Personality::LlamaCpp => "llamacpp",
            Personality::OpenAi => "openai",
        }
    }
}

impl fmt::Display for Personality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Personality {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vllm" => Ok(Personality::Vllm),
            "sglang" => Ok(Personality::Sglang),
            "llamacpp" | "llama.cpp" | "llama-cpp" => Ok(Personality::LlamaCpp),
            "openai" => Ok(Personality::OpenAi),
            _ => Err(SimError::UnknownPersonality(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_names() {
        assert_eq!("vllm".parse::<Personality>().ok(), Some(Personality::Vllm));
        assert_eq!(
            "llama.cpp".parse::<Personality>().ok(),
            Some(Personality::LlamaCpp)
        );
        assert_eq!(
            "OpenAI".parse::<Personality>().ok(),
            Some(Personality::OpenAi)
        );
    }

    #[test]
    fn unknown_is_one_line() {
        let err = "tgi".parse::<Personality>().err().map(|e| e.to_string());
        let msg = err.unwrap_or_default();
        assert!(msg.contains("unknown engine `tgi`"), "{msg}");
        assert!(!msg.contains('\n'));
    }
}
