//! The charts of the page: which value of which cells goes on which axis.
//!
//! Decode charts take the primary decode cells (`results`), one series per
//! context (per file and context when several files are shown); a repeated
//! cell counts once, its last measurement, as in the text report. Tok/s of
//! capacity-limited cells are left out unless they are shown in the heatmap.

use ldb_core::document::ResultDocument;
use ldb_core::result::CellResult;

use super::Page;
use super::chart::{Series, Spec, figure, number};
use super::heatmap::plotted;
use crate::text::cells::{self, Grid};
use crate::text::format::context;

/// A concurrency tick (whole numbers only arrive here).
fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// A context tick: `8k`, `128k`.
fn ctx_tick(v: f64) -> String {
    if v < 0.0 {
        String::new()
    } else {
        context(v.round() as u64)
    }
}

/// `ctx=8k`, prefixed by the file name when several files are shown.
fn series_name(page: &Page<'_>, file: &str, ctx: u64, suffix: &str) -> String {
    let base = format!("ctx={}{suffix}", context(ctx));
    if page.multi() {
        format!("{file} {base}")
    } else {
        base
    }
}

/// One series per (file, context): `value` of each cell that has one,
/// x = `x` of the cell, in concurrency order.
fn per_context(
    page: &Page<'_>,
    suffix: &str,
    x: &dyn Fn(&CellResult) -> Option<f64>,
    value: &dyn Fn(&CellResult, bool) -> Option<f64>,
) -> Vec<Series> {
    per_context_of(page, |d| &d.results, suffix, x, value)
}

/// [`per_context`] over the cells `pick` chooses (`results` or `burst_results`).
fn per_context_of(
    page: &Page<'_>,
    pick: fn(&ResultDocument) -> &[CellResult],
    suffix: &str,
    x: &dyn Fn(&CellResult) -> Option<f64>,
    value: &dyn Fn(&CellResult, bool) -> Option<f64>,
) -> Vec<Series> {
    let mut out = Vec::new();
    for i in page.inputs {
        let doc: &ResultDocument = i.doc;
        let m = &doc.metadata;
        let cells = pick(doc);
        let g = Grid::new(&m.context_lengths, &m.concurrency_levels, cells);
        let show = page.show_hidden(doc);
        for &ctx in &g.contexts {
            let mut row: Vec<&CellResult> = g
                .concs
                .iter()
                .filter_map(|&c| cells::find(cells, ctx, c))
                .collect();
            // Lines run in concurrency order (also on the Pareto view, where
            // x is not the concurrency), whatever order the levels were given in.
            row.sort_by_key(|c| c.concurrency);
            let points = row
                .into_iter()
                .filter_map(|cell| Some((x(cell)?, value(cell, show)?)))
                .collect();
            out.push(Series {
                name: series_name(page, i.name, ctx, suffix),
                points,
            });
        }
    }
    out
}

fn conc(c: &CellResult) -> Option<f64> {
    Some(f64::from(c.concurrency))
}

/// A measured value of a plotted (shown) cell.
fn rate(f: fn(&CellResult) -> Option<f64>) -> impl Fn(&CellResult, bool) -> Option<f64> {
    move |c, show| plotted(c, show).then(|| f(c)).flatten()
}

/// A measured value of any measured cell (times, hardware).
fn fact(f: fn(&CellResult) -> Option<f64>) -> impl Fn(&CellResult, bool) -> Option<f64> {
    move |c, _| cells::measured(c).then(|| f(c)).flatten()
}

fn ms(v: Option<f64>) -> Option<f64> {
    v.filter(|s| *s > 0.0).map(|s| s * 1000.0)
}

/// True when some cell's first answer token came after reasoning (TTFO
/// then differs from TTFT), by the text report's rule.
fn reasoning(page: &Page<'_>) -> bool {
    page.inputs.iter().flat_map(|i| &i.doc.results).any(|c| {
        c.ext.reasoning_tokens > 0
            || matches!((c.latency.ttft, c.latency.ttfo), (Some(a), Some(b)) if b.p50 > a.p50 * 1.01)
    })
}

/// `<section id="charts">` with every figure of [`super::CHART_IDS`].
pub(crate) fn section(page: &Page<'_>) -> String {
    let mut out = String::from("<section id=\"charts\">\n<h2>Charts</h2>\n");
    out.push_str(&throughput_figures(page));
    out.push_str(&ttft_figure(page));
    out.push_str(&prefill_figure(page));
    out.push_str(&token_gap_figure(page));
    out.push_str(&energy_figures(page));
    out.push_str(&optional(page));
    out.push_str("</section>\n");
    out
}

