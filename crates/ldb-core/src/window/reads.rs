//! The reads a request's track keeps: those waiting for the window's start
//! and those counted inside it, with their tokens by channel.

use crate::gaps::TokenGaps;

/// Tokens that arrived inside the window but before its start was published.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct Pending {
    pub(super) t: f64,
    pub(super) tokens: u64,
    pub(super) split: Split,
    pub(super) chunks: u64,
}

/// Of a read's tokens, those on the reasoning and on the tool-call channel
/// (the rest are the answer's).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Split {
    pub(super) reasoning: u64,
    #[serde(default)]
    pub(super) tool: u64,
}

/// A read counted inside the window, kept for a while in case the window's
/// end turns out to lie before it (`RequestTrack::drop_after`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Counted {
    pub(super) t: f64,
    pub(super) tokens: u64,
    pub(super) split: Split,
    pub(super) chunks: u64,
    /// The token gaps this read added to the window's, once its read closed.
    pub(super) gaps: Option<TokenGaps>,
}
