//! The coding-peak probe's section of the result file (`coding_peak`).
//!
//! After the matrix, a few single-stream requests run one after another with
//! a coding prompt and the server's own stop (no `ignore_eos`): the best
//! decode speed one user sees on a realistic answer, next to the matrix's
//! synthetic long generations. The times are measured by the client
//! (`ldb-client::text_stream`); this module turns them into the samples and
//! the summary. Definitions in docs/methodology.md ("Coding peak").

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cjk::count_han;
use crate::prompt::Message;

/// The prompt used without `--coding-peak-prompt` (the reference's default,
/// kept so that numbers compare across the two tools).
pub const DEFAULT_PROMPT: &str = "Write a Python script that implements the Sieve of Eratosthenes.";

/// Characters of the answer kept in `content_preview`.
pub const PREVIEW_CHARS: usize = 500;

/// What one request measured, in seconds since it was sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// `finish_reason` of the last choice, if the server sent one.
    pub finish_reason: Option<String>,
    /// `usage.completion_tokens` of the last chunk that carried usage.
    pub completion_tokens: Option<u64>,
    /// Send → first chunk with text (or a tool call).
    pub first_token: Option<f64>,
    /// Send → the last event of the stream (`[DONE]`, or the last chunk).
    pub end: f64,
    /// The answer (`delta.content`).
    pub content: String,
    /// The thinking (`delta.reasoning` / `reasoning_content`).
    pub reasoning: String,
}

/// One run: the measurements, or why it failed. Written as all the measured
/// keys (null where unknown, e.g. no usage) for an ok run, and as `run`,
/// `ok: false` and `error` alone for a failed one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Sample {
    /// 1-based run number.
    pub run: u32,
    /// The request completed.
    pub ok: bool,
    /// `finish_reason` (`stop`, `length`, …).
    pub finish_reason: Option<String>,
    /// `usage.completion_tokens` (null when the server sent no usage).
    pub completion_tokens: Option<u64>,
    /// Time to first token, s.
    pub ttft: Option<f64>,
    /// First token → stream end, s.
    pub gen_elapsed: Option<f64>,
    /// Send → stream end, s.
    pub total_elapsed: Option<f64>,
    /// completion_tokens / gen_elapsed.
    pub generation_tok_s: Option<f64>,
    /// completion_tokens / total_elapsed.
    pub total_tok_s: Option<f64>,
    /// Characters of the answer.
    pub content_chars: Option<u64>,
    /// Characters of the thinking.
    pub reasoning_chars: Option<u64>,
    /// Han ideographs in thinking and answer ([`crate::cjk`]).
    pub cjk_chars: Option<u64>,
    /// The first [`PREVIEW_CHARS`] characters of the answer.
    pub content_preview: Option<String>,
    /// Why the run failed (failed runs only).
    pub error: Option<String>,
}

#[derive(Serialize)]
struct OkOut<'a> {
    run: u32,
    ok: bool,
    finish_reason: &'a Option<String>,
    completion_tokens: Option<u64>,
    ttft: Option<f64>,
    gen_elapsed: Option<f64>,
    total_elapsed: Option<f64>,
    generation_tok_s: Option<f64>,
    total_tok_s: Option<f64>,
    content_chars: Option<u64>,
    reasoning_chars: Option<u64>,
    cjk_chars: Option<u64>,
    content_preview: &'a Option<String>,
}

#[derive(Serialize)]
struct FailedOut<'a> {
    run: u32,
    ok: bool,
    error: &'a str,
}

impl Serialize for Sample {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.ok {
            return FailedOut {
                run: self.run,
                ok: false,
                error: self.error.as_deref().unwrap_or(""),
            }
            .serialize(s);
        }
        OkOut {
            run: self.run,
            ok: true,
            finish_reason: &self.finish_reason,
            completion_tokens: self.completion_tokens,
            ttft: self.ttft,
            gen_elapsed: self.gen_elapsed,
            total_elapsed: self.total_elapsed,
            generation_tok_s: self.generation_tok_s,
            total_tok_s: self.total_tok_s,
            content_chars: self.content_chars,
            reasoning_chars: self.reasoning_chars,
            cjk_chars: self.cjk_chars,
            content_preview: &self.content_preview,
        }
        .serialize(s)
    }
}

