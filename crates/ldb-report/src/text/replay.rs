//! The replay sections: trace replays (`--trace`) and multi-turn sessions
//! (`--sessions`): requests, latencies from the scheduled time, the
//! intended against the achieved prefix-cache hit rate (flagged when more
//! than 10 points apart), and TTFT by turn.

use ldb_core::replay::session::SessionResult;
use ldb_core::replay::{Distribution, PrefixCacheCheck, ReplaySummary, TraceResult};

use super::Ctx;
use super::cells::status_word;
use super::format::{ms_plain, rate};
use super::style::Tone;
use super::table::{Cell, Table, panel};

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), ms_plain)
}

fn p50_p99(d: &Distribution) -> String {
    format!("{}/{}", ms(d.p50), ms(d.p99))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.1}%", v * 100.0))
}

/// One row of the summary table: the figures every replay has.
fn summary_cells(label: String, s: &ReplaySummary, status: Option<&str>) -> Vec<Cell> {
    vec![
        Cell::plain(label),
        Cell::plain(format!("{}/{}", s.sent, s.scheduled)),
        Cell::plain(format!("{}/{}", s.completed, s.errors)),
        Cell::plain(s.skipped_too_long.to_string()),
        Cell::plain(rate(s.output_tps)),
        Cell::plain(s.achieved_rate.map_or_else(|| "—".into(), rate)),
        Cell::plain(p50_p99(&s.ttft)),
        Cell::plain(p50_p99(&s.e2e)),
        Cell::plain(ms(s.dispatch_lag.p99)),
        Cell::plain(s.goodput.map_or_else(|| "—".into(), rate)),
        Cell::plain(status.unwrap_or("").to_string()),
    ]
}

fn summary_table(title: &str) -> Table {
    Table::new(
        title,
        &[
            "replay",
            "sent",
            "done/err",
            "too long",
            "out tok/s",
            "done/s",
            "TTFT p50/p99",
            "E2E p50/p99",
            "lag p99",
            "goodput",
            "",
        ],
    )
    .right(&[1, 2, 3, 4, 5, 6, 7, 8, 9])
}

/// The prefix-cache line, with the flag when the rates differ.
fn cache_line(cx: &Ctx<'_>, label: &str, c: &PrefixCacheCheck) -> Vec<String> {
    let unit = c.granularity.map_or(1, |g| g.block_tokens());
    let text = format!(
        "{label}: prefix cache intended {} (blocks of {unit} tokens), achieved {}{}{}",
        pct(c.prefix_cache_intended),
        pct(c.server_prefix_cache_hit_rate),
        c.achieved_source
            .as_deref()
            .map_or(String::new(), |s| format!(" (from {s})")),
        if c.differs {
            " — MORE THAN 10 POINTS APART: the server did not reuse what the workload shares \
             (cache too small, caching off, or a different block size)"
        } else {
            ""
        }
    );
    cx.para(&text, if c.differs { Tone::Warn } else { Tone::Dim })
}

fn trace_notes(cx: &Ctx<'_>, i: usize, t: &TraceResult) -> Vec<String> {
    let mut out = Vec::new();
    let label = format!("trace {}", i + 1);
    let o = &t.source.options;
    out.extend(cx.para(
        &format!(
            "{label}: {} ({}, sha256 {}…), speed ×{}, {} rows read, {} filtered, {} bad skipped",
            t.source.path,
            t.source.format,
            t.source.sha256.get(..12).unwrap_or(""),
            o.speed,
            t.source.rows.rows,
            t.source.rows.filtered,
            t.source.rows.bad_skipped
        ),
        Tone::Dim,
    ));
    out.extend(cache_line(cx, &label, &t.prefix_cache));
    let l = &t.lengths;
    if l.tokenized > 0 || l.reported > 0 {
        out.extend(cx.para(
            &format!(
                "{label}: prompt lengths against the trace's: {} counted by /tokenize (max error {} \
                 tokens), {} reported by the server (max error {})",
                l.tokenized,
                l.tokenized_max_error.map_or("—".into(), |e| e.to_string()),
                l.reported,
                l.reported_max_error.map_or("—".into(), |e| e.to_string()),
            ),
            Tone::Dim,
        ));
    }
    if !t.status_reason.is_empty() {
        out.extend(cx.para(&format!("{label}: {}", t.status_reason), Tone::Warn));
    }
    out
}

