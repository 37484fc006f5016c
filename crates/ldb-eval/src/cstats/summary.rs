//! Summaries over runs: counts, score labels, distributions of the per-run
//! metrics and the aggregate rates (docs/completion-stats.md defines each).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::run::CsRun;
use ldb_core::result::Dist;
use ldb_core::stats::summarize;

/// One metric's distribution over the completed runs: the result model's
/// [`Dist`] (avg, p50, p90, p99: the figures a decode cell has too) and the
/// spread this document adds (min, max, population std). `None` in the
/// summary when no run measured it.
///
/// One distribution type in the program: the four shared figures are a
/// `Dist`, read through `Deref` (`spread.p50`); the JSON object keeps this
/// file's key order, `avg, min, max, p50, p90, p99, std`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "SpreadWire", into = "SpreadWire")]
pub struct DistSpread {
    /// Mean and percentiles (linear interpolation, as every percentile in
    /// this tool).
    pub dist: Dist,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Population standard deviation.
    pub std: f64,
}

impl std::ops::Deref for DistSpread {
    type Target = Dist;

    fn deref(&self) -> &Dist {
        &self.dist
    }
}

impl DistSpread {
    /// The distribution of the positive finite values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<DistSpread> {
        let s = summarize(values);
        (s.n > 0).then_some(DistSpread {
            dist: Dist::from(s),
            min: s.min,
            max: s.max,
            std: s.std,
        })
    }
}

/// The JSON object of [`DistSpread`], key for key in the file's order.
#[derive(Serialize, Deserialize)]
struct SpreadWire {
    avg: f64,
    min: f64,
    max: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    std: f64,
}

impl From<SpreadWire> for DistSpread {
    fn from(w: SpreadWire) -> DistSpread {
        DistSpread {
            dist: Dist {
                avg: w.avg,
                p50: w.p50,
                p90: w.p90,
                p99: w.p99,
            },
            min: w.min,
            max: w.max,
            std: w.std,
        }
    }
}

impl From<DistSpread> for SpreadWire {
    fn from(d: DistSpread) -> SpreadWire {
        SpreadWire {
            avg: d.dist.avg,
            min: d.min,
            max: d.max,
            p50: d.dist.p50,
            p90: d.dist.p90,
            p99: d.dist.p99,
            std: d.std,
        }
    }
}

/// The summary object of `selected_summary`, `all_summary` and each level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Requests sent (cancelled ones included).
    pub attempted: usize,
    /// Finished without error with at least one token.
    pub completed: usize,
    /// Failed requests (not counting cancelled ones).
    pub errors: usize,
    /// Completed runs the scorer judged correct.
    pub correct: usize,
    /// Completed runs the scorer judged not correct.
    pub wrong: usize,
    /// Completed runs per score label.
    pub score_counts: BTreeMap<String, usize>,
    /// Label `exact`.
    pub exact: usize,
    /// Label `near`.
    pub near: usize,
    /// Label `fail`.
    pub fail: usize,
    /// Label `truncated`.
    pub truncated: usize,
    /// `correct / (correct + wrong)`; `None` without scores.
    pub correct_rate: Option<f64>,
    /// Some completed run was scored.
    pub score_available: bool,
    /// Completed runs that stopped at `max_tokens`.
    pub hit_max_tokens: usize,
    /// Completed runs whose token count is a chunk count.
    pub estimated_token_runs: usize,
    /// Completion tokens per run.
    pub completion_tokens: Option<DistSpread>,
    /// Time to first token.
    pub ttft: Option<DistSpread>,
    /// Send → end of the request.
    pub elapsed: Option<DistSpread>,
    /// First → last output chunk.
    pub gen_elapsed: Option<DistSpread>,
    /// Per-run `completion_tokens / gen_elapsed`.
    pub gen_tok_s: Option<DistSpread>,
    /// Per-run `completion_tokens / elapsed`.
    pub e2e_tok_s: Option<DistSpread>,
    /// `Σ completion_tokens` over the time some completed run was generating
    /// (the union of their first → last chunk intervals); with one request
    /// at a time this is `Σ completion_tokens / Σ gen_elapsed`.
    pub aggregate_gen_tok_s: f64,
    /// As `aggregate_gen_tok_s` over send → end intervals.
    pub aggregate_e2e_tok_s: f64,
}