impl Sample {
    /// A completed run.
    pub fn measured(run: u32, m: &Measured) -> Sample {
        let ttft = m.first_token;
        let gen_elapsed = ttft.map(|f| (m.end - f).max(0.0));
        let rate = |tokens: Option<u64>, secs: Option<f64>| match (tokens, secs) {
            (Some(n), Some(s)) if s > 0.0 => Some(n as f64 / s),
            _ => None,
        };
        Sample {
            run,
            ok: true,
            finish_reason: m.finish_reason.clone(),
            completion_tokens: m.completion_tokens,
            ttft,
            gen_elapsed,
            total_elapsed: Some(m.end),
            generation_tok_s: rate(m.completion_tokens, gen_elapsed),
            total_tok_s: rate(m.completion_tokens, Some(m.end)),
            content_chars: Some(m.content.chars().count() as u64),
            reasoning_chars: Some(m.reasoning.chars().count() as u64),
            cjk_chars: Some(count_han(&m.reasoning) + count_han(&m.content)),
            content_preview: Some(m.content.chars().take(PREVIEW_CHARS).collect()),
            error: None,
        }
    }

    /// A failed run: data, not the end of the probe.
    pub fn failed(run: u32, error: impl Into<String>) -> Sample {
        Sample {
            run,
            ok: false,
            error: Some(error.into()),
            ..Sample::default()
        }
    }
}

/// Generation rates over the ok runs (null when none has one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Mean of `generation_tok_s`.
    pub mean_generation_tok_s: Option<f64>,
    /// Median of `generation_tok_s`.
    pub median_generation_tok_s: Option<f64>,
    /// Highest `generation_tok_s`: the peak.
    pub max_generation_tok_s: Option<f64>,
    /// Lowest `generation_tok_s`.
    pub min_generation_tok_s: Option<f64>,
    /// Ok runs whose text held at least one Han ideograph.
    pub cjk_runs: u64,
}

impl Summary {
    /// The summary of `samples`.
    pub fn of(samples: &[Sample]) -> Summary {
        let mut rates: Vec<f64> = samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(|s| s.generation_tok_s)
            .filter(|r| r.is_finite())
            .collect();
        rates.sort_by(f64::total_cmp);
        let cjk_runs = samples
            .iter()
            .filter(|s| s.ok && s.cjk_chars.unwrap_or(0) > 0)
            .count() as u64;
        if rates.is_empty() {
            return Summary {
                cjk_runs,
                ..Summary::default()
            };
        }
        Summary {
            mean_generation_tok_s: Some(rates.iter().sum::<f64>() / rates.len() as f64),
            median_generation_tok_s: Some(crate::stats::percentile_sorted(&rates, 50.0)),
            max_generation_tok_s: rates.last().copied(),
            min_generation_tok_s: rates.first().copied(),
            cjk_runs,
        }
    }
}

/// The `coding_peak` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodingPeak {
    /// Always `"coding_peak"`.
    pub mode: String,
    /// The prompt sent.
    pub prompt: String,
    /// `--coding-peak-runs`.
    pub runs_requested: u32,
    /// Runs that completed.
    pub runs_ok: u32,
    /// `max_tokens` of each request.
    pub max_tokens: u64,
    /// Sampling temperature (null: not sent).
    pub temperature: Option<f64>,
    /// Over the ok runs.
    pub summary: Summary,
    /// Every run, in order.
    pub samples: Vec<Sample>,
}

