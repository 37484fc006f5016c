//! TTFT taken apart by the engine's own numbers, per cell (docs/methodology.md
//! §9.4): queue, prefill, decode and inference time from the server's
//! histograms over the window (vLLM, SGLang) or from each request's
//! `timings` (llama.cpp), the engine's TTFT beside the client's, and the
//! difference, `frontend_overhead`: what the HTTP front end, tokenization,
//! the network and the client add.

use serde::{Deserialize, Serialize};

use crate::histogram::{Histogram, QuantileEstimate};
use crate::stats::summarize_measured;

mod build;
mod read;

pub use build::{ClientTtft, TimedRequest, from_histograms, from_timings};
pub use read::{ComponentSeries, LatencyHistograms, read};

/// A client TTFT this much above the engine's (ratio) and by at least
/// [`FRONTEND_FLAG_MIN_S`] is flagged: the time is not the engine's.
pub const FRONTEND_FLAG_RATIO: f64 = 2.0;
/// The smallest overhead (seconds) that is flagged, so a fast engine's
/// millisecond TTFT doubled by a millisecond of HTTP is not.
pub const FRONTEND_FLAG_MIN_S: f64 = 0.05;

/// The breakdown of one cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TtftBreakdown {
    /// `prometheus_histograms` (vLLM, SGLang) or `llamacpp_timings`.
    pub source: String,
    /// The components in report order; one without a value says why.
    pub components: Vec<TtftComponent>,
    /// Which component is the engine's TTFT (`ttft`; llama.cpp: `prefill`).
    pub engine_ttft_component: String,
    /// Requests whose first token reached the client inside the window.
    pub client_requests: u64,
    /// Their mean TTFT as the client measured it, seconds.
    pub client_ttft_mean_s: Option<f64>,
    /// Their median client TTFT, seconds.
    pub client_ttft_p50_s: Option<f64>,
    /// Client TTFT mean − engine TTFT mean, seconds.
    pub frontend_overhead_mean_s: Option<f64>,
    /// Client TTFT p50 − engine TTFT p50, seconds.
    pub frontend_overhead_p50_s: Option<f64>,
    /// Where the p50 difference can lie given the engine p50's bucket
    /// `[client − high, client − low]`; `null` low end: unbounded.
    pub frontend_overhead_p50_range_s: Option<[Option<f64>; 2]>,
    /// The client's TTFT is far above the engine's (see [`FRONTEND_FLAG_RATIO`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub frontend_dominant: bool,
    /// What the flag means, or why there is no overhead figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Preemptions (vLLM) or retractions (SGLang) in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<u64>,
    /// The counter `preemptions` came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemptions_source: Option<String>,
    /// llama.cpp: mean prompt tokens served from its cache (`timings.cache_n`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens_mean: Option<f64>,
}

/// One component's distribution over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TtftComponent {
    /// `ttft`, `queue`, `prefill`, `decode`, `inference`, `stage:<name>`.
    pub name: String,
    /// Where it was read (metric name and filter, or `timings.prompt_ms`).
    pub metric: String,
    /// Observations in the window (`null` when there is no value).
    pub count: Option<u64>,
    /// Exact mean (`_sum`/`_count`), seconds.
    pub mean_s: Option<f64>,
    /// Median, with the bucket it lies in.
    pub p50: Option<QuantileEstimate>,
    /// 90th percentile.
    pub p90: Option<QuantileEstimate>,
    /// 99th percentile.
    pub p99: Option<QuantileEstimate>,
    /// Why there is no value (not exported, a series appeared late, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl TtftComponent {
    /// A component with no value, and why.
    pub fn absent(name: &str, metric: &str, reason: impl Into<String>) -> TtftComponent {
        TtftComponent {
            name: name.into(),
            metric: metric.into(),
            reason: Some(reason.into()),
            ..TtftComponent::default()
        }
    }

    /// The distribution of a window's histogram.
    pub fn from_histogram(name: &str, metric: &str, h: &Histogram) -> TtftComponent {
        if h.count() <= 0.0 {
            return TtftComponent {
                count: Some(0),
                ..TtftComponent::absent(name, metric, "no observation in the window")
            };
        }
        TtftComponent {
            name: name.into(),
            metric: metric.into(),
            count: Some(h.count().round() as u64),
            mean_s: h.mean(),
            p50: h.quantile(0.5),
            p90: h.quantile(0.9),
            p99: h.quantile(0.99),
            reason: None,
        }
    }

    /// The distribution of exact per-request values (bounds collapse on
    /// the value: nothing is binned).
    pub fn from_values(name: &str, metric: &str, values: &[f64]) -> TtftComponent {
        if values.is_empty() {
            return TtftComponent {
                count: Some(0),
                ..TtftComponent::absent(name, metric, "no request with timings in the window")
            };
        }
        let s = summarize_measured(values.iter().copied());
        let exact = |v: f64| {
            Some(QuantileEstimate {
                value: v,
                low: v,
                high: Some(v),
            })
        };
        TtftComponent {
            name: name.into(),
            metric: metric.into(),
            count: Some(values.len() as u64),
            mean_s: Some(s.avg),
            p50: exact(s.p50),
            p90: exact(s.p90),
            p99: exact(s.p99),
            reason: None,
        }
    }
}

impl TtftBreakdown {
    /// The component called `name`.
    pub fn component(&self, name: &str) -> Option<&TtftComponent> {
        self.components.iter().find(|c| c.name == name)
    }

    /// The engine's TTFT component.
    pub fn engine_ttft(&self) -> Option<&TtftComponent> {
        self.component(&self.engine_ttft_component)
    }

    /// Mean of component `name`, seconds.
    pub fn mean_of(&self, name: &str) -> Option<f64> {
        self.component(name).and_then(|c| c.mean_s)
    }
}

#[cfg(test)]
mod tests;