/// The spec of a chart whose x axis is concurrency (log₂).
fn conc_spec<'a>(id: &'a str, title: &'a str, note: &'a str, y_desc: &'a str) -> Spec<'a> {
    Spec {
        id,
        title,
        note,
        x_desc: "concurrency (requests, log scale)",
        y_desc,
        x_log2: true,
        x_fmt: whole,
    }
}

/// Aggregate tok/s against concurrency, and the per-user against aggregate
/// (Pareto) view.
fn throughput_figures(page: &Page<'_>) -> String {
    let mut out = String::new();
    let agg = per_context(page, "", &conc, &rate(|c| c.aggregate_tps));
    out.push_str(&figure(
        &conc_spec(
            "chart-aggregate",
            "Aggregate tok/s vs concurrency",
            "Output tokens per second of all streams together inside the measurement window, \
             one line per context.",
            "aggregate tok/s",
        ),
        &agg,
    ));

    let pareto = per_context(
        page,
        "",
        &|c| c.per_request_avg_tps.filter(|v| *v > 0.0),
        &rate(|c| c.aggregate_tps),
    );
    out.push_str(&figure(
        &Spec {
            id: "chart-pareto",
            title: "Per-user tok/s vs aggregate tok/s (Pareto view)",
            note: "Each point is a cell: what one user sees (x) against what the server delivers \
                   in total (y). Points up and to the right are better; moving along a line \
                   trades per-user speed for total throughput as concurrency grows.",
            x_desc: "per-user tok/s",
            y_desc: "aggregate tok/s",
            x_log2: false,
            x_fmt: number,
        },
        &pareto,
    ));
    out
}

/// TTFT p50 against concurrency, with TTFO p50 when some cell reasoned.
fn ttft_figure(page: &Page<'_>) -> String {
    let mut ttft = per_context(
        page,
        " TTFT p50",
        &conc,
        &fact(|c| ms(c.latency.ttft.map(|d| d.p50))),
    );
    let with_ttfo = reasoning(page);
    if with_ttfo {
        ttft.extend(per_context(
            page,
            " TTFO p50",
            &conc,
            &fact(|c| ms(c.latency.ttfo.map(|d| d.p50))),
        ));
    }
    figure(
        &conc_spec(
            "chart-ttft",
            "TTFT p50 and TTFO p50 vs concurrency",
            if with_ttfo {
                "Median time from sending a request to its first token (TTFT) and to its first \
                 answer token after any reasoning (TTFO), over requests whose first token \
                 arrived inside the window."
            } else {
                "Median time from sending a request to its first token, over requests whose \
                 first token arrived inside the window (no reasoning output: TTFO equals TTFT)."
            },
            "ms",
        ),
        &ttft,
    )
}

/// The headline prefill rate against context.
fn prefill_figure(page: &Page<'_>) -> String {
    figure(
        &Spec {
            id: "chart-prefill",
            title: "Prefill tok/s vs context",
            note: "The headline prefill rate of each measured prefill row: prompt tokens over \
                   the time to first token (or the server's counters with --prefill-metric).",
            x_desc: "context (tokens, log scale)",
            y_desc: "prefill tok/s",
            x_log2: true,
            x_fmt: ctx_tick,
        },
        &prefill(page),
    )
}

/// Token gap p50 and p99 against concurrency.
fn token_gap_figure(page: &Page<'_>) -> String {
    let mut gaps = per_context(page, " p50", &conc, &fact(|c| ms(c.ext.token_gap_p50)));
    gaps.extend(per_context(
        page,
        " p99",
        &conc,
        &fact(|c| ms(c.ext.token_gap_p99)),
    ));
    figure(
        &conc_spec(
            "chart-token-gap",
            "Token gap p50 / p99 per cell",
            "Time between consecutive output tokens of a request inside the window: the median \
             and the 99th percentile of every cell (the stutter a reader sees).",
            "ms",
        ),
        &gaps,
    )
}

/// GPU power and tokens per joule against concurrency.
fn energy_figures(page: &Page<'_>) -> String {
    let mut out = String::new();
    let power = per_context(
        page,
        "",
        &conc,
        &fact(|c| c.hardware_summary.power_total_avg_w.filter(|w| *w > 0.0)),
    );
    out.push_str(&figure(
        &conc_spec(
            "chart-power",
            "GPU power per cell",
            "Mean board power of all GPUs together over each cell's window (GPU power only, \
             not power at the wall).",
            "W",
        ),
        &power,
    ));

    let tpj = per_context(
        page,
        "",
        &conc,
        &rate(|c| Some(c.ext.tokens_per_joule).filter(|v| *v > 0.0)),
    );
    out.push_str(&figure(
        &conc_spec(
            "chart-tokens-per-joule",
            "Tokens per joule per cell",
            "Output tokens of the window divided by the GPU energy used over it.",
            "tokens / J",
        ),
        &tpj,
    ));
    out
}

