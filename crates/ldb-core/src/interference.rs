//! Prefill–decode interference (`--mixed-prefill-contexts`, methodology
//! §"Prefill–decode interference"): what one long prompt, arriving while C
//! streams decode, costs those streams and itself.
//!
//! Pure: the runner hands in each stream's token arrivals (run-clock
//! seconds) and the injection's times; this module turns them into the
//! numbers the result keeps. Time is `f64` seconds.

use serde::{Deserialize, Serialize};

use crate::result::round;
use crate::stats::median;

/// A stream is "stalled" by an injection when its longest token gap during
/// the injection exceeds this many times its own median gap in the stretch
/// before (a step that merely grew by a few percent is not a stall).
pub const STALL_FACTOR: f64 = 3.0;

/// The probe of one sustained cell: its stretches and one entry per length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// Length of the quiet stretch before each injection (its "before"
    /// rate and the streams' baseline gaps), seconds.
    pub quiet_s: f64,
    /// Settle stretch after each injection's first token (its "after"
    /// rate; the next injection waits for it), seconds.
    pub settle_s: f64,
    /// A stream counts as stalled above this many times its median gap.
    pub stall_factor: f64,
    /// One entry per `--mixed-prefill-contexts` length, in the flag's order.
    pub injections: Vec<Injection>,
}

/// One injected prompt of `prompt_tokens` tokens and what it did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Injection {
    /// The prompt's length, tokens (L).
    pub prompt_tokens: u64,
    /// Why it was not injected (beyond the model or the KV budget, a failed
    /// request, a cell cut short); absent when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// When it was sent (Unix seconds): after the cell's `window_end_unix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injected_at_unix: Option<f64>,
    /// Its TTFT with the C streams decoding, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    /// The same length's TTFT alone on the idle server, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solo_ttft_s: Option<f64>,
    /// `ttft_s / solo_ttft_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_inflation: Option<f64>,
    /// The streams' aggregate tok/s over the quiet stretch before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps_before: Option<f64>,
    /// The same from the injection to its first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps_during: Option<f64>,
    /// The same over the settle stretch after its first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps_after: Option<f64>,
    /// `100 × (1 − tps_during / tps_before)`, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_loss_pct: Option<f64>,
    /// The longest token gap any stream saw during the injection, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_max_s: Option<f64>,
    /// The median over the streams of each one's longest gap during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_p50_s: Option<f64>,
    /// The streams' median token gap in the quiet stretch, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_gap_s: Option<f64>,
    /// Streams whose longest gap during it exceeded `stall_factor` × their
    /// own median gap before.
    #[serde(default)]
    pub streams_stalled: u32,
    /// Streams that produced tokens around the injection.
    #[serde(default)]
    pub streams: u32,
}

impl Injection {
    /// An entry for a length that was not injected, and why.
    pub fn skipped(prompt_tokens: u64, why: impl Into<String>) -> Injection {
        Injection {
            prompt_tokens,
            skipped: Some(why.into()),
            ..Injection::default()
        }
    }
}

/// One token arrival of a stream: `n` tokens at `t`; `first` marks the
/// first tokens of a new request (the gap before it is that request's wait,
/// not a stall of a stream being read).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// Run-clock seconds.
    pub t: f64,
    /// Tokens in the chunk.
    pub n: u64,
    /// The request's first tokens.
    pub first: bool,
}

/// The times of one injection, run-clock seconds: `before` starts the quiet
/// stretch, `inject` sends the prompt, `first` is its first token, `after`
/// ends the settle stretch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Times {
    /// Start of the stretch before.
    pub before: f64,
    /// The injection.
    pub inject: f64,
    /// Its first token.
    pub first: f64,
    /// End of the stretch after.
    pub after: f64,
}

/// The streams' side of one injection: rates, stall and stalled streams.
/// `streams` holds each stream's arrivals in time order.
pub fn measure(streams: &[Vec<Arrival>], at: Times, stall_factor: f64) -> Injection {
    let rate = |a: f64, b: f64| {
        let n: u64 = streams
            .iter()
            .flatten()
            .filter(|x| x.t >= a && x.t < b)
            .map(|x| x.n)
            .sum();
        (b > a).then(|| n as f64 / (b - a))
    };
    let before = rate(at.before, at.inject);
    let during = rate(at.inject, at.first);
    let after = rate(at.first, at.after);
    let mut worst = Vec::new();
    let mut baselines = Vec::new();
    let mut stalled = 0u32;
    for s in streams {
        let base = gaps(s, |(a, b)| a >= at.before && b <= at.inject);
        let during_gaps = gaps(s, |(a, b)| b > at.inject && a < at.first);
        let Some(w) = during_gaps.iter().copied().reduce(f64::max) else {
            continue;
        };
        worst.push(w);
        if !base.is_empty() {
            let m = median(base.iter().copied());
            baselines.push(m);
            if w > stall_factor * m {
                stalled += 1;
            }
        }
    }
    Injection {
        tps_before: before.map(|v| round(v, 2)),
        tps_during: during.map(|v| round(v, 2)),
        tps_after: after.map(|v| round(v, 2)),
        decode_loss_pct: loss_pct(before, during),
        stall_max_s: worst.iter().copied().reduce(f64::max).map(|v| round(v, 4)),
        stall_p50_s: (!worst.is_empty()).then(|| round(median(worst.iter().copied()), 4)),
        baseline_gap_s: (!baselines.is_empty()).then(|| round(median(baselines), 4)),
        streams_stalled: stalled,
        streams: worst.len() as u32,
        ..Injection::default()
    }
}

