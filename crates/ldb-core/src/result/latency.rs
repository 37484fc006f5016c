//! Client-side latency: one request's sample, and the distributions over a
//! cell's samples with their flat JSON form.

use serde::{Deserialize, Serialize};

use crate::stats::Summary;

/// One request of a decode cell, as measured by the client.
///
/// Times `start_s`, `first_token_s` and `end_s` are seconds relative to the
/// cell's measurement-window start (negative before it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
// The reference tool wrote fewer keys per sample; missing ones read as 0/empty.
#[serde(default)]
pub struct RequestSample {
    /// Request start → first chunk carrying a token (text, or a usage increase).
    pub ttft: f64,
    /// Request start → first answer (content) chunk; equals `ttft` without
    /// reasoning, 0 when no content arrived.
    #[serde(default)]
    pub ttfo: f64,
    /// Request start → first tool-call chunk (a call's name or argument
    /// fragment); absent when the request streamed no tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttftc: Option<f64>,
    /// First → second token chunk (f₂ − f₁, methodology §7.1); `None`
    /// (JSON `null`) when fewer than two arrived. A true 0 — both chunks
    /// taken from one socket read — is a measured value and is kept.
    #[serde(default)]
    pub time_to_second_token: Option<f64>,
    /// Request start → last content chunk, for completed requests only (else 0).
    pub latency: f64,
    /// Mean time per output token after the first (per token, not per chunk).
    pub inter_token_latency_avg: f64,
    /// Mean per-token gap over the gaps inside the window (0 when none).
    #[serde(default)]
    pub window_inter_token_latency_avg: f64,
    /// Mean gap between consecutive content chunks.
    pub chunk_inter_token_latency_avg: f64,
    /// Prompt tokens reported by the server (0 if never reported).
    pub input_tokens: u64,
    /// Output tokens (usage when reported, else content chunks).
    pub output_tokens: u64,
    /// Of those, reasoning tokens (usage details when reported, else by chunk channel).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Of those, tokens of streamed tool calls (by chunk channel; absent when 0).
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub tool_call_tokens: u64,
    /// 1 / `inter_token_latency_avg`.
    pub output_tps_per_user: f64,
    /// `output_tokens / latency` for completed requests (else 0).
    pub e2e_output_tps_per_user: f64,
    /// The stream reached its natural end (`[DONE]` arrived).
    pub completed: bool,
    /// Request start, relative to the window start.
    pub start_s: f64,
    /// First content chunk, relative to the window start (null if none).
    pub first_token_s: Option<f64>,
    /// Last content chunk, relative to the window start (null if none).
    pub end_s: Option<f64>,
    /// The request produced tokens inside the measurement window.
    pub in_window: bool,
    /// Its first token arrived inside the window (its TTFT is a windowed one).
    #[serde(default)]
    pub first_token_in_window: bool,
    /// Where the per-token ITL came from: `usage` (token counts) or `chunks`.
    pub itl_source: String,
    /// The server's finish reason (`length`, `stop`, …), empty when none arrived.
    #[serde(default)]
    pub finish_reason: String,
    /// Failure reason, empty when the request did not fail.
    pub error: String,
}

/// Latency distribution fields, written as `<name>_avg`, `_p50`, `_p90`, `_p99`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Arithmetic mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl From<Summary> for Dist {
    fn from(s: Summary) -> Self {
        Dist {
            avg: s.avg,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
        }
    }
}

/// Client latency statistics over one set of request samples.
///
/// Written flat, `<metric>_avg`/`_p50`/`_p90`/`_p99` in the reference's key
/// order (see `LatencyWire`); a distribution that is `None` writes four
/// `null`s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "LatencyWire", into = "LatencyWire")]
pub struct LatencyStats {
    /// Time to first token (`None`: no first token in the window; JSON `null`).
    pub ttft: Option<Dist>,
    /// Time from first to second token chunk (`None` like `ttft`).
    pub time_to_second_token: Option<Dist>,
    /// Time to first output (answer) token (`None` like `ttft`).
    pub ttfo: Option<Dist>,
    /// Time to first tool-call token, over the requests that streamed a
    /// call (`None` when none did; its keys are then left out).
    pub ttftc: Option<Dist>,
    /// Request latency (completed requests only).
    pub request_latency: Dist,
    /// Per-token inter-token latency.
    pub inter_token_latency: Dist,
    /// Per-user output tok/s (1 / ITL).
    pub output_tps_per_user: Dist,
    /// Per-user end-to-end tok/s (completed requests only).
    pub e2e_output_tps_per_user: Dist,
    /// Mean gap between content chunks.
    pub chunk_inter_token_latency: Dist,
    /// Mean input sequence length.
    pub input_seq_len_avg: f64,
    /// Output sequence length distribution.
    pub output_seq_len: Dist,
    /// Samples with at least one output token.
    pub request_count: u64,
    /// Of those, samples that completed.
    pub completed_request_count: u64,
}

