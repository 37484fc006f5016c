//! The completion-stats report: the console tables printed after a run
//! (its file and this text are written through `export::Json` and
//! `export::Text`). docs/completion-stats.md describes each table.

use std::io::{self, Write};

use ldb_eval::cstats::{CsDocument, CsRun, RunSummary};

use crate::text::TextOptions;
use crate::text::hardware::power_line;
use crate::text::style::{Tone, note, paint};
use crate::text::table::panel;
use crate::text::table::{Cell, Table};

/// Failed or wrong answers listed at most.
const FAILED_ROWS: usize = 12;
/// Characters of a final answer in the list.
const ANSWER_CHARS: usize = 140;
/// Widest prose (notes, panels), as in the decode report.
const TEXT_WIDTH: usize = 120;

/// Writes the report for `doc` to `w`.
pub fn render(doc: &CsDocument, opts: &TextOptions, w: &mut impl Write) -> io::Result<()> {
    for line in render_lines(doc, opts) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// The report as lines.
pub fn render_lines(doc: &CsDocument, opts: &TextOptions) -> Vec<String> {
    let color = opts.color;
    let md = &doc.metadata;
    let mut out = Vec::new();
    let how = match md.fixed_concurrency {
        Some(c) => format!("fixed concurrency C={c}"),
        None => format!(
            "adaptive concurrency over {} (probe size C x {}, +{:.0}% to improve, patience {})",
            join(&md.concurrency_levels_requested),
            md.probe_waves,
            md.min_improvement * 100.0,
            md.patience
        ),
    };
    out.push(paint("Completion Stats", Tone::Title, color));
    out.push(format!("  {} — {how}.", md.test_profile_description));
    if md.interrupted {
        out.push(paint(
            "  Run interrupted: the statistics cover the requests that finished before the stop.",
            Tone::Warn,
            color,
        ));
    }
    out.push(String::new());
    out.extend(profile_table(doc).render(color));
    out.push(String::new());
    let width = usize::from(opts.width).min(TEXT_WIDTH);
    if let Some(p) = run_power(doc) {
        out.extend(panel("Whole-run GPU Power", &p, width, color, false));
        out.push(String::new());
    }
    if !doc.level_summaries.is_empty() {
        let mut t = Table::new(
            "Concurrency Results",
            &[
                "parallel",
                "phase",
                "done/started",
                "score",
                "output tok p50",
                "output tok p90",
                "aggregate tok/s",
                "avg request s",
                "selected",
            ],
        )
        .right(&[0, 2, 4, 5, 6, 7]);
        for l in &doc.level_summaries {
            let s = &l.summary;
            let tok = s.completion_tokens.unwrap_or_default();
            t.push(vec![
                Cell::plain(l.concurrency.to_string()),
                Cell::plain(l.phase.as_str()),
                Cell::plain(format!("{}/{}", s.completed, s.attempted)),
                Cell::plain(score_text(s)),
                Cell::plain(format!("{:.0}", tok.p50)),
                Cell::plain(format!("{:.0}", tok.p90)),
                Cell::plain(format!("{:.1}", s.aggregate_gen_tok_s)),
                Cell::plain(format!("{:.2}", s.elapsed.unwrap_or_default().avg)),
                Cell::plain(if l.selected { "yes" } else { "" }),
            ]);
        }
        out.extend(t.render(color));
        out.push(String::new());
    }
    if let (Some(c), Some(s)) = (doc.selected_concurrency, &doc.selected_summary) {
        out.extend(selected_table(doc, c, s).render(color));
        out.push(String::new());
    }
    if !doc.category_summaries.is_empty() {
        let mut t = Table::new(
            "Per-category Accuracy",
            &["category", "scored", "correct", "accuracy"],
        )
        .right(&[1, 2, 3]);
        for c in &doc.category_summaries {
            t.push(vec![
                Cell::plain(c.category.clone()),
                Cell::plain(c.scored.to_string()),
                Cell::plain(c.correct.to_string()),
                Cell::plain(format!("{:.2}%", c.accuracy * 100.0)),
            ]);
        }
        out.extend(t.render(color));
        out.push(String::new());
    }
    if !doc.wrong_runs.is_empty() {
        out.extend(failed_table(&doc.wrong_runs).render(color));
        out.push(String::new());
    }
    if let Some(n) = scorer_note(&md.profile_scorer) {
        out.extend(note(n, width, color));
        out.push(String::new());
    }
    out
}

/// The whole-run power line of `hardware_run_summary`, when the run was
/// sampled and drew power (`{}` or a null summary prints nothing).
fn run_power(doc: &CsDocument) -> Option<String> {
    power_line(doc.hardware_run_summary.as_ref()?)
}

/// How to read the scores of the run's scorer, one dim line at the end.
fn scorer_note(scorer: &str) -> Option<&'static str> {
    Some(match scorer {
        "regex" => {
            "Scoring: PASS means the pattern matched the answer text; a match says the text contains \
             it, not that the reasoning behind it is right. TRUNC answers hit the token limit first."
        }
        "numeric_exact" => {
            "Scoring: EXACT is the expected number, NEAR lies within the tolerance, FAIL is any other \
             number or none; TRUNC answers hit the token limit before giving one."
        }
        "dataset_mc_letter" => {
            "Scoring: the letter the answer commits to (an answer tag on the last line, a bare letter, \
             else the last tag) is compared with the key; guessing alone scores one over the number \
             of options, so read accuracy against that floor and its Wilson interval."
        }
        "dataset_gsm8k" => {
            "Scoring: the last number of the answer's final line (else of the content) is compared \
             with the reference within 1e-4; an answer with no number, or cut by the token limit, \
             counts as wrong, so check those rows before blaming the arithmetic."
        }
        _ => return None,
    })
}