/// The summary of `runs`.
pub fn summarize_runs<'a>(runs: impl IntoIterator<Item = &'a CsRun>) -> RunSummary {
    let runs: Vec<&CsRun> = runs.into_iter().collect();
    let done: Vec<&CsRun> = runs.iter().copied().filter(|r| r.completed()).collect();
    let mut s = RunSummary {
        attempted: runs.len(),
        completed: done.len(),
        errors: runs.iter().filter(|r| !r.ok && !r.cancelled).count(),
        ..RunSummary::default()
    };
    for r in &done {
        match r.correct {
            Some(true) => s.correct += 1,
            Some(false) => s.wrong += 1,
            None => {}
        }
        if let Some(label) = &r.score_label {
            *s.score_counts.entry(label.clone()).or_default() += 1;
        }
        s.hit_max_tokens += usize::from(r.hit_max_tokens);
        s.estimated_token_runs += usize::from(r.estimated_tokens);
    }
    let count = |l: &str| s.score_counts.get(l).copied().unwrap_or(0);
    (s.exact, s.near, s.fail, s.truncated) = (
        count("exact"),
        count("near"),
        count("fail"),
        count("truncated"),
    );
    let scored = s.correct + s.wrong;
    s.score_available = scored > 0;
    s.correct_rate = (scored > 0).then(|| s.correct as f64 / scored as f64);
    let metric = |f: fn(&CsRun) -> f64| DistSpread::of(done.iter().map(|r| f(r)));
    s.completion_tokens = metric(|r| r.completion_tokens as f64);
    s.ttft = metric(|r| r.ttft.unwrap_or(0.0));
    s.elapsed = metric(|r| r.elapsed);
    s.gen_elapsed = metric(|r| r.gen_elapsed);
    s.gen_tok_s = metric(|r| r.gen_tok_s);
    s.e2e_tok_s = metric(|r| r.e2e_tok_s);
    let tokens: f64 = done.iter().map(|r| r.completion_tokens as f64).sum();
    let ratio = |den: f64| if den > 0.0 { tokens / den } else { 0.0 };
    s.aggregate_gen_tok_s =
        ratio(union_seconds(done.iter().filter_map(|r| {
            r.first_token_at.map(|f| (f, f + r.gen_elapsed))
        })));
    s.aggregate_e2e_tok_s = ratio(union_seconds(
        done.iter().map(|r| (r.sent_at, r.sent_at + r.elapsed)),
    ));
    s
}

