//! `<section id="replay">`: trace replays (`--trace`) and multi-turn
//! sessions (`--sessions`) of every file that has one (nothing at all when
//! none has, so pages of matrix runs stay as they were).
//!
//! Per file: a summary table (requests, completions, errors, output tok/s,
//! goodput, dispatch lag, intended against achieved hit rate with the
//! 10-point flag), a table of the latency distributions from the scheduled
//! send time, and the charts of [`REPLAY_CHART_IDS`]: throughput over time
//! from the 1 s buckets, requests due against completed per second, and
//! TTFT by turn index of the sessions. Definitions: docs/workloads.md.

use ldb_core::replay::session::SessionResult;
use ldb_core::replay::{Distribution, PrefixCacheCheck, ReplaySummary, TraceResult};

use super::Page;
use super::chart::{Series, Spec, figure, number};
use super::escape::escape;
use crate::text::format::{ms_plain, rate};

/// The `id` of every replay chart, in page order.
pub const REPLAY_CHART_IDS: [&str; 4] = [
    "chart-replay-latency",
    "chart-replay-throughput",
    "chart-replay-requests",
    "chart-session-ttft-by-turn",
];

/// One replay of one file, as the page names it.
struct Replay<'a> {
    /// `trace 1`, `sessions 1`, prefixed by the file when several are shown.
    name: String,
    summary: &'a ReplaySummary,
    cache: &'a PrefixCacheCheck,
    status: &'a str,
    reason: &'a str,
}

fn replays<'a>(page: &Page<'a>) -> Vec<Replay<'a>> {
    let mut out = Vec::new();
    for i in page.inputs {
        let prefix = if page.multi() {
            format!("{} ", i.name)
        } else {
            String::new()
        };
        let traces = i.doc.trace_results.iter().enumerate();
        out.extend(traces.map(|(n, t): (usize, &'a TraceResult)| Replay {
            name: format!("{prefix}trace {}", n + 1),
            summary: &t.summary,
            cache: &t.prefix_cache,
            status: t.status.as_str(),
            reason: &t.status_reason,
        }));
        let sessions = i.doc.session_results.iter().enumerate();
        out.extend(sessions.map(|(n, s): (usize, &'a SessionResult)| Replay {
            name: format!("{prefix}sessions {}", n + 1),
            summary: &s.summary,
            cache: &s.prefix_cache,
            status: s.status.as_str(),
            reason: &s.status_reason,
        }));
    }
    out
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), ms_plain)
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.1} %", v * 100.0))
}

fn td(text: &str) -> String {
    format!("<td>{}</td>", escape(text))
}

fn summary_row(r: &Replay<'_>) -> String {
    let s = r.summary;
    let c = r.cache;
    let hit = format!(
        "{} / {}{}",
        pct(c.prefix_cache_intended),
        pct(c.server_prefix_cache_hit_rate),
        c.achieved_source
            .as_deref()
            .map_or(String::new(), |s| format!(" ({s})"))
    );
    let cells = [
        format!("{}/{}", s.sent, s.scheduled),
        s.completed.to_string(),
        s.errors.to_string(),
        s.skipped_too_long.to_string(),
        s.not_sent.to_string(),
        rate(s.output_tps),
        s.achieved_rate.map_or_else(|| "—".into(), rate),
        s.goodput.map_or_else(|| "—".into(), rate),
        format!("{}/{}", ms(s.dispatch_lag.p50), ms(s.dispatch_lag.p99)),
        s.max_in_flight.to_string(),
        format!("{:.1}", s.wall_time),
    ];
    let mut row = format!("<tr><th>{}</th>", escape(&r.name));
    for c in &cells {
        row.push_str(&td(c));
    }
    let class = if c.differs { " class=\"err\"" } else { "" };
    row.push_str(&format!("<td{class}>{}</td>", escape(&hit)));
    row.push_str(&td(r.status));
    row.push_str("</tr>\n");
    row
}

