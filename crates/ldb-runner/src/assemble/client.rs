//! The client side of a window: how many tokens arrived inside it, how they
//! were counted, how they split between the reasoning and answer channels,
//! and how the cell's requests ended.

use ldb_client::stream::StreamOutcome;
use ldb_core::cellstats::{LatencyScope, latency_stats};
use ldb_core::result::{AggregateSource, LatencyStats, RequestSample, UsageMode};
use ldb_core::window::{RequestTrack, WindowBounds};

use super::CellInputs;

/// Everything the cell's own requests say about the window.
pub(super) struct ClientSide {
    /// The window's token count and how it was made.
    pub count: ClientCount,
    /// Window start → the last token inside it, seconds.
    pub active_secs: f64,
    /// Reasoning tokens of the window.
    pub reasoning_tokens: u64,
    /// Tool-call tokens of the window.
    pub tool_call_tokens: u64,
    /// How the reasoning/answer split was made.
    pub split_source: &'static str,
    /// One sample per request, times from the window start.
    pub samples: Vec<RequestSample>,
    /// Latency of the requests inside the window.
    pub latency: LatencyStats,
    /// Latency of every request of the cell.
    pub all_latency: LatencyStats,
    /// How the requests ended.
    pub tally: RequestTally,
}

/// How many of the cell's requests ended each way.
pub(super) struct RequestTally {
    /// Completed (over the whole request, not only the window).
    pub completed: u64,
    /// Failed.
    pub errors: u64,
    /// Cancelled at the window's close.
    pub cancelled: u64,
    /// Stopped at end-of-sequence though the request asked to ignore it
    /// (0 when it did not ask).
    pub early_stops: u64,
    /// Whose usage reports went wrong.
    pub usage_anomalies: u64,
}

/// Read the window off the cell's requests.
pub(super) fn client_side(i: &CellInputs<'_>) -> ClientSide {
    let (outcomes, window_start) = (i.outcomes, i.window_start);
    let window = WindowBounds {
        start: Some(window_start),
        end: Some(i.window_end),
    };
    let tracks: Vec<_> = outcomes.iter().map(|o| &o.track).collect();
    let count = client_count(&tracks);
    let active_secs = active_seconds(&tracks, window_start);
    let (split, split_source) = channel_split(&tracks, &count);
    let samples: Vec<_> = outcomes
        .iter()
        .map(|o| o.track.to_sample(window_start, window))
        .collect();
    let latency = latency_stats(samples.iter().filter(|s| s.in_window), LatencyScope::Window);
    let all_latency = latency_stats(samples.iter(), LatencyScope::All);
    let count_of =
        |f: &dyn Fn(&StreamOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count() as u64;
    let tally = RequestTally {
        completed: count_of(&|o| o.track.to_sample(0.0, window).completed),
        errors: count_of(&|o| o.track.error().is_some()),
        cancelled: count_of(&|o| o.cancelled),
        early_stops: if i.ignore_eos {
            samples.iter().filter(|s| s.finish_reason == "stop").count() as u64
        } else {
            0
        },
        usage_anomalies: count_of(&|o| o.track.usage_anomaly().is_some()),
    };
    ClientSide {
        count,
        active_secs,
        reasoning_tokens: split.0,
        tool_call_tokens: split.1,
        split_source,
        samples,
        latency,
        all_latency,
        tally,
    }
}

/// The window's token count and how it was made.
pub(super) struct ClientCount {
    /// Tokens that arrived inside the window.
    pub tokens: u64,
    /// Where the count came from.
    pub source: AggregateSource,
    /// How the server reported usage.
    pub usage_mode: UsageMode,
    /// Usage on every chunk (per-chunk token counts known).
    pub continuous: bool,
    /// Tokens per chunk used to scale chunk counts (1 with continuous usage).
    pub chunk_ratio: f64,
}

/// Count the window's tokens: usage deltas when every chunk carries usage;
/// otherwise window chunks scaled by the tokens-per-chunk of finished
/// requests with a final usage; otherwise chunks alone.
fn client_count(tracks: &[&RequestTrack]) -> ClientCount {
    let continuous = tracks.iter().any(|t| t.has_continuous_usage());
    let any_usage = tracks.iter().any(|t| t.has_usage());
    let window_chunks: u64 = tracks.iter().map(|t| t.window_chunks).sum();
    if continuous {
        return ClientCount {
            tokens: tracks.iter().map(|t| t.window_tokens).sum(),
            source: AggregateSource::OpenaiContinuousUsage,
            usage_mode: UsageMode::Continuous,
            continuous,
            chunk_ratio: 1.0,
        };
    }
    if any_usage {
        let (tok, ch) = tracks
            .iter()
            .filter(|t| t.has_usage() && t.chunks() > 0)
            .fold((0u64, 0u64), |(a, b), t| {
                (a + t.output_tokens(), b + t.chunks())
            });
        let ratio = if ch > 0 { tok as f64 / ch as f64 } else { 1.0 };
        return ClientCount {
            tokens: (window_chunks as f64 * ratio).round() as u64,
            source: AggregateSource::OpenaiStreamChunksCalibrated,
            usage_mode: UsageMode::FinalOnly,
            continuous,
            chunk_ratio: ratio,
        };
    }
    ClientCount {
        tokens: window_chunks,
        source: AggregateSource::OpenaiStreamChunksFallback,
        usage_mode: UsageMode::None,
        continuous,
        chunk_ratio: 1.0,
    }
}

/// Window start → the last token that arrived inside the window, seconds
/// (0 when none did).
fn active_seconds(tracks: &[&RequestTrack], window_start: f64) -> f64 {
    let last = tracks
        .iter()
        .filter_map(|t| t.last_window_t)
        .fold(f64::NAN, f64::max);
    if last.is_finite() {
        last - window_start
    } else {
        0.0
    }
}

/// Reasoning and tool-call tokens of the window, and how the split was
/// made: both channels are scaled alike, so with usage the three channels
/// still sum to the usage-made total.
fn channel_split(tracks: &[&RequestTrack], count: &ClientCount) -> ((u64, u64), &'static str) {
    let window_reasoning: u64 = tracks.iter().map(|t| t.window_reasoning_tokens).sum();
    let window_tool: u64 = tracks.iter().map(|t| t.window_tool_call_tokens).sum();
    let scale = |n: u64| {
        if count.continuous {
            n
        } else {
            ((n as f64 * count.chunk_ratio).round() as u64).min(count.tokens)
        }
    };
    let reasoning = scale(window_reasoning);
    let tool = scale(window_tool).min(count.tokens - reasoning);
    let mixed = tracks.iter().any(|t| t.mixed_chunks() > 0);
    let source = match (count.continuous, mixed) {
        (true, false) => "usage_deltas",
        (true, true) => "usage_deltas_mixed",
        (false, false) => "chunk_share",
        (false, true) => "chunk_share_mixed",
    };
    ((reasoning, tool), source)
}