impl CodingPeak {
    /// The section for `samples` of a probe with these settings.
    pub fn new(
        prompt: &str,
        runs_requested: u32,
        max_tokens: u64,
        temperature: Option<f64>,
        samples: Vec<Sample>,
    ) -> CodingPeak {
        CodingPeak {
            mode: "coding_peak".to_string(),
            prompt: prompt.to_string(),
            runs_requested,
            runs_ok: samples.iter().filter(|s| s.ok).count() as u32,
            max_tokens,
            temperature,
            summary: Summary::of(&samples),
            samples,
        }
    }
}

/// A streamed chat request with continuous usage and the server's own stop
/// (no `ignore_eos`), as the coding peak and the CJK watchdog send it
/// (written by [`crate::api::Api::body`]).
pub fn chat_request(
    model: &str,
    messages: &[Message],
    max_tokens: u64,
    temperature: Option<f64>,
) -> Value {
    crate::api::Api::Chat.body(&crate::api::RequestInput {
        model,
        messages,
        max_tokens: Some(max_tokens),
        continuous_usage: true,
        temperature,
        ..crate::api::RequestInput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(tokens: Option<u64>, first: Option<f64>, end: f64, content: &str) -> Measured {
        Measured {
            finish_reason: Some("stop".into()),
            completion_tokens: tokens,
            first_token: first,
            end,
            content: content.into(),
            reasoning: String::new(),
        }
    }

    #[test]
    fn generation_rate_leaves_out_the_time_to_first_token() {
        let s = Sample::measured(1, &m(Some(100), Some(0.5), 2.5, "ok 中"));
        assert_eq!(s.generation_tok_s, Some(50.0));
        assert_eq!(s.total_tok_s, Some(40.0));
        assert_eq!(s.gen_elapsed, Some(2.0));
        assert_eq!((s.content_chars, s.cjk_chars), (Some(4), Some(1)));
    }

    #[test]
    fn a_failed_run_has_only_run_ok_and_error() {
        let v = serde_json::to_value(Sample::failed(3, "HTTP 500")).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"run": 3, "ok": false, "error": "HTTP 500"})
        );
        // An ok run without usage keeps its measured keys, as null.
        let v =
            serde_json::to_value(Sample::measured(1, &m(None, Some(0.1), 1.0, "x"))).expect("json");
        assert_eq!(v["completion_tokens"], Value::Null);
        assert!(
            v.as_object()
                .expect("object")
                .contains_key("generation_tok_s")
        );
    }

    #[test]
    fn summary_is_over_the_ok_runs() {
        let samples = vec![
            Sample::measured(1, &m(Some(100), Some(0.0), 1.0, "a")),
            Sample::failed(2, "boom"),
            Sample::measured(3, &m(Some(300), Some(0.0), 1.0, "漢")),
            Sample::measured(4, &m(Some(200), Some(0.0), 1.0, "b")),
        ];
        let p = CodingPeak::new(DEFAULT_PROMPT, 4, 2000, None, samples);
        assert_eq!(p.runs_ok, 3);
        let s = &p.summary;
        assert_eq!(s.mean_generation_tok_s, Some(200.0));
        assert_eq!(s.median_generation_tok_s, Some(200.0));
        assert_eq!(
            (s.max_generation_tok_s, s.min_generation_tok_s),
            (Some(300.0), Some(100.0))
        );
        assert_eq!(s.cjk_runs, 1);
        let none = Summary::of(&[Sample::failed(1, "x")]);
        assert_eq!(none.max_generation_tok_s, None);
    }

    #[test]
    fn the_request_streams_with_continuous_usage_and_no_ignore_eos() {
        let msgs = [Message {
            role: "user",
            content: "hi".into(),
            tool: None,
        }];
        let b = chat_request("m", &msgs, 7, Some(0.2));
        assert_eq!(b["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(b["max_tokens"], 7);
        assert_eq!(b["temperature"], 0.2);
        assert!(b.get("ignore_eos").is_none());
        assert!(
            chat_request("m", &msgs, 7, None)
                .get("temperature")
                .is_none()
        );
    }
}
