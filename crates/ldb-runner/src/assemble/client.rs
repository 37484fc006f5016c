//! The client side of a window: how many tokens arrived inside it, how they
//! were counted, and how they split between the reasoning and answer channels.

use ldb_core::result::{AggregateSource, UsageMode};
use ldb_core::window::RequestTrack;

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
pub(super) fn client_count(tracks: &[&RequestTrack]) -> ClientCount {
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
pub(super) fn active_seconds(tracks: &[&RequestTrack], window_start: f64) -> f64 {
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

/// Reasoning tokens of the window and how the split was made.
pub(super) fn channel_split(tracks: &[&RequestTrack], count: &ClientCount) -> (u64, &'static str) {
    let window_reasoning: u64 = tracks.iter().map(|t| t.window_reasoning_tokens).sum();
    let reasoning = if count.continuous {
        window_reasoning
    } else {
        ((window_reasoning as f64 * count.chunk_ratio).round() as u64).min(count.tokens)
    };
    let mixed = tracks.iter().any(|t| t.mixed_chunks() > 0);
    let source = match (count.continuous, mixed) {
        (true, false) => "usage_deltas",
        (true, true) => "usage_deltas_mixed",
        (false, false) => "chunk_share",
        (false, true) => "chunk_share_mixed",
    };
    (reasoning, source)
}