/// The flat JSON layout of [`LatencyStats`], key for key in the order the
/// reference wrote them. Every number is optional on read so that a file
/// missing some (or carrying `null`) still loads; an absent number reads as 0
/// in a distribution that cannot be `None`.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct LatencyWire {
    ttft_avg: Option<f64>,
    ttft_p50: Option<f64>,
    ttft_p90: Option<f64>,
    ttft_p99: Option<f64>,
    time_to_second_token_avg: Option<f64>,
    time_to_second_token_p50: Option<f64>,
    time_to_second_token_p90: Option<f64>,
    time_to_second_token_p99: Option<f64>,
    request_latency_avg: Option<f64>,
    request_latency_p50: Option<f64>,
    request_latency_p90: Option<f64>,
    request_latency_p99: Option<f64>,
    inter_token_latency_avg: Option<f64>,
    inter_token_latency_p50: Option<f64>,
    inter_token_latency_p90: Option<f64>,
    inter_token_latency_p99: Option<f64>,
    output_tps_per_user_avg: Option<f64>,
    output_tps_per_user_p50: Option<f64>,
    output_tps_per_user_p90: Option<f64>,
    output_tps_per_user_p99: Option<f64>,
    e2e_output_tps_per_user_avg: Option<f64>,
    e2e_output_tps_per_user_p50: Option<f64>,
    e2e_output_tps_per_user_p90: Option<f64>,
    e2e_output_tps_per_user_p99: Option<f64>,
    chunk_inter_token_latency_avg: Option<f64>,
    chunk_inter_token_latency_p50: Option<f64>,
    chunk_inter_token_latency_p90: Option<f64>,
    chunk_inter_token_latency_p99: Option<f64>,
    ttfo_avg: Option<f64>,
    ttfo_p50: Option<f64>,
    ttfo_p90: Option<f64>,
    ttfo_p99: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttftc_avg: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttftc_p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttftc_p90: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttftc_p99: Option<f64>,
    input_seq_len_avg: Option<f64>,
    output_seq_len_avg: Option<f64>,
    output_seq_len_p50: Option<f64>,
    output_seq_len_p90: Option<f64>,
    output_seq_len_p99: Option<f64>,
    request_count: u64,
    completed_request_count: u64,
}

type Four = [Option<f64>; 4];

fn four(d: Option<Dist>) -> Four {
    d.map_or([None; 4], |d| {
        [Some(d.avg), Some(d.p50), Some(d.p90), Some(d.p99)]
    })
}

/// A distribution that may be `None`: it is `None` when no key carries a number.
fn opt_dist(v: Four) -> Option<Dist> {
    v.iter().any(Option::is_some).then(|| dist(v))
}

fn dist(v: Four) -> Dist {
    let [avg, p50, p90, p99] = v.map(|x| x.unwrap_or(0.0));
    Dist { avg, p50, p90, p99 }
}