fn profile_table(doc: &CsDocument) -> Table {
    let md = &doc.metadata;
    let mut t = Table::new("Profile", &["setting", "value"]);
    let mut row = |k: &str, v: String| t.push(vec![Cell::plain(k), Cell::plain(v)]);
    row(
        "profile",
        if md.test_profile.is_empty() {
            "custom prompt".into()
        } else {
            md.test_profile.clone()
        },
    );
    row("model", format!("{} @ {}", md.model, md.server));
    row("prompt", md.prompt_source.clone());
    row("prompt chars", md.prompt_chars.to_string());
    if let Some(name) = &md.dataset {
        row(
            "dataset",
            format!(
                "{name} ({}/{} items)",
                md.dataset_items_selected.unwrap_or(0),
                md.dataset_items_total.unwrap_or(0)
            ),
        );
    }
    row("requested runs", md.requested_runs.to_string());
    row(
        "concurrency",
        md.fixed_concurrency.map_or_else(
            || format!("adaptive {}", join(&md.concurrency_levels_requested)),
            |c| c.to_string(),
        ),
    );
    row(
        "max tokens",
        md.max_tokens.map_or_else(
            || "omitted (server/model default)".into(),
            |n| n.to_string(),
        ),
    );
    row(
        "scoring",
        if md.profile_scorer.is_empty() {
            "off".into()
        } else if md.profile_scorer == "regex" {
            format!("regex /{}/i on {}", md.correct_regex, md.score_source)
        } else {
            md.profile_scorer.clone()
        },
    );
    if let Some(e) = &md.expected_answer {
        row("expected", e.clone());
    }
    row("prompt sha256", md.prompt_sha256.chars().take(16).collect());
    if let Some(s) = &md.dataset_sha256 {
        row("dataset sha256", s.chars().take(16).collect());
    }
    if let Some(s) = &doc.prefill_scout {
        let ttft = s.ttft.unwrap_or(0.0);
        row(
            "prefill scout",
            match s.prompt_tokens {
                Some(p) if ttft > 0.0 => {
                    format!("{p} prompt tok / {ttft:.2}s = {:.0} tok/s", p as f64 / ttft)
                }
                _ if s.ok => format!("TTFT {ttft:.2}s"),
                _ => format!("failed: {}", s.error.clone().unwrap_or_default()),
            },
        );
    }
    if let Some(kv) = md.kv_budget {
        row(
            "KV budget",
            format!("{kv} ({})", md.kv_source.clone().unwrap_or_default()),
        );
    }
    if let Some(m) = md.max_running_requests {
        row("max running", m.to_string());
    }
    t
}

fn selected_table(doc: &CsDocument, c: usize, s: &RunSummary) -> Table {
    let mut t = Table::new(&format!("Selected C={c}"), &["metric", "value"]);
    let mut row = |k: &str, v: String| t.push(vec![Cell::plain(k), Cell::plain(v)]);
    row("completed", format!("{}/{}", s.completed, s.attempted));
    row("errors", s.errors.to_string());
    row("score", score_text(s));
    if let Some(a) = &doc.accuracy {
        row(
            "accuracy",
            format!("{:.2}% ({}/{})", a.accuracy * 100.0, a.correct, a.scored),
        );
        row(
            "Wilson 95% CI",
            format!(
                "{:.2}% .. {:.2}%",
                a.wilson95_low * 100.0,
                a.wilson95_high * 100.0
            ),
        );
        row("truncated (no answer)", a.truncated_no_answer.to_string());
        row("unparseable (format)", a.unparseable.to_string());
    }
    row("hit max_tokens", s.hit_max_tokens.to_string());
    if let Some(d) = s.completion_tokens {
        row(
            "completion tokens avg/p50/p90/p99",
            format!("{:.1} / {:.0} / {:.0} / {:.0}", d.avg, d.p50, d.p90, d.p99),
        );
        row(
            "completion tokens min/max/std",
            format!("{:.0} / {:.0} / {:.1}", d.min, d.max, d.std),
        );
    }
    if s.estimated_token_runs > 0 {
        row(
            "estimated token counts",
            format!("{} runs (no usage from the server)", s.estimated_token_runs),
        );
    }
    row(
        "elapsed avg",
        format!("{:.2}s", s.elapsed.unwrap_or_default().avg),
    );
    row(
        "TTFT avg",
        format!("{:.3}s", s.ttft.unwrap_or_default().avg),
    );
    row(
        "aggregate gen tok/s",
        format!("{:.1}", s.aggregate_gen_tok_s),
    );
    row(
        "mean per-request gen tok/s",
        format!("{:.1}", s.gen_tok_s.unwrap_or_default().avg),
    );
    t
}

