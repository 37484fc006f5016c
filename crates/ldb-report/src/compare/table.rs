//! The text (terminal) and Markdown (pull-request comment) forms of a
//! comparison: the same tables, aligned with spaces or written with pipes.

mod energy;
mod replays;
mod ttft;

use ldb_core::numfmt::context;

use super::cells::{CellComparison, Layer, Outcome, PrefillComparison};
use super::metric::{CellMetric, Change, Verdict};
use super::rates::{RateComparison, RateMetric};
use super::{CompareReport, Comparison, RunLabel};

/// Plain text for a terminal: one block per new run.
pub fn render_text(r: &CompareReport) -> String {
    render(r, Style::Text)
}

/// GitHub-flavoured Markdown, for pull-request comments.
pub fn render_markdown(r: &CompareReport) -> String {
    render(r, Style::Markdown)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Text,
    Markdown,
}

fn render(r: &CompareReport, style: Style) -> String {
    let mut out = String::new();
    for (i, c) in r.comparisons.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        comparison(&mut out, c, r, style);
    }
    out
}

fn comparison(out: &mut String, c: &Comparison, r: &CompareReport, style: Style) {
    let md = style == Style::Markdown;
    let (b, n) = (run(&c.base, md), run(&c.new, md));
    if md {
        out.push_str(&format!(
            "### llm-decode-bench compare\n\n- base: {b}\n- new: {n}\n"
        ));
    } else {
        out.push_str(&format!(
            "llm-decode-bench compare\n  base: {b}\n  new:  {n}\n"
        ));
    }
    out.push_str(&format!(
        "{}Threshold {}%: ✗ marks a change worse than it, ✓ one better than it.\n",
        if md { "\n" } else { "" },
        num(r.threshold_pct)
    ));
    let note = r.significance_note();
    out.push_str(&if md {
        format!("_{note}_\n")
    } else {
        format!("{note}\n")
    });
    out.push('\n');
    settings(out, c, r.forced, md);
    for layer in [Layer::Decode, Layer::Burst] {
        let cells: Vec<&CellComparison> = c.cells.iter().filter(|x| x.key.layer == layer).collect();
        if !cells.is_empty() {
            let title = match layer {
                Layer::Decode => "Decode cells",
                Layer::Burst => "Burst cells",
            };
            heading(out, title, md);
            out.push_str(&cell_grid(&cells).render(style));
            out.push('\n');
        }
    }
    if !c.prefill.is_empty() {
        heading(out, "Prefill (tok/s by context)", md);
        out.push_str(&prefill_grid(&c.prefill).render(style));
        out.push('\n');
    }
    if !c.rates.is_empty() {
        heading(out, "Open-loop rate cells", md);
        out.push_str(&rate_grid(&c.rates).render(style));
        out.push('\n');
    }
    if !c.replays.is_empty() {
        heading(out, "Trace replays and sessions", md);
        out.push_str(&replays::grid(&c.replays).render(style));
        out.push('\n');
        if let Some(g) = replays::turn_grid(&c.replays) {
            heading(out, "Sessions: TTFT by turn", md);
            out.push_str(&g.render(style));
            out.push('\n');
        }
    }
    if !c.energy.is_empty() {
        heading(out, "Energy and cost (shown, not judged)", md);
        out.push_str(&energy::grid(&c.energy).render(style));
        for why in energy::reasons(&c.energy) {
            out.push_str(&format!("{}{why}\n", if md { "- " } else { "  " }));
        }
        out.push('\n');
    }
    if !c.ttft.is_empty() {
        heading(
            out,
            "TTFT breakdown (engine's own numbers; shown, not judged)",
            md,
        );
        out.push_str(&ttft::grid(&c.ttft).render(style));
        out.push('\n');
    }
    if !c.prefix_gaps.is_empty() {
        heading(out, "Prefix cache: achieved vs intended", md);
        for g in &c.prefix_gaps {
            out.push_str(&format!("{}{g}\n", if md { "- " } else { "  " }));
        }
        out.push('\n');
    }
    let summary = summary_line(c);
    out.push_str(&if md {
        format!("**{summary}**\n")
    } else {
        format!("{summary}\n")
    });
}