impl From<LatencyStats> for LatencyWire {
    fn from(l: LatencyStats) -> Self {
        let [ttft_avg, ttft_p50, ttft_p90, ttft_p99] = four(l.ttft);
        let [tst_avg, tst_p50, tst_p90, tst_p99] = four(l.time_to_second_token);
        let [rl_avg, rl_p50, rl_p90, rl_p99] = four(Some(l.request_latency));
        let [itl_avg, itl_p50, itl_p90, itl_p99] = four(Some(l.inter_token_latency));
        let [otps_avg, otps_p50, otps_p90, otps_p99] = four(Some(l.output_tps_per_user));
        let [e2e_avg, e2e_p50, e2e_p90, e2e_p99] = four(Some(l.e2e_output_tps_per_user));
        let [chunk_avg, chunk_p50, chunk_p90, chunk_p99] = four(Some(l.chunk_inter_token_latency));
        let [ttfo_avg, ttfo_p50, ttfo_p90, ttfo_p99] = four(l.ttfo);
        let [osl_avg, osl_p50, osl_p90, osl_p99] = four(Some(l.output_seq_len));
        let [ttftc_avg, ttftc_p50, ttftc_p90, ttftc_p99] = four(l.ttftc);
        LatencyWire {
            ttft_avg,
            ttft_p50,
            ttft_p90,
            ttft_p99,
            time_to_second_token_avg: tst_avg,
            time_to_second_token_p50: tst_p50,
            time_to_second_token_p90: tst_p90,
            time_to_second_token_p99: tst_p99,
            request_latency_avg: rl_avg,
            request_latency_p50: rl_p50,
            request_latency_p90: rl_p90,
            request_latency_p99: rl_p99,
            inter_token_latency_avg: itl_avg,
            inter_token_latency_p50: itl_p50,
            inter_token_latency_p90: itl_p90,
            inter_token_latency_p99: itl_p99,
            output_tps_per_user_avg: otps_avg,
            output_tps_per_user_p50: otps_p50,
            output_tps_per_user_p90: otps_p90,
            output_tps_per_user_p99: otps_p99,
            e2e_output_tps_per_user_avg: e2e_avg,
            e2e_output_tps_per_user_p50: e2e_p50,
            e2e_output_tps_per_user_p90: e2e_p90,
            e2e_output_tps_per_user_p99: e2e_p99,
            chunk_inter_token_latency_avg: chunk_avg,
            chunk_inter_token_latency_p50: chunk_p50,
            chunk_inter_token_latency_p90: chunk_p90,
            chunk_inter_token_latency_p99: chunk_p99,
            ttfo_avg,
            ttfo_p50,
            ttfo_p90,
            ttfo_p99,
            ttftc_avg,
            ttftc_p50,
            ttftc_p90,
            ttftc_p99,
            input_seq_len_avg: Some(l.input_seq_len_avg),
            output_seq_len_avg: osl_avg,
            output_seq_len_p50: osl_p50,
            output_seq_len_p90: osl_p90,
            output_seq_len_p99: osl_p99,
            request_count: l.request_count,
            completed_request_count: l.completed_request_count,
        }
    }
}

impl From<LatencyWire> for LatencyStats {
    fn from(w: LatencyWire) -> Self {
        LatencyStats {
            ttft: opt_dist([w.ttft_avg, w.ttft_p50, w.ttft_p90, w.ttft_p99]),
            time_to_second_token: opt_dist([
                w.time_to_second_token_avg,
                w.time_to_second_token_p50,
                w.time_to_second_token_p90,
                w.time_to_second_token_p99,
            ]),
            ttfo: opt_dist([w.ttfo_avg, w.ttfo_p50, w.ttfo_p90, w.ttfo_p99]),
            ttftc: opt_dist([w.ttftc_avg, w.ttftc_p50, w.ttftc_p90, w.ttftc_p99]),
            request_latency: dist([
                w.request_latency_avg,
                w.request_latency_p50,
                w.request_latency_p90,
                w.request_latency_p99,
            ]),
            inter_token_latency: dist([
                w.inter_token_latency_avg,
                w.inter_token_latency_p50,
                w.inter_token_latency_p90,
                w.inter_token_latency_p99,
            ]),
            output_tps_per_user: dist([
                w.output_tps_per_user_avg,
                w.output_tps_per_user_p50,
                w.output_tps_per_user_p90,
                w.output_tps_per_user_p99,
            ]),
            e2e_output_tps_per_user: dist([
                w.e2e_output_tps_per_user_avg,
                w.e2e_output_tps_per_user_p50,
                w.e2e_output_tps_per_user_p90,
                w.e2e_output_tps_per_user_p99,
            ]),
            chunk_inter_token_latency: dist([
                w.chunk_inter_token_latency_avg,
                w.chunk_inter_token_latency_p50,
                w.chunk_inter_token_latency_p90,
                w.chunk_inter_token_latency_p99,
            ]),
            input_seq_len_avg: w.input_seq_len_avg.unwrap_or(0.0),
            output_seq_len: dist([
                w.output_seq_len_avg,
                w.output_seq_len_p50,
                w.output_seq_len_p90,
                w.output_seq_len_p99,
            ]),
            request_count: w.request_count,
            completed_request_count: w.completed_request_count,
        }
    }
}