fn turn_table(s: &SessionResult) -> Table {
    let mut t = Table::new(
        "TTFT by turn",
        &["turn", "prompt tok", "TTFT p50/p99", "requests"],
    )
    .right(&[1, 2, 3]);
    for turn in &s.by_turn {
        t.push(vec![
            Cell::plain(turn.turn.to_string()),
            Cell::plain(format!("{:.0}", turn.prompt_tokens_mean)),
            Cell::plain(p50_p99(&turn.ttft)),
            Cell::plain(turn.requests.to_string()),
        ]);
    }
    t
}

/// The sections (empty without replays).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let (traces, sessions) = (&cx.doc.trace_results, &cx.doc.session_results);
    if traces.is_empty() && sessions.is_empty() {
        return Vec::new();
    }
    let mut out = panel(
        "Replay",
        "Trace replay and sessions — requests leave at their scheduled times; TTFT and E2E count \
         from that time, so a queue in the server shows as latency.",
        cx.text_width(),
        cx.color,
        false,
    );
    out.push(String::new());
    let mut t = summary_table("Replays");
    for (i, r) in traces.iter().enumerate() {
        t.push(summary_cells(
            format!("trace {}", i + 1),
            &r.summary,
            status_word(r.status),
        ));
    }
    for (i, r) in sessions.iter().enumerate() {
        t.push(summary_cells(
            format!("sessions {}", i + 1),
            &r.summary,
            status_word(r.status),
        ));
    }
    out.extend(t.render(cx.color));
    for (i, r) in traces.iter().enumerate() {
        out.extend(trace_notes(cx, i, r));
    }
    for (i, s) in sessions.iter().enumerate() {
        let label = format!("sessions {}", i + 1);
        out.push(String::new());
        out.extend(turn_table(s).render(cx.color));
        out.extend(cx.para(
            &format!(
                "{label}: {} × {} turns, {} user tokens per turn; {} sessions complete; per-session \
                 output {} tok/s (p50){}",
                s.sessions,
                s.turns,
                s.user_tokens,
                s.sessions_completed,
                s.session_output_tps.p50.map_or_else(|| "—".into(), rate),
                s.session_goodput
                    .map_or(String::new(), |g| format!(", session goodput {} /s", rate(g)))
            ),
            Tone::Dim,
        ));
        out.extend(cache_line(cx, &label, &s.prefix_cache));
        out.extend(super::session_router::lines(cx, &label, s));
    }
    out.extend(cx.note(
        "sent = requests sent of those in the window; too long = skipped, prompt + output over \
         the server's context; times in ms (p50/p99) from the scheduled time; lag = how late the \
         client sent (p99); goodput = completed requests per second meeting every per-request \
         --slo bound. Intended hit rate: what a prefix cache of unlimited size would reuse of the \
         prompts as built (docs/workloads.md).",
    ));
    out.push(String::new());
    out
}

#[cfg(test)]
mod tests {
    use ldb_core::document::ResultDocument;
    use ldb_core::replay::session::{SessionResult, TurnStats};

    use super::*;

    fn cx(doc: &ResultDocument) -> Ctx<'_> {
        Ctx {
            doc,
            width: 120,
            color: false,
            show_hidden: false,
        }
    }

    #[test]
    fn rates_far_apart_are_flagged_and_turns_listed() {
        let mut doc = ResultDocument::default();
        doc.trace_results.push(TraceResult {
            prefix_cache: PrefixCacheCheck {
                prefix_cache_intended: Some(0.6),
                server_prefix_cache_hit_rate: Some(0.2),
                achieved_source: Some("metrics".into()),
                ..PrefixCacheCheck::default()
            }
            .judge(),
            ..TraceResult::default()
        });
        doc.session_results.push(SessionResult {
            by_turn: vec![TurnStats {
                turn: 1,
                requests: 2,
                prompt_tokens_mean: 500.0,
                ttft: Distribution::of(vec![0.1, 0.2]),
                ..TurnStats::default()
            }],
            ..SessionResult::default()
        });
        let text = section(&cx(&doc)).join("\n");
        assert!(text.contains("intended 60.0%"), "{text}");
        assert!(text.contains("achieved 20.0% (from metrics)"), "{text}");
        assert!(text.contains("MORE THAN 10 POINTS APART"), "{text}");
        assert!(text.contains("TTFT by turn"), "{text}");
        assert!(section(&cx(&ResultDocument::default())).is_empty());
    }
}