fn summary_table(rs: &[Replay<'_>]) -> String {
    let mut out = String::from(
        "<table class=\"heatmap\" id=\"replay-summary\">\n<tr><th>replay</th><th>sent</th>\
         <th>completed</th><th>errors</th><th>too long</th><th>not sent</th><th>out tok/s</th>\
         <th>done/s</th><th>goodput /s</th><th>lag p50/p99 ms</th><th>most in flight</th>\
         <th>wall s</th><th>hit rate intended / achieved</th><th>status</th></tr>\n",
    );
    for r in rs {
        out.push_str(&summary_row(r));
    }
    out.push_str("</table>\n");
    out
}

fn dist_row(replay: &str, what: &str, d: &Distribution) -> String {
    let mut row = format!(
        "<tr><th>{}</th><td>{what}</td><td>{}</td>",
        escape(replay),
        d.count
    );
    for v in [d.mean, d.p50, d.p90, d.p99, d.max] {
        row.push_str(&td(&ms(v)));
    }
    row.push_str("</tr>\n");
    row
}

/// TTFT, TTFO, E2E and dispatch lag as distributions, the token gap as its p99.
fn latency_table(rs: &[Replay<'_>]) -> String {
    let mut out = String::from(
        "<table class=\"heatmap\" id=\"replay-latency\">\n<tr><th>replay</th><th>from the \
         scheduled time</th><th>count</th><th>mean ms</th><th>p50 ms</th><th>p90 ms</th>\
         <th>p99 ms</th><th>max ms</th></tr>\n",
    );
    for r in rs {
        let s = r.summary;
        out.push_str(&dist_row(&r.name, "TTFT", &s.ttft));
        out.push_str(&dist_row(&r.name, "TTFO", &s.ttfo));
        out.push_str(&dist_row(&r.name, "E2E", &s.e2e));
        out.push_str(&dist_row(&r.name, "dispatch lag", &s.dispatch_lag));
        out.push_str(&format!(
            "<tr><th>{}</th><td>token gap</td><td></td><td></td><td></td><td></td><td>{}</td>\
             <td></td></tr>\n",
            escape(&r.name),
            escape(&ms(s.token_gap_p99))
        ));
    }
    out.push_str("</table>\n");
    out
}

/// Per replay, one series of `pick(bucket)` at each bucket's start.
fn bucket_series(
    rs: &[Replay<'_>],
    suffix: &str,
    pick: fn(&ldb_core::replay::Bucket) -> f64,
) -> Vec<Series> {
    rs.iter()
        .map(|r| Series {
            name: format!("{}{suffix}", r.name),
            points: r.summary.buckets.iter().map(|b| (b.t, pick(b))).collect(),
        })
        .collect()
}

/// Per replay and latency, its p50, p90, p99 and max (x 50, 90, 99, 100), ms.
fn percentile_series(rs: &[Replay<'_>]) -> Vec<Series> {
    let mut out = Vec::new();
    for r in rs {
        let s = r.summary;
        for (what, d) in [("TTFT", &s.ttft), ("TTFO", &s.ttfo), ("E2E", &s.e2e)] {
            let points = [(50.0, d.p50), (90.0, d.p90), (99.0, d.p99), (100.0, d.max)]
                .into_iter()
                .filter_map(|(x, v)| Some((x, v? * 1000.0)))
                .collect();
            out.push(Series {
                name: format!("{} {what}", r.name),
                points,
            });
        }
    }
    out
}

fn time_spec<'a>(id: &'a str, title: &'a str, note: &'a str, y_desc: &'a str) -> Spec<'a> {
    Spec {
        id,
        title,
        note,
        x_desc: "seconds since the replay's start",
        y_desc,
        x_log2: false,
        x_fmt: number,
    }
}

fn whole(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

/// TTFT p50 and p99 by turn index, one pair of series per session run.
fn turn_series(page: &Page<'_>) -> Vec<Series> {
    let mut out = Vec::new();
    for i in page.inputs {
        for (n, s) in i.doc.session_results.iter().enumerate() {
            let base = if page.multi() {
                format!("{} sessions {}", i.name, n + 1)
            } else {
                format!("sessions {}", n + 1)
            };
            let at = |pick: fn(&Distribution) -> Option<f64>| {
                s.by_turn
                    .iter()
                    .filter_map(|t| Some((f64::from(t.turn), pick(&t.ttft)? * 1000.0)))
                    .collect()
            };
            out.push(Series {
                name: format!("{base} TTFT p50"),
                points: at(|d| d.p50),
            });
            out.push(Series {
                name: format!("{base} TTFT p99"),
                points: at(|d| d.p99),
            });
        }
    }
    out
}

/// Per-session figures: turns, sessions complete, per-session output tok/s,
/// session goodput, and mean prompt tokens by turn.
fn session_table(page: &Page<'_>) -> String {
    let mut out = String::from(
        "<table class=\"heatmap\" id=\"session-summary\">\n<tr><th>sessions</th>\
         <th>sessions × turns</th><th>user tok/turn</th><th>complete</th>\
         <th>per-session out tok/s mean</th><th>p50</th><th>p90</th><th>max</th>\
         <th>session goodput /s</th><th>prompt tok by turn</th></tr>\n",
    );
    for i in page.inputs {
        for (n, s) in i.doc.session_results.iter().enumerate() {
            let name = if page.multi() {
                format!("{} sessions {}", i.name, n + 1)
            } else {
                format!("sessions {}", n + 1)
            };
            let t = &s.session_output_tps;
            let r = |v: Option<f64>| v.map_or_else(|| "—".into(), rate);
            let prompts: Vec<String> = s
                .by_turn
                .iter()
                .map(|t| format!("{:.0}", t.prompt_tokens_mean))
                .collect();
            out.push_str(&format!("<tr><th>{}</th>", escape(&name)));
            for c in [
                format!("{} × {}", s.sessions, s.turns),
                s.user_tokens.to_string(),
                format!("{}/{}", s.sessions_completed, s.sessions),
                r(t.mean),
                r(t.p50),
                r(t.p90),
                r(t.max),
                r(s.session_goodput),
                prompts.join(", "),
            ] {
                out.push_str(&td(&c));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</table>\n");
    out
}

/// Warning lines: a replay whose hit rates are more than 10 points apart,
/// and a replay that did not end `ok`.
fn warnings(rs: &[Replay<'_>]) -> String {
    let mut items = Vec::new();
    for r in rs {
        if r.cache.differs {
            items.push(format!(
                "{}: prefix-cache hit rate achieved {} vs intended {}, more than 10 points apart: \
                 the server did not reuse what the workload shares (cache too small, caching \
                 off, or a different block size)",
                r.name,
                pct(r.cache.server_prefix_cache_hit_rate),
                pct(r.cache.prefix_cache_intended)
            ));
        }
        if !r.reason.is_empty() {
            items.push(format!("{}: {}", r.name, r.reason));
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let mut out = String::from("<ul class=\"warnings\">\n");
    for i in items {
        out.push_str(&format!("<li class=\"warn\">{}</li>\n", escape(&i)));
    }
    out.push_str("</ul>\n");
    out
}

/// The section, or an empty string when no file has a replay.
pub(crate) fn section(page: &Page<'_>) -> String {
    let rs = replays(page);
    if rs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"replay\">\n<h2>Trace replay and sessions</h2>\n<p class=\"note\">Requests \
         leave at their scheduled times (open loop); TTFT, TTFO and E2E count from that time, so \
         a queue in the server shows as latency. Dispatch lag = send time − scheduled time. \
         Goodput = completed requests per second meeting every per-request --slo bound. \
         Intended hit rate: what a prefix cache of unlimited size would reuse of the prompts \
         as built (docs/workloads.md).</p>\n",
    );
    out.push_str(&summary_table(&rs));
    out.push_str(&warnings(&rs));
    out.push_str("<h3>Latency distributions</h3>\n");
    out.push_str(&latency_table(&rs));
    out.push_str(&figure(
        &Spec {
            id: REPLAY_CHART_IDS[0],
            title: "Latency percentiles from the scheduled time",
            note: "TTFT, TTFO and E2E of each replay at p50, p90, p99 and the largest (100), \
                   all counted from the request's scheduled send time.",
            x_desc: "percentile",
            y_desc: "ms",
            x_log2: false,
            x_fmt: whole,
        },
        &percentile_series(&rs),
    ));
    out.push_str(&figure(
        &time_spec(
            REPLAY_CHART_IDS[1],
            "Replay throughput over time",
            "Output tokens of the requests that completed in each 1 s bucket of the replay.",
            "output tok/s",
        ),
        &bucket_series(&rs, "", |b| b.output_tokens as f64),
    ));
    let mut reqs = bucket_series(&rs, " due", |b| b.scheduled as f64);
    reqs.extend(bucket_series(&rs, " completed", |b| b.completed as f64));
    out.push_str(&figure(
        &time_spec(
            REPLAY_CHART_IDS[2],
            "Requests due and completed per second",
            "Requests the schedule made due in each 1 s bucket against the requests that \
             completed in it: a widening gap is a server falling behind the trace.",
            "requests per second",
        ),
        &reqs,
    ));
    let has_sessions = page
        .inputs
        .iter()
        .any(|i| !i.doc.session_results.is_empty());
    if has_sessions {
        out.push_str("<h3>Sessions</h3>\n");
        out.push_str(&session_table(page));
        out.push_str(&figure(
            &Spec {
                id: REPLAY_CHART_IDS[3],
                title: "TTFT by turn index",
                note: "Time to first token from each turn's scheduled time, by turn: with a \
                       working prefix cache it follows the uncached part (the last reply and \
                       the new message), not the whole growing context.",
                x_desc: "turn",
                y_desc: "ms",
                x_log2: false,
                x_fmt: whole,
            },
            &turn_series(page),
        ));
    }
    out.push_str("</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::{HtmlOptions, Input, render};
    use crate::replay_fixture;
    use ldb_core::document::ResultDocument;

    fn page(doc: &ResultDocument) -> String {
        render(&[Input { name: "run", doc }], &HtmlOptions::default())
    }

    #[test]
    fn replays_get_their_tables_charts_and_flag() {
        let html = page(&replay_fixture::doc(1.0));
        assert_eq!(html.matches("<section id=\"replay\">").count(), 1);
        for id in REPLAY_CHART_IDS {
            let at = html.find(&format!("id=\"{id}\"")).expect(id);
            let fig = &html[at..at + html[at..].find("</figure>").expect("closed")];
            assert!(fig.contains("<svg"), "{id} has no chart");
        }
        for id in ["replay-summary", "replay-latency", "session-summary"] {
            assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
        }
        // Figures from the fixture: 9 completed, 200 tok/s, TTFT p50 100 ms,
        // the sessions' 20 % achieved against 60 % intended flagged.
        assert!(html.contains("<td>200.0</td>"), "out tok/s");
        assert!(html.contains("<td>TTFT</td><td>3</td>"), "TTFT count");
        assert!(html.contains("60.0 % / 20.0 % (metrics)"));
        assert!(html.contains("sessions 1: prefix-cache hit rate achieved 20.0 %"));
        assert!(!html.contains("trace 1: prefix-cache hit rate achieved"));
        assert!(
            html.contains("<td>300, 600, 900</td>"),
            "prompt tokens by turn"
        );
        // Turn axis labels are whole turns.
        let turns = &html[html.find("chart-session-ttft-by-turn").expect("chart")..];
        assert!(turns.contains("\n2\n") && !turns.contains("\n1.5\n"));
    }

    #[test]
    fn a_page_without_replays_has_no_section_and_sessions_are_optional() {
        assert!(!page(&ResultDocument::default()).contains("id=\"replay\""));
        let mut doc = replay_fixture::doc(1.0);
        doc.session_results.clear();
        let html = page(&doc);
        assert!(html.contains("id=\"chart-replay-throughput\""));
        assert!(!html.contains("chart-session-ttft-by-turn"));
    }

    #[test]
    fn several_files_name_their_replays_and_escape_reasons() {
        let a = replay_fixture::doc(1.0);
        let mut b = replay_fixture::doc(2.0);
        b.trace_results[0].status_reason = "<b>stopped</b>".into();
        let html = render(
            &[
                Input {
                    name: "base",
                    doc: &a,
                },
                Input {
                    name: "new",
                    doc: &b,
                },
            ],
            &HtmlOptions::default(),
        );
        assert!(html.contains("<th>base trace 1</th>") && html.contains("<th>new trace 1</th>"));
        assert!(html.contains("&lt;b&gt;stopped") && !html.contains("<b>stopped"));
    }
}