/// Figures drawn only when some file has their data (not in
/// [`super::CHART_IDS`]): the Burst / E2E matrix, the open-loop rate cells
/// and the SLO frontier.
fn optional(page: &Page<'_>) -> String {
    let mut out = String::new();
    if page.inputs.iter().any(|i| !i.doc.burst_results.is_empty()) {
        let burst = per_context_of(
            page,
            |d| &d.burst_results,
            " burst",
            &conc,
            &rate(|c| c.aggregate_tps),
        );
        out.push_str(&figure(
            &conc_spec(
                "chart-burst",
                "Burst / E2E aggregate tok/s vs concurrency",
                "Output tokens per second of a finite batch of requests, first request sent to \
                 last token received (--run-burst), one line per context.",
                "aggregate tok/s",
            ),
            &burst,
        ));
    }
    if page.inputs.iter().any(|i| !i.doc.rate_results.is_empty()) {
        let rate_spec = |id, title, note, y_desc| Spec {
            id,
            title,
            note,
            x_desc: "offered request rate (req/s, log scale)",
            y_desc,
            x_log2: true,
            x_fmt: rate_tick,
        };
        out.push_str(&figure(
            &rate_spec(
                "chart-rate-throughput",
                "Open loop: achieved vs offered request rate",
                "Completed requests per second against the rate they were sent at \
                 (--request-rate), one line per context; a line that falls below the offered \
                 rate is a server that no longer keeps up.",
                "achieved req/s",
            ),
            &rate_series(page, |r| r.achieved_rate),
        ));
        out.push_str(&figure(
            &rate_spec(
                "chart-rate-latency",
                "Open loop: TTFT p99 vs offered request rate",
                "99th percentile time to first token, counted from each request's scheduled send \
                 time, so queueing in the client or the server is included.",
                "TTFT p99 (s)",
            ),
            &rate_series(page, |r| r.ttft_p99),
        ));
    }
    if page.inputs.iter().any(|i| i.doc.slo.is_some()) {
        out.push_str(&figure(
            &Spec {
                id: "chart-slo-frontier",
                title: "SLO frontier: highest passing concurrency vs context",
                note: "Per context, the highest concurrency whose cell met every --slo target with \
                       status ok (no point where none did).",
                x_desc: "context (tokens)",
                y_desc: "concurrency",
                x_log2: false,
                x_fmt: ctx_tick,
            },
            &frontier(page),
        ));
    }
    out
}

/// A rate tick: `2`, `0.5`.
fn rate_tick(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One series per (file, context) of the open-loop cells that were
/// measured: `value` by offered rate.
fn rate_series(
    page: &Page<'_>,
    value: fn(&ldb_core::open_loop::RateResult) -> Option<f64>,
) -> Vec<Series> {
    use ldb_core::result::CellStatus;
    let mut out = Vec::new();
    for i in page.inputs {
        let mut contexts: Vec<u64> = i
            .doc
            .rate_results
            .iter()
            .map(|r| r.context_tokens)
            .collect();
        contexts.sort_unstable();
        contexts.dedup();
        for ctx in contexts {
            let mut points: Vec<(f64, f64)> = i
                .doc
                .rate_results
                .iter()
                .filter(|r| r.context_tokens == ctx)
                .filter(|r| matches!(r.status, CellStatus::Ok | CellStatus::CapacityLimited))
                .filter_map(|r| Some((r.request_rate, value(r)?)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            out.push(Series {
                name: series_name(page, i.name, ctx, ""),
                points,
            });
        }
    }
    out
}

/// One series per file (and one for its burst matrix when judged): the
/// SLO frontier's concurrency by context.
fn frontier(page: &Page<'_>) -> Vec<Series> {
    let mut out = Vec::new();
    for i in page.inputs {
        let Some(slo) = &i.doc.slo else {
            continue;
        };
        for (which, map) in [("decode", &slo.frontier), ("burst", &slo.burst_frontier)] {
            let points: Vec<(f64, f64)> = map
                .iter()
                .filter_map(|(ctx, p)| p.map(|p| (*ctx as f64, f64::from(p.concurrency))))
                .collect();
            if map.is_empty() {
                continue;
            }
            let name = if page.multi() {
                format!("{} {which}", i.name)
            } else {
                which.to_string()
            };
            out.push(Series { name, points });
        }
    }
    out
}

/// One series per file: the measured prefill rows by context.
fn prefill(page: &Page<'_>) -> Vec<Series> {
    page.inputs
        .iter()
        .map(|i| Series {
            name: if page.multi() {
                i.name.to_string()
            } else {
                "prefill".to_string()
            },
            points: i
                .doc
                .prefill
                .iter()
                .filter(|(_, r)| !r.skipped && r.tok_per_sec > 0.0)
                .map(|(ctx, r)| (*ctx as f64, r.tok_per_sec))
                .collect(),
        })
        .collect()
}
