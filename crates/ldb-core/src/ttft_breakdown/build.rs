//! Building a cell's breakdown: window deltas of the histograms (or the
//! window's llama.cpp timings), then the front end's share of the TTFT.

use crate::histogram::Histogram;
use crate::stats::summarize_measured;

use super::read::{ComponentSeries, LatencyHistograms};
use super::{FRONTEND_FLAG_MIN_S, FRONTEND_FLAG_RATIO, TtftBreakdown, TtftComponent};

/// The client's TTFT over the window's requests (first token inside it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientTtft {
    /// Requests.
    pub requests: u64,
    /// Mean, seconds.
    pub mean: Option<f64>,
    /// Median, seconds (the same percentile method as the cell's `ttft_p50`).
    pub p50: Option<f64>,
}

impl ClientTtft {
    /// From the requests' TTFTs.
    pub fn from_values(values: &[f64]) -> ClientTtft {
        if values.is_empty() {
            return ClientTtft::default();
        }
        let s = summarize_measured(values.iter().copied());
        ClientTtft {
            requests: values.len() as u64,
            mean: Some(s.avg),
            p50: Some(s.p50),
        }
    }
}

/// One llama.cpp request of the window: its `timings` and the client's TTFT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedRequest {
    /// `timings.prompt_ms` in seconds: prompt processing.
    pub prompt_s: f64,
    /// `timings.predicted_ms` in seconds: generation.
    pub predicted_s: f64,
    /// `timings.cache_n`: prompt tokens taken from the cache.
    pub cache_n: f64,
    /// The client's TTFT of the same request.
    pub client_ttft: f64,
}

/// One component's growth over the window, series by series, summed.
fn component_delta(
    start: Option<&ComponentSeries>,
    end: &ComponentSeries,
    lazy: bool,
) -> TtftComponent {
    let (name, metric) = (end.name.as_str(), end.metric.as_str());
    if end.series.is_empty() {
        return TtftComponent::absent(name, metric, "not exported by this server");
    }
    if let Some(s) = start
        && let Some(k) = s.series.keys().find(|k| !end.series.contains_key(*k))
    {
        return TtftComponent::absent(
            name,
            metric,
            format!("series {{{k}}} vanished in the window"),
        );
    }
    let mut total = Histogram::default();
    for (key, h) in &end.series {
        let before = match start.and_then(|s| s.series.get(key)) {
            Some(b) => b.clone(),
            // Created at its first observation: it was 0 before.
            None if lazy => Histogram {
                bounds: h.bounds.clone(),
                cumulative: vec![0.0; h.cumulative.len()],
                sum: 0.0,
            },
            None => {
                return TtftComponent::absent(
                    name,
                    metric,
                    format!("series {{{key}}} appeared during the window (a restart?)"),
                );
            }
        };
        let grown = match h.since(&before) {
            Ok(d) => d,
            Err(e) => return TtftComponent::absent(name, metric, e),
        };
        if let Err(e) = total.add(&grown) {
            return TtftComponent::absent(name, metric, e);
        }
    }
    TtftComponent::from_histogram(name, metric, &total)
}

/// The breakdown from the histograms of the scrapes that bracket the window.
pub fn from_histograms(
    start: &LatencyHistograms,
    end: &LatencyHistograms,
    client: ClientTtft,
) -> TtftBreakdown {
    let components = end
        .components
        .iter()
        .map(|c| {
            let s = start.components.iter().find(|s| s.name == c.name);
            component_delta(s, c, end.lazy_series)
        })
        .collect();
    let preemptions = match (start.preemptions, end.preemptions) {
        (Some(a), Some(b)) if b >= a => Some((b - a).round() as u64),
        _ => None,
    };
    let mut out = TtftBreakdown {
        source: "prometheus_histograms".into(),
        components,
        engine_ttft_component: "ttft".into(),
        preemptions,
        preemptions_source: preemptions.and(end.preemptions_source).map(str::to_string),
        ..TtftBreakdown::default()
    };
    frontend(&mut out, client);
    out
}

/// The breakdown from the window's llama.cpp requests: exact values, and
/// the client's TTFT over the same requests. llama.cpp's prompt time does
/// not include a wait for a free slot, so that wait lands in the overhead.
pub fn from_timings(requests: &[TimedRequest]) -> TtftBreakdown {
    let col = |f: fn(&TimedRequest) -> f64| requests.iter().map(f).collect::<Vec<f64>>();
    let client = ClientTtft::from_values(&col(|r| r.client_ttft));
    let mut out = TtftBreakdown {
        source: "llamacpp_timings".into(),
        components: vec![
            TtftComponent::from_values("prefill", "timings.prompt_ms", &col(|r| r.prompt_s)),
            TtftComponent::from_values("decode", "timings.predicted_ms", &col(|r| r.predicted_s)),
        ],
        engine_ttft_component: "prefill".into(),
        cached_prompt_tokens_mean: (!requests.is_empty())
            .then(|| requests.iter().map(|r| r.cache_n).sum::<f64>() / requests.len() as f64),
        ..TtftBreakdown::default()
    };
    frontend(&mut out, client);
    out
}

/// Client − engine TTFT: means (exact on both sides) and medians (the
/// engine's known to its bucket), and the flag when the client's is far above.
fn frontend(out: &mut TtftBreakdown, client: ClientTtft) {
    out.client_requests = client.requests;
    out.client_ttft_mean_s = client.mean;
    out.client_ttft_p50_s = client.p50;
    let Some(engine) = out.engine_ttft().cloned() else {
        out.note = Some("no engine TTFT: the overhead cannot be taken".into());
        return;
    };
    let (Some(c_mean), Some(e_mean)) = (client.mean, engine.mean_s) else {
        out.note = Some(match engine.reason {
            Some(r) => format!("no engine TTFT ({r})"),
            None => "no client TTFT inside the window".into(),
        });
        return;
    };
    let overhead = c_mean - e_mean;
    out.frontend_overhead_mean_s = Some(overhead);
    if let (Some(c50), Some(e50)) = (client.p50, engine.p50) {
        out.frontend_overhead_p50_s = Some(c50 - e50.value);
        out.frontend_overhead_p50_range_s = Some([e50.high.map(|h| c50 - h), Some(c50 - e50.low)]);
    }
    if c_mean >= FRONTEND_FLAG_RATIO * e_mean && overhead >= FRONTEND_FLAG_MIN_S {
        out.frontend_dominant = true;
        out.note = Some(format!(
            "client TTFT {:.0} ms is {:.1}x the engine's {:.0} ms: the time is spent in the \
             client, the network or the HTTP server, not the engine",
            c_mean * 1e3,
            c_mean / e_mean.max(1e-12),
            e_mean * 1e3
        ));
    }
}