/// The gaps between a stream's consecutive arrivals of one request whose
/// span `(earlier, later)` passes `keep`.
fn gaps(s: &[Arrival], keep: impl Fn((f64, f64)) -> bool) -> Vec<f64> {
    s.windows(2)
        .filter(|w| !w[1].first)
        .map(|w| (w[0].t, w[1].t))
        .filter(|&span| keep(span))
        .map(|(a, b)| b - a)
        .collect()
}

/// `100 × (1 − during / before)`; none without a positive rate before.
pub fn loss_pct(before: Option<f64>, during: Option<f64>) -> Option<f64> {
    match (before, during) {
        (Some(b), Some(d)) if b > 0.0 => Some(round(100.0 * (1.0 - d / b), 1)),
        _ => None,
    }
}

/// `with / alone`; none without a positive solo TTFT.
pub fn inflation(with: Option<f64>, alone: Option<f64>) -> Option<f64> {
    match (with, alone) {
        (Some(w), Some(a)) if a > 0.0 => Some(round(w / a, 2)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream with a token every `gap` seconds over `[from, to)`, its
    /// first arrival the start of a request when `first`.
    fn steady(from: f64, to: f64, gap: f64) -> Vec<Arrival> {
        let n = ((to - from) / gap - 1e-9).ceil() as usize;
        (0..n)
            .map(|i| Arrival {
                t: from + i as f64 * gap,
                n: 1,
                first: false,
            })
            .collect()
    }

    /// Two streams at 10 ms; during [2.0, 2.3) the engine takes three steps
    /// of 100 ms (a prompt in three chunks): every stream's longest gap is
    /// 100 ms, the rate falls from 200 to 20 tok/s (−90 %).
    #[test]
    fn three_chunk_steps_give_a_stall_of_one_step() {
        let mk = || {
            let mut s = steady(0.0, 2.0, 0.01);
            s.extend(steady(2.09, 2.3, 0.1));
            s.extend(steady(2.3, 4.0, 0.01));
            s
        };
        let streams = vec![mk(), mk()];
        let at = Times {
            before: 1.0,
            inject: 2.0,
            first: 2.3,
            after: 3.3,
        };
        let r = measure(&streams, at, STALL_FACTOR);
        assert_eq!(r.streams, 2);
        assert_eq!(r.streams_stalled, 2);
        assert!((r.stall_max_s.unwrap() - 0.1).abs() < 1e-6, "{r:?}");
        assert!((r.stall_p50_s.unwrap() - 0.1).abs() < 1e-6);
        assert!((r.baseline_gap_s.unwrap() - 0.01).abs() < 1e-6);
        // 2 streams × 3 tokens (2.09, 2.19, 2.29) in 0.3 s.
        assert!((r.tps_during.unwrap() - 20.0).abs() < 0.01, "{r:?}");
        assert!((r.tps_before.unwrap() - 200.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r.decode_loss_pct, Some(90.0));
    }

    /// A gap that ends at the first tokens of a new request is that
    /// request's wait, not a stall.
    #[test]
    fn a_new_request_is_not_a_stall() {
        let mut s = steady(0.0, 2.0, 0.01);
        let mut next = steady(2.5, 3.0, 0.01);
        next[0].first = true;
        s.extend(next);
        let at = Times {
            before: 1.0,
            inject: 2.1,
            first: 2.4,
            after: 3.0,
        };
        let r = measure(&[s], at, STALL_FACTOR);
        assert_eq!(r.streams, 0, "{r:?}");
        assert_eq!(r.stall_max_s, None);
    }

    /// A step that grew by half is no stall at factor 3.
    #[test]
    fn a_slightly_longer_step_is_not_counted_as_stalled() {
        let mut s = steady(0.0, 2.0, 0.01);
        s.extend(steady(2.015, 3.0, 0.015));
        let at = Times {
            before: 1.0,
            inject: 2.0,
            first: 2.2,
            after: 3.0,
        };
        let r = measure(&[s], at, STALL_FACTOR);
        assert_eq!((r.streams, r.streams_stalled), (1, 0), "{r:?}");
    }

    #[test]
    fn ratios_need_a_positive_denominator() {
        assert_eq!(inflation(Some(3.0), Some(1.5)), Some(2.0));
        assert_eq!(inflation(Some(3.0), Some(0.0)), None);
        assert_eq!(inflation(None, Some(1.0)), None);
        assert_eq!(loss_pct(Some(100.0), Some(25.0)), Some(75.0));
        assert_eq!(loss_pct(Some(0.0), Some(25.0)), None);
    }

    /// Older files have no key; a written probe reads back the same.
    #[test]
    fn round_trips_through_json() {
        let p = Interference {
            quiet_s: 1.0,
            settle_s: 1.0,
            stall_factor: STALL_FACTOR,
            injections: vec![
                Injection::skipped(1_000_000, "beyond the model's context"),
                Injection {
                    prompt_tokens: 4096,
                    ttft_s: Some(0.5),
                    streams: 4,
                    ..Injection::default()
                },
            ],
        };
        let s = serde_json::to_string(&p).unwrap();
        let back: Interference = serde_json::from_str(&s).unwrap();
        assert_eq!(back, p);
    }
}
