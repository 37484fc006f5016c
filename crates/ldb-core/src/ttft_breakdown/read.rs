//! Which of an engine's histograms take TTFT apart, read from one scrape
//! into the engine-independent snapshot (`ServerSnapshot::latency`).

use crate::engine::Engine;
use crate::histogram::{Histogram, read_series};
use crate::prometheus::MetricSet;
use std::collections::BTreeMap;

/// One component's series in one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComponentSeries {
    /// `ttft`, `queue`, `prefill`, `decode`, `inference`, or `stage:<name>`
    /// (SGLang's other per-stage latencies).
    pub name: String,
    /// The metric it is read from, with its label filter.
    pub metric: String,
    /// Series by their labels (without `le`); empty when not exported.
    pub series: BTreeMap<String, Histogram>,
}

/// The latency histograms of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyHistograms {
    /// Components in report order.
    pub components: Vec<ComponentSeries>,
    /// The engine creates a labelled series only at its first observation
    /// (SGLang's `is_streaming` and `stage` series, seen on 0.5.23's idle
    /// page), so a series absent at the window start counts from 0. vLLM
    /// creates its series at start-up: one appearing later is not trusted.
    pub lazy_series: bool,
    /// Preemption counter (vLLM `num_preemptions_total`, SGLang
    /// `num_retracted_requests_total` where exported).
    pub preemptions: Option<f64>,
    /// The preemption counter's name.
    pub preemptions_source: Option<&'static str>,
}

/// (component, metric, label filter) read by each engine.
type Spec = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const VLLM: &[Spec] = &[
    ("ttft", "vllm:time_to_first_token_seconds", &[]),
    ("queue", "vllm:request_queue_time_seconds", &[]),
    ("prefill", "vllm:request_prefill_time_seconds", &[]),
    ("decode", "vllm:request_decode_time_seconds", &[]),
    ("inference", "vllm:request_inference_time_seconds", &[]),
];

const SGLANG_STAGES: &str = "sglang:per_stage_req_latency_seconds";

const SGLANG: &[Spec] = &[
    ("ttft", "sglang:time_to_first_token_seconds", &[]),
    ("queue", "sglang:queue_time_seconds", &[]),
    ("prefill", SGLANG_STAGES, &[("stage", "prefill_forward")]),
];

/// The metric name with its filter, as shown in the result.
fn metric_label(name: &str, filter: &[(&str, &str)]) -> String {
    if filter.is_empty() {
        return name.to_string();
    }
    let f: Vec<String> = filter.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", f.join(","))
}

/// Read the engine's TTFT histograms from a scrape (empty for engines
/// without them: llama.cpp's come from per-request timings instead).
pub fn read(engine: Engine, m: &MetricSet) -> LatencyHistograms {
    let specs = match engine {
        Engine::Vllm => VLLM,
        Engine::Sglang => SGLANG,
        _ => return LatencyHistograms::default(),
    };
    let mut components: Vec<ComponentSeries> = specs
        .iter()
        .map(|(name, metric, filter)| ComponentSeries {
            name: (*name).to_string(),
            metric: metric_label(metric, filter),
            series: read_series(m, metric, filter),
        })
        .collect();
    if engine == Engine::Sglang {
        components.extend(sglang_other_stages(m));
    }
    let (preemptions, preemptions_source) = match engine {
        Engine::Vllm => (
            m.sum("vllm:num_preemptions_total", &[]),
            Some("vllm:num_preemptions_total"),
        ),
        _ => (
            m.sum("sglang:num_retracted_requests_total", &[]),
            Some("sglang:num_retracted_requests_total"),
        ),
    };
    LatencyHistograms {
        components,
        lazy_series: engine == Engine::Sglang,
        preemptions_source: preemptions_source.filter(|_| preemptions.is_some()),
        preemptions,
    }
}

/// SGLang's per-stage latencies other than the prefill forward pass, one
/// component per stage found (`stage:request_process`, …).
fn sglang_other_stages(m: &MetricSet) -> Vec<ComponentSeries> {
    let bucket = format!("{SGLANG_STAGES}_bucket");
    let mut stages: Vec<&str> = m
        .samples
        .iter()
        .filter(|s| s.name == bucket)
        .filter_map(|s| s.label("stage"))
        .filter(|s| *s != "prefill_forward")
        .collect();
    stages.sort_unstable();
    stages.dedup();
    stages
        .into_iter()
        .map(|stage| ComponentSeries {
            name: format!("stage:{stage}"),
            metric: metric_label(SGLANG_STAGES, &[("stage", stage)]),
            series: read_series(m, SGLANG_STAGES, &[("stage", stage)]),
        })
        .collect()
}

impl LatencyHistograms {
    /// Replicas' histograms as one server's: every series kept, its key
    /// prefixed with the replica's index, so deltas stay per replica.
    pub fn combine(parts: &[LatencyHistograms]) -> LatencyHistograms {
        let mut out = LatencyHistograms {
            lazy_series: parts.iter().any(|p| p.lazy_series),
            preemptions: parts.iter().map(|p| p.preemptions).sum(),
            preemptions_source: parts.first().and_then(|p| p.preemptions_source),
            components: Vec::new(),
        };
        for (i, p) in parts.iter().enumerate() {
            for c in &p.components {
                let at = match out.components.iter().position(|o| o.name == c.name) {
                    Some(at) => at,
                    None => {
                        out.components.push(ComponentSeries {
                            series: BTreeMap::new(),
                            ..c.clone()
                        });
                        out.components.len() - 1
                    }
                };
                for (k, h) in &c.series {
                    let key = format!("replica={i},{k}");
                    out.components[at].series.insert(key, h.clone());
                }
            }
        }
        out
    }
}