fn run(l: &RunLabel, md: bool) -> String {
    let file = if md {
        format!("`{}`", l.file.replace('`', "'"))
    } else {
        l.file.clone()
    };
    format!(
        "{file} ({} {}, {}, started {})",
        or_dash(&l.engine),
        or_dash(&l.engine_version),
        or_dash(&l.model),
        or_dash(&l.started_at)
    )
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn heading(out: &mut String, title: &str, md: bool) {
    if md {
        out.push_str(&format!("#### {title}\n\n"));
    } else {
        out.push_str(&format!("{title}\n"));
    }
}

fn settings(out: &mut String, c: &Comparison, forced: bool, md: bool) {
    if c.settings.is_empty() {
        out.push_str("Settings: the same.\n\n");
        return;
    }
    out.push_str("Settings that differ:\n");
    if md {
        out.push('\n');
    }
    for d in &c.settings {
        let why = match (d.blocking, forced) {
            (true, true) => "not comparable; compared because of --force",
            (true, false) => "not comparable",
            (false, _) => "for information",
        };
        let line = format!("{}: {} → {} ({why})", d.key, d.base, d.new);
        out.push_str(&if md {
            format!("- {}\n", escape(&line))
        } else {
            format!("  {line}\n")
        });
    }
    out.push('\n');
}

fn summary_line(c: &Comparison) -> String {
    let n = |v| c.count(v);
    let total = c.cells.len() + c.prefill.len() + c.rates.len() + c.replays.len();
    let of = match (c.rates.is_empty(), c.replays.is_empty()) {
        (true, true) => "cells and prefill rows",
        (false, true) => "cells, prefill rows and rate cells",
        (true, false) => "cells, prefill rows and replays",
        (false, false) => "cells, prefill rows, rate cells and replays",
    };
    format!(
        "{} regression(s), {} improvement(s), {} unchanged, {} not compared, of {total} {of}.",
        n(Verdict::Regression),
        n(Verdict::Improvement),
        n(Verdict::Unchanged),
        n(Verdict::NotComparable),
    )
}

/// Show TTFO only where it says something TTFT does not: some cell's TTFO
/// differs from its TTFT by more than 1 % (reasoning output), the rule of
/// the run report's TTFO matrix.
fn show_ttfo(cells: &[&CellComparison]) -> bool {
    let value = |c: &CellComparison, m: CellMetric| {
        c.changes
            .iter()
            .find(|(x, _)| *x == m)
            .map(|(_, ch)| (ch.base.map(|e| e.value), ch.new.map(|e| e.value)))
    };
    cells.iter().any(|c| {
        let (Some(ttft), Some(ttfo)) =
            (value(c, CellMetric::TtftP50), value(c, CellMetric::TtfoP50))
        else {
            return false;
        };
        let differs =
            |a: Option<f64>, b: Option<f64>| matches!((a, b), (Some(a), Some(b)) if b > a * 1.01);
        differs(ttft.0, ttfo.0) || differs(ttft.1, ttfo.1)
    })
}

fn cell_grid(cells: &[&CellComparison]) -> Grid {
    let ttfo = show_ttfo(cells);
    let metrics: Vec<CellMetric> = CellMetric::ALL
        .into_iter()
        .filter(|m| ttfo || !matches!(m, CellMetric::TtfoP50 | CellMetric::TtfoP99))
        .collect();
    let mut head = vec![
        "ctx".to_string(),
        "C".into(),
        "status".into(),
        "agg tok/s base → new".into(),
    ];
    head.extend(metrics.iter().map(|m| m.label().to_string()));
    head.push("verdict".into());
    let rows = cells
        .iter()
        .map(|c| {
            let mut row = vec![
                context(c.key.context_tokens),
                c.key.concurrency.to_string(),
                status(c),
                values(c),
            ];
            for m in &metrics {
                let ch = c.changes.iter().find(|(x, _)| x == m).map(|(_, ch)| ch);
                row.push(ch.map_or_else(|| "n/a".into(), pct));
            }
            row.push(verdict(c.verdict).into());
            row
        })
        .collect();
    Grid {
        head,
        rows,
        left: 3,
    }
}

fn rate_grid(rows: &[RateComparison]) -> Grid {
    let mut head = vec![
        "ctx".to_string(),
        "R req/s".into(),
        "status".into(),
        "out tok/s base → new".into(),
    ];
    head.extend(RateMetric::ALL.iter().map(|m| m.label().to_string()));
    head.push("verdict".into());
    let word = |s: Option<(ldb_core::result::CellStatus, bool)>| match s {
        None => "absent".to_string(),
        Some((st, true)) => format!("{} saturated", st.as_str()),
        Some((st, false)) => st.as_str().to_string(),
    };
    let rows = rows
        .iter()
        .map(|r| {
            let status = match r.outcome {
                Outcome::OnlyInBase => format!("only in base ({})", word(r.base_status)),
                Outcome::OnlyInNew => format!("only in new ({})", word(r.new_status)),
                _ if r.base_status == r.new_status => word(r.base_status),
                _ => format!("{} → {}", word(r.base_status), word(r.new_status)),
            };
            let tps = match r.changes.first().map(|(_, ch)| ch) {
                Some(Change {
                    base: Some(b),
                    new: Some(n),
                    ..
                }) => format!("{:.1} → {:.1}", b.value, n.value),
                _ => "-".into(),
            };
            let mut row = vec![context(r.context_tokens), num(r.request_rate), status, tps];
            row.extend(r.changes.iter().map(|(_, ch)| pct(ch)));
            row.push(verdict(r.verdict).into());
            row
        })
        .collect();
    Grid {
        head,
        rows,
        left: 3,
    }
}

fn prefill_grid(rows: &[PrefillComparison]) -> Grid {
    let head = ["ctx", "status", "base", "new", "change", "verdict"]
        .map(String::from)
        .to_vec();
    let measured = |m: Option<bool>| match m {
        None => "absent",
        Some(true) => "measured",
        Some(false) => "not measured",
    };
    let rows = rows
        .iter()
        .map(|p| {
            let status = if p.outcome == Outcome::Compared {
                "measured".to_string()
            } else {
                format!(
                    "{} → {}",
                    measured(p.base_measured),
                    measured(p.new_measured)
                )
            };
            let v = |e: Option<super::metric::Estimate>| {
                e.map_or_else(|| "-".into(), |e| format!("{:.0}", e.value))
            };
            vec![
                context(p.context_tokens),
                status,
                v(p.tok_per_sec.base),
                v(p.tok_per_sec.new),
                pct(&p.tok_per_sec),
                verdict(p.verdict).into(),
            ]
        })
        .collect();
    Grid {
        head,
        rows,
        left: 2,
    }
}

fn status(c: &CellComparison) -> String {
    let word = |s: Option<ldb_core::result::CellStatus>| s.map_or("absent", |s| s.as_str());
    match c.outcome {
        Outcome::OnlyInBase => format!("only in base ({})", word(c.base_status)),
        Outcome::OnlyInNew => format!("only in new ({})", word(c.new_status)),
        _ if c.base_status == c.new_status => word(c.base_status).to_string(),
        _ => format!("{} → {}", word(c.base_status), word(c.new_status)),
    }
}

fn values(c: &CellComparison) -> String {
    let agg = c
        .changes
        .iter()
        .find(|(m, _)| *m == CellMetric::AggregateTps)
        .map(|(_, ch)| ch);
    match agg {
        Some(Change {
            base: Some(b),
            new: Some(n),
            ..
        }) => format!("{:.1} → {:.1}", b.value, n.value),
        _ => "-".into(),
    }
}

/// `+3.2%`, `-13.8% ✗`, `n/a`.
fn pct(ch: &Change) -> String {
    let Some(p) = ch.change_pct else {
        return "n/a".into();
    };
    let verdict = match ch.verdict {
        Verdict::Regression => " ✗",
        Verdict::Improvement => " ✓",
        _ => "",
    };
    let star = if ch.significance == super::metric::Significance::Significant {
        "*"
    } else {
        ""
    };
    let mark = format!("{verdict}{star}");
    // Below a rounding step there is no sign to show (and no "-0.0").
    if p.abs() < 0.05 {
        return format!("0.0%{mark}");
    }
    format!("{p:+.1}%{mark}")
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "REGRESSION",
        Verdict::Improvement => "improvement",
        Verdict::Unchanged => "unchanged",
        Verdict::NotComparable => "not compared",
    }
}

