//! The paired A/B comparison of two completion-stats results (console):
//! a header panel naming both sides, the **Accuracy** table, the
//! **Verdict** panel (delta, exact McNemar p, flips, token inflation) and
//! **Per-category (worst delta first)**. `docs/completion-stats.md`
//! defines every number.

use ldb_eval::paired::{Comparison, PairedStats, Side};

use super::TextOptions;
use super::style::{Span, Tone, paint, wrap};
use super::table::{Cell, Table};

/// A framed panel whose body keeps its paragraphs (one per entry), each
/// wrapped to the width; `tone` colours the body text.
fn paragraphs_panel(
    title: &str,
    paras: &[(String, Tone)],
    width: usize,
    color: bool,
) -> Vec<String> {
    let inner = width.saturating_sub(4).max(20);
    let lines: Vec<(String, Tone)> = paras
        .iter()
        .flat_map(|(p, t)| wrap(p, inner).into_iter().map(move |l| (l, *t)))
        .collect();
    let content = lines
        .iter()
        .map(|l| l.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.chars().count() + 2);
    let mut out = vec![format!(
        "╭─ {} {}╮",
        paint(title, Tone::Title, color),
        "─".repeat(content - title.chars().count() - 1)
    )];
    for (l, t) in &lines {
        let pad = " ".repeat(content - l.chars().count());
        out.push(format!("│ {}{pad} │", paint(l, *t, color)));
    }
    out.push(format!("╰{}╯", "─".repeat(content + 2)));
    out
}

fn describe(side: &Side) -> String {
    let model = side.model.as_deref().unwrap_or("?");
    let server = side.server.as_deref().unwrap_or("?");
    let when = side
        .timestamp
        .as_deref()
        .map(|t| format!(" ({t})"))
        .unwrap_or_default();
    format!("{model} @ {server}{when} — {}", side.label)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn signed(x: f64, digits: usize) -> String {
    // never print "-0.00"
    let x = if x.abs() < 0.5 * 10f64.powi(-(digits as i32)) {
        0.0
    } else {
        x
    };
    format!("{x:+.digits$}")
}

/// The p-value with enough digits to be useful at both ends.
fn p_value(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.4}")
    } else {
        format!("{p:.2e}")
    }
}

fn accuracy_table(c: &Comparison, s: &PairedStats) -> Table {
    let n = c.paired_items;
    let mut t = Table::new("Accuracy", &["metric", "baseline", "candidate"]).right(&[1, 2]);
    let row = |m: &str, a: String, b: String| vec![Cell::plain(m), Cell::plain(a), Cell::plain(b)];
    t.push(row(
        "accuracy",
        format!("{} ({}/{n})", pct(s.baseline_accuracy), s.baseline_correct),
        format!(
            "{} ({}/{n})",
            pct(s.candidate_accuracy),
            s.candidate_correct
        ),
    ));
    let ci = |w: [f64; 2]| format!("{} – {}", pct(w[0]), pct(w[1]));
    t.push(row(
        "Wilson 95% CI",
        ci(s.baseline_wilson95),
        ci(s.candidate_wilson95),
    ));
    let tok = &s.completion_tokens;
    t.push(row(
        "completion tokens avg",
        format!("{:.0}", tok.baseline_mean),
        format!("{:.0}", tok.candidate_mean),
    ));
    t.push(row(
        "completion tokens p90",
        format!("{:.0}", tok.baseline_p90),
        format!("{:.0}", tok.candidate_p90),
    ));
    t.push(row(
        "hit max_tokens",
        s.hit_max_tokens.baseline.to_string(),
        s.hit_max_tokens.candidate.to_string(),
    ));
    if s.truncated_no_answer.baseline + s.truncated_no_answer.candidate > 0 {
        t.push(row(
            "truncated (no answer)",
            s.truncated_no_answer.baseline.to_string(),
            s.truncated_no_answer.candidate.to_string(),
        ));
    }
    t.push(row(
        "unparseable (format)",
        s.unparseable.baseline.to_string(),
        s.unparseable.candidate.to_string(),
    ));
    t
}

fn verdict(c: &Comparison, s: &PairedStats) -> Vec<(String, Tone)> {
    let sig = if s.significant_at_0_05 {
        "significant"
    } else {
        "not significant"
    };
    let mut v = vec![
        (
            format!(
                "Δ accuracy: {} pp — {sig} at α=0.05 (exact McNemar p={})",
                signed(s.delta_pp, 2),
                p_value(s.mcnemar_exact_p)
            ),
            Tone::Plain,
        ),
        (
            format!(
                "Flips: {} items right only in the baseline, {} right only in the candidate ({} paired).",
                s.flips_baseline_only_correct, s.flips_candidate_only_correct, c.paired_items
            ),
            Tone::Plain,
        ),
    ];
    if let Some(r) = s.completion_tokens.ratio_mean {
        v.push((
            format!(
                "Completion-token inflation: {}% (candidate mean / baseline mean).",
                signed((r - 1.0) * 100.0, 1)
            ),
            Tone::Plain,
        ));
    }
    v.push((
        "Tip: compare a result against a rerun of the same model first; the spread of that A/A \
         comparison is the noise floor any real difference must clear."
            .to_owned(),
        Tone::Dim,
    ));
    v
}

