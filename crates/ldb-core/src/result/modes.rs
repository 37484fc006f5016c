//! The words the result file uses for modes and sources, as enums.
//!
//! Each enum serializes to exactly the word the file has always carried (and
//! the reference tool wrote), so typing them changed no byte of the output.
//! `as_str` gives the same word for text output; comparing with a `&str`
//! compares with that word, which keeps checks against the JSON readable.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Implements `as_str`, `Display` and `PartialEq<&str>` from one word table.
macro_rules! words {
    ($ty:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $ty {
            /// The word written to JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $word),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

/// How a stream reports output tokens (cell `usage_mode`, metadata `usage_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageMode {
    /// Usage on every chunk: exact token counts inside the window.
    Continuous,
    /// Usage only on a final chunk: chunks are scaled by the cell's ratio.
    FinalOnly,
    /// No usage at all: chunks are counted as tokens.
    #[default]
    None,
}
words!(UsageMode { Continuous => "continuous", FinalOnly => "final_only", None => "none" });

/// Where a cell's `aggregate_tps` numerator came from (`aggregate_source`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregateSource {
    /// Cumulative usage increases on every chunk.
    OpenaiContinuousUsage,
    /// Content chunks scaled by the final-usage ratio.
    OpenaiStreamChunksCalibrated,
    /// Content chunks counted one token each.
    OpenaiStreamChunksFallback,
    /// Request modes: usage of every completed request.
    OpenaiCompletedUsage,
    /// Written by the reference tool only; read so its files load.
    PrometheusFallback,
    /// No tokens (skipped, failed or empty cell).
    #[default]
    None,
}
words!(AggregateSource {
    OpenaiContinuousUsage => "openai_continuous_usage",
    OpenaiStreamChunksCalibrated => "openai_stream_chunks_calibrated",
    OpenaiStreamChunksFallback => "openai_stream_chunks_fallback",
    OpenaiCompletedUsage => "openai_completed_usage",
    PrometheusFallback => "prometheus_fallback",
    None => "none",
});

/// How a decode cell is measured (cell `benchmark_mode`, metadata `decode_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecodeMode {
    /// Sustained decode over a fixed window.
    #[default]
    #[serde(rename = "duration")]
    Duration,
    /// A fixed number of requests per cell (primary request-count mode).
    #[serde(rename = "request-count")]
    RequestCount,
    /// The burst / end-to-end matrix after the sustained one.
    #[serde(rename = "burst-e2e")]
    BurstE2e,
}
words!(DecodeMode { Duration => "duration", RequestCount => "request-count", BurstE2e => "burst-e2e" });

/// How a prefill row was measured (`prefill.<ctx>.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillMethod {
    /// The scout request of the first decode cell at this context.
    IntegratedScout,
    /// A scout request for a context no decode cell uses.
    ScoutOnly,
    /// Standalone cold prefill timed by the client.
    Client,
    /// Standalone or scout row whose headline is the server's counters.
    Prometheus,
}
words!(PrefillMethod {
    IntegratedScout => "integrated_scout",
    ScoutOnly => "scout_only",
    Client => "client",
    Prometheus => "prometheus",
});

/// How prefill was measured for the whole run (`metadata.prefill_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillMode {
    /// From each decode cell's scout request.
    IntegratedDecodeScout,
    /// Separate cold requests per context.
    StandaloneCold,
    /// `--skip-prefill`.
    Skipped,
}
words!(PrefillMode {
    IntegratedDecodeScout => "integrated_decode_scout",
    StandaloneCold => "standalone_cold",
    Skipped => "skipped",
});

/// How far the run got when the file was written (`metadata.run_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Written mid-run after each row or cell.
    InProgress,
    /// The run finished.
    Complete,
    /// The user stopped the run.
    Interrupted,
}
words!(RunStatus { InProgress => "in_progress", Complete => "complete", Interrupted => "interrupted" });

#[cfg(test)]
mod tests {
    use super::*;

    /// serde's word and `as_str` come from two tables; they must agree, and
    /// each word must read back as its variant.
    fn same<T>(all: &[T])
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug + Copy + fmt::Display,
    {
        for v in all {
            let json = serde_json::to_value(v).expect("word");
            assert_eq!(json, serde_json::Value::from(v.to_string()), "{v:?}");
            assert_eq!(serde_json::from_value::<T>(json).ok(), Some(*v));
        }
    }

    #[test]
    fn serde_words_match_as_str() {
        same(&[UsageMode::Continuous, UsageMode::FinalOnly, UsageMode::None]);
        same(&[
            AggregateSource::OpenaiContinuousUsage,
            AggregateSource::OpenaiStreamChunksCalibrated,
            AggregateSource::OpenaiStreamChunksFallback,
            AggregateSource::OpenaiCompletedUsage,
            AggregateSource::PrometheusFallback,
            AggregateSource::None,
        ]);
        same(&[
            DecodeMode::Duration,
            DecodeMode::RequestCount,
            DecodeMode::BurstE2e,
        ]);
        same(&[
            PrefillMethod::IntegratedScout,
            PrefillMethod::ScoutOnly,
            PrefillMethod::Client,
            PrefillMethod::Prometheus,
        ]);
        same(&[
            PrefillMode::IntegratedDecodeScout,
            PrefillMode::StandaloneCold,
            PrefillMode::Skipped,
        ]);
        same(&[
            RunStatus::InProgress,
            RunStatus::Complete,
            RunStatus::Interrupted,
        ]);
    }
}