fn failed_table(runs: &[CsRun]) -> Table {
    let mut t = Table::new(
        "Failed Final Answers",
        &["#", "item", "C", "tokens", "score", "final answer"],
    )
    .right(&[0, 2, 3])
    .title_suffix(&format!(
        " (first {} of {})",
        FAILED_ROWS.min(runs.len()),
        runs.len()
    ));
    for r in runs.iter().take(FAILED_ROWS) {
        let label = match (&r.error, &r.score_label) {
            (Some(_), _) => "ERR".to_owned(),
            (None, Some(l)) => l.to_uppercase(),
            (None, None) => "-".to_owned(),
        };
        let mut answer = match (&r.error, &r.parsed_answer) {
            (Some(e), _) => e.clone(),
            (None, Some(p)) if !r.score_detail.is_empty() => {
                format!("[{p}; {}] {}", r.score_detail, r.final_answer)
            }
            (None, _) if !r.score_detail.is_empty() => {
                format!("[{}] {}", r.score_detail, r.final_answer)
            }
            _ => r.final_answer.clone(),
        };
        if answer.chars().count() > ANSWER_CHARS {
            answer = answer.chars().take(ANSWER_CHARS - 1).collect::<String>() + "…";
        }
        t.push(vec![
            Cell::plain(r.run_index.to_string()),
            Cell::plain(r.item_id.clone().unwrap_or_default()),
            Cell::plain(r.concurrency.to_string()),
            Cell::plain(r.completion_tokens.to_string()),
            Cell::plain(label),
            Cell::plain(answer.replace('\n', " ")),
        ]);
    }
    t
}

/// `EXACT a / NEAR b / FAIL c[ / TRUNC t]`, `PASS a / FAIL c[ / TRUNC t]`,
/// or `-` without scores.
pub fn score_text(s: &RunSummary) -> String {
    if !s.score_available {
        return "-".into();
    }
    let trunc = if s.truncated > 0 {
        format!(" / TRUNC {}", s.truncated)
    } else {
        String::new()
    };
    let pass = s.score_counts.get("pass").copied().unwrap_or(0);
    if s.exact > 0 || s.near > 0 {
        format!(
            "EXACT {} / NEAR {} / FAIL {}{trunc}",
            s.exact, s.near, s.fail
        )
    } else if pass > 0 || s.fail > 0 {
        format!("PASS {pass} / FAIL {}{trunc}", s.fail)
    } else {
        format!("{}/{}", s.correct, s.completed)
    }
}

fn join(v: &[usize]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts() -> TextOptions {
        TextOptions {
            width: 100,
            show_capacity_limited_values: false,
            color: false,
        }
    }

    fn doc(scorer: &str, hardware: serde_json::Value) -> CsDocument {
        let mut d = CsDocument::default();
        d.metadata.profile_scorer = scorer.into();
        d.hardware_run_summary = serde_json::from_value(hardware).expect("a summary or null");
        d
    }

    #[test]
    fn whole_run_power_panel_comes_from_the_run_summary() {
        let hw = json!({
            "samples": 243, "duration_seconds": 577.1, "gpu_count": 2,
            "power_total_avg_w": 604.4, "power_total_max_w": 625.0,
            "power_limit_total_w": 1200.0
        });
        let text = render_lines(&doc("", hw), &opts()).join("\n");
        assert!(text.contains("Whole-run GPU Power"), "{text}");
        assert!(
            text.contains("avg 604 W | max 625 W | limit 1,200 W | over 9m 37s | 243 samples"),
            "{text}"
        );
        // the panel sits between the profile table and the later tables
        assert!(text.find("Profile").unwrap() < text.find("Whole-run GPU Power").unwrap());
        for empty in [json!({}), serde_json::Value::Null, json!({"samples": 0})] {
            let text = render_lines(&doc("", empty), &opts()).join("\n");
            assert!(!text.contains("Whole-run GPU Power"), "{text}");
        }
    }

    #[test]
    fn each_scorer_kind_ends_with_its_note() {
        for (scorer, words) in [
            ("regex", "pattern matched"),
            ("numeric_exact", "NEAR lies within the tolerance"),
            ("dataset_mc_letter", "number of options"),
            ("dataset_gsm8k", "last number"),
        ] {
            let lines = render_lines(&doc(scorer, json!({})), &opts());
            let tail = lines
                .iter()
                .rev()
                .skip_while(|l| l.is_empty())
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(tail.contains("Scoring:"), "{scorer}: {tail}");
            assert!(tail.contains(words), "{scorer}: {tail}");
        }
        let text = render_lines(&doc("", json!({})), &opts()).join("\n");
        assert!(!text.contains("Scoring:"), "no scorer, no note");
    }
}