fn category_table(s: &PairedStats) -> Option<Table> {
    if s.per_category.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "Per-category (worst delta first)",
        &["category", "paired", "baseline", "candidate", "Δ pp"],
    )
    .right(&[1, 2, 3, 4]);
    for c in &s.per_category {
        let tone = if c.delta_pp < 0.0 {
            Tone::Warn
        } else {
            Tone::Plain
        };
        t.push(vec![
            Cell::plain(c.category.as_str()),
            Cell::plain(c.paired.to_string()),
            Cell::plain(pct(c.baseline_accuracy)),
            Cell::plain(pct(c.candidate_accuracy)),
            Cell::spans(vec![Span::new(signed(c.delta_pp, 2), tone)]),
        ]);
    }
    Some(t)
}

/// The comparison as console text (ends with a newline).
pub fn render_paired(c: &Comparison, opts: &TextOptions) -> String {
    let width = usize::from(opts.width).min(super::TEXT_WIDTH);
    let color = opts.color;
    let mut head = vec![
        (format!("Shared items: {}", c.paired_items), Tone::Plain),
        (format!("Baseline:  {}", describe(&c.baseline)), Tone::Plain),
        (
            format!("Candidate: {}", describe(&c.candidate)),
            Tone::Plain,
        ),
    ];
    if !c.profile_match {
        head.push((
            "Warning: the two results ran different profiles.".to_owned(),
            Tone::Warn,
        ));
    }
    if !c.dataset_match {
        head.push((
            "Warning: the two results used different dataset files.".to_owned(),
            Tone::Warn,
        ));
    }
    let mut lines = Vec::new();
    match c.result.as_ref().filter(|_| c.error.is_none()) {
        None => {
            let e = c.error.as_deref().unwrap_or("no comparison");
            head.push((format!("Error: {e}"), Tone::Warn));
            lines.extend(paragraphs_panel(
                "Paired A/B Comparison",
                &head,
                width,
                color,
            ));
        }
        Some(s) => {
            lines.extend(paragraphs_panel(
                "Paired A/B Comparison",
                &head,
                width,
                color,
            ));
            lines.extend(accuracy_table(c, s).render(color));
            lines.extend(paragraphs_panel("Verdict", &verdict(c, s), width, color));
            if let Some(t) = category_table(s) {
                lines.extend(t.render(color));
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_eval::paired::{ResultRuns, compare};
    use serde_json::json;

    fn side(model: &str, verdicts: &[(&str, bool, &str)]) -> ResultRuns {
        let doc = json!({
            "metadata": {"model": model, "server": "http://127.0.0.1:8000", "test_profile": "mmlu-pro"},
            "runs": verdicts.iter().map(|(id, ok, cat)| json!({
                "item_id": id, "correct": ok, "completion_tokens": 100,
                "score_label": if *ok { "pass" } else { "fail" }, "category": cat,
            })).collect::<Vec<_>>(),
        });
        ResultRuns::from_json(&doc, &format!("{model}.json")).unwrap()
    }

    #[test]
    fn renders_all_sections() {
        let a = side(
            "base",
            &[
                ("q1", true, "law"),
                ("q2", true, "math"),
                ("q3", false, "math"),
            ],
        );
        let b = side(
            "cand",
            &[
                ("q1", false, "law"),
                ("q2", true, "math"),
                ("q3", true, "math"),
            ],
        );
        let text = render_paired(&compare(&a, &b), &TextOptions::default());
        for want in [
            "Paired A/B Comparison",
            "Shared items: 3",
            "base @ http://127.0.0.1:8000 — base.json",
            "Accuracy",
            "66.67% (2/3)",
            "Δ accuracy: +0.00 pp — not significant at α=0.05 (exact McNemar p=1.0000)",
            "Per-category (worst delta first)",
            "-100.00",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(text.find("law").unwrap() < text.find("math").unwrap());
    }

    #[test]
    fn renders_the_error_panel() {
        let a = side("base", &[("q1", true, "")]);
        let b = side("cand", &[("q9", true, "")]);
        let text = render_paired(&compare(&a, &b), &TextOptions::default());
        assert!(text.contains("Error: no common scored items"), "{text}");
        assert!(!text.contains("Verdict"));
    }
}