/// Seconds covered by at least one of the intervals `(start, end)`: the
/// time some request was generating. For requests that never overlap (one
/// at a time) it is the sum of their lengths, so the aggregate rate is
/// Σ tokens / Σ gen_elapsed; for parallel requests it is the batch's wall
/// time, so the aggregate rate is the server's total output rate.
pub fn union_seconds(intervals: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let mut v: Vec<(f64, f64)> = intervals
        .into_iter()
        .filter(|(a, b)| a.is_finite() && b.is_finite() && b > a)
        .collect();
    v.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (a, b) in v {
        current = match current {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cstats::run::Phase;

    pub(crate) fn run(tokens: u64, gen_s: f64, elapsed: f64, label: Option<&str>) -> CsRun {
        CsRun {
            run_index: 0,
            phase: Phase::Profile,
            concurrency: 1,
            ok: true,
            correct: label.map(|l| l == "pass" || l == "exact"),
            completion_tokens: tokens,
            prompt_tokens: None,
            elapsed,
            gen_elapsed: gen_s,
            ttft: Some(elapsed - gen_s),
            time_to_second_token: None,
            gen_tok_s: tokens as f64 / gen_s,
            e2e_tok_s: tokens as f64 / elapsed,
            finish_reason: Some("stop".into()),
            final_answer: String::new(),
            score_label: label.map(str::to_owned),
            score_detail: String::new(),
            parsed_answer: None,
            output_excerpt: String::new(),
            output_text: String::new(),
            reasoning_text: String::new(),
            content_text: String::new(),
            error: None,
            hit_max_tokens: false,
            estimated_tokens: false,
            cancelled: false,
            item_id: None,
            category: None,
            expected_answer: None,
            sent_at: 0.0,
            first_token_at: Some(elapsed - gen_s),
            ended_at: elapsed,
        }
    }

    /// `r` moved to start at `t` on the run clock.
    pub(crate) fn at(mut r: CsRun, t: f64) -> CsRun {
        r.sent_at += t;
        r.first_token_at = r.first_token_at.map(|f| f + t);
        r.ended_at += t;
        r
    }

    #[test]
    fn counts_distributions_and_aggregates() {
        let mut failed = run(0, 0.0, 1.0, None);
        failed.ok = false;
        failed.error = Some("HTTP 500".into());
        let mut cancelled = run(3, 1.0, 1.0, None);
        cancelled.ok = false;
        cancelled.cancelled = true;
        // one after the other: no overlap
        let runs = vec![
            run(100, 2.0, 2.5, Some("pass")),
            at(run(300, 4.0, 4.5, Some("fail")), 10.0),
            at(run(200, 2.0, 2.5, Some("pass")), 20.0),
            failed,
            cancelled,
        ];
        let s = summarize_runs(&runs);
        assert_eq!((s.attempted, s.completed, s.errors), (5, 3, 1));
        assert_eq!((s.correct, s.wrong), (2, 1));
        assert_eq!(s.score_counts.get("pass"), Some(&2));
        assert!((s.correct_rate.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        let t = s.completion_tokens.unwrap();
        assert_eq!((t.min, t.max, t.avg, t.p50), (100.0, 300.0, 200.0, 200.0));
        // population std of 100, 200, 300
        assert!((t.std - (20000.0f64 / 3.0).sqrt()).abs() < 1e-9);
        // Σtokens / Σgen_elapsed = 600 / 8, not the mean of the per-run rates
        assert!((s.aggregate_gen_tok_s - 75.0).abs() < 1e-12);
        assert!((s.aggregate_e2e_tok_s - 600.0 / 9.5).abs() < 1e-12);
    }

    /// The spread writes the keys the file always had, in its order, and
    /// reads back to itself.
    #[test]
    fn a_spread_keeps_the_files_keys_and_round_trips() {
        let d = DistSpread::of([1.0, 2.0, 3.0, 10.0]).expect("values");
        assert_eq!((d.min, d.max, d.avg), (1.0, 10.0, 4.0));
        let text = serde_json::to_string(&d).unwrap();
        let keys: Vec<&str> = text
            .trim_matches(|c| c == '{' || c == '}')
            .split(',')
            .filter_map(|kv| kv.split(':').next())
            .collect();
        assert_eq!(
            keys,
            [
                "\"avg\"", "\"min\"", "\"max\"", "\"p50\"", "\"p90\"", "\"p99\"", "\"std\""
            ]
        );
        let back: DistSpread = serde_json::from_str(&text).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn parallel_requests_aggregate_to_the_total_output_rate() {
        // four requests of 100 tokens generating over the same 2 s: 200 tok/s
        let runs: Vec<CsRun> = (0..4).map(|_| run(100, 2.0, 2.5, None)).collect();
        let s = summarize_runs(&runs);
        assert!((s.aggregate_gen_tok_s - 200.0).abs() < 1e-9);
        assert!((s.gen_tok_s.unwrap().avg - 50.0).abs() < 1e-9);
        assert!((union_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) - 4.0).abs() < 1e-12);
        assert_eq!(union_seconds([]), 0.0);
    }

    #[test]
    fn nothing_completed_is_all_empty() {
        let s = summarize_runs(&[]);
        assert_eq!(s.completed, 0);
        assert!(s.completion_tokens.is_none() && s.correct_rate.is_none());
        assert_eq!(s.aggregate_gen_tok_s, 0.0);
    }
}