/// `5`, `2.5`.
fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A table: the first `left` columns are left-aligned, the rest right-aligned.
struct Grid {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
    left: usize,
}

impl Grid {
    fn render(&self, style: Style) -> String {
        match style {
            Style::Text => self.aligned(),
            Style::Markdown => self.markdown(),
        }
    }

    fn aligned(&self) -> String {
        let width = |i: usize| {
            std::iter::once(&self.head)
                .chain(&self.rows)
                .map(|r| r.get(i).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.head.len()).map(width).collect();
        let line = |r: &Vec<String>| {
            let cols: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let pad = widths[i].saturating_sub(s.chars().count());
                    if i < self.left {
                        format!("{s}{}", " ".repeat(pad))
                    } else {
                        format!("{}{s}", " ".repeat(pad))
                    }
                })
                .collect();
            format!("  {}\n", cols.join("  ").trim_end())
        };
        std::iter::once(&self.head)
            .chain(&self.rows)
            .map(line)
            .collect()
    }

    fn markdown(&self) -> String {
        let row = |r: &Vec<String>| {
            let cols: Vec<String> = r.iter().map(|s| escape(s)).collect();
            format!("| {} |\n", cols.join(" | "))
        };
        let rule: Vec<&str> = (0..self.head.len())
            .map(|i| if i < self.left { "---" } else { "---:" })
            .collect();
        let mut out = row(&self.head);
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }
}
