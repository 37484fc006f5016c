//! The decode matrices: aggregate tok/s (+ TTFT/ITL), per-request tok/s and
//! client request latency.

use ldb_core::result::{AggregateSource, CellResult, CellStatus};

use super::Ctx;
use super::cells::{self, Grid, Seen};
use super::format::{context, ms_latency};
use super::style::{Span, Tone};
use super::table::{Cell, Table};

/// The grid of the primary decode cells.
pub(crate) fn grid(cx: &Ctx<'_>, cells: &[CellResult]) -> Grid {
    let m = &cx.doc.metadata;
    Grid::new(&m.context_lengths, &m.concurrency_levels, cells)
}

fn headers(g: &Grid) -> Vec<String> {
    let mut h = vec!["ctx \\ conc".to_string()];
    h.extend(g.concs.iter().map(u32::to_string));
    h
}

/// A matrix with one row per context; `cell` builds each value cell.
fn matrix(
    title: &str,
    g: &Grid,
    cells: &[CellResult],
    mut cell: impl FnMut(&CellResult) -> Cell,
) -> Table {
    let mut t = Table::with_headers(title, headers(g));
    for &ctx in &g.contexts {
        let mut row = vec![Cell::plain(context(ctx))];
        for &c in &g.concs {
            row.push(cells::find(cells, ctx, c).map_or_else(|| Cell::plain("-"), &mut cell));
        }
        t.push(row);
    }
    t
}

/// The aggregate matrix; with `detail`, TTFT/ITL p50s follow each value.
pub(crate) fn aggregate_table(
    cx: &Ctx<'_>,
    title: &str,
    cells: &[CellResult],
    detail: bool,
    seen: &mut Seen,
) -> Table {
    let g = grid(cx, cells);
    let inline = 14 + 18 * g.concs.len() <= cx.width.max(80);
    matrix(title, &g, cells, |c| {
        let text = cells::value_text(c, c.aggregate_tps, cx.show_hidden, false, seen);
        let tone = if c.ext.status == CellStatus::Error {
            Tone::Warn
        } else {
            Tone::Plain
        };
        let mut cell = Cell::spans(vec![Span::new(text, tone)]);
        if let Some(d) = cells::ttft_itl(c).filter(|_| detail) {
            if inline {
                cell.lines[0].push(Span::new(format!(" {d}"), Tone::Dim));
            } else {
                cell.lines.push(vec![Span::new(d, Tone::Dim)]);
            }
        }
        cell
    })
}

/// Sorted, unique aggregate sources of the measured cells.
fn sources(cells: &[CellResult]) -> Vec<&str> {
    let mut s: Vec<&str> = cells
        .iter()
        .filter(|c| cells::measured(c) || c.ext.status == CellStatus::NoTokens)
        .filter(|c| c.aggregate_source != AggregateSource::None)
        .map(|c| c.aggregate_source.as_str())
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// Legend lines for the markers that appeared.
pub(crate) fn legend(seen: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    if seen.hidden {
        out.push(
            "∅ = value hidden: the server did not run all C streams at once, so the figure is \
             not a C-stream rate (--show-capacity-limited-values prints it)."
                .to_string(),
        );
    }
    if seen.eff_note {
        out.push(
            "(X/Y) = mean running requests X out of the Y requested, from the server's scheduler \
             metrics; * = capacity-limited (fewer than Y running, a queue formed, or the cell \
             never became ready)."
                .to_string(),
        );
    }
    if seen.mismatch {
        out.push(
            "! = the client's and the server's token rates over the window differ by more than \
             5 %, or the benchmark itself stalled or could not keep up inside the window; see \
             the note on the cell."
                .to_string(),
        );
    }
    if seen.failed_requests {
        out.push(
            "(Ne) = N requests of the cell failed (within --max-error-rate, so the value stands)."
                .to_string(),
        );
    }
    if seen.error {
        out.push("ERROR = the cell failed; its reason is listed under the table.".to_string());
    }
    if seen.repeats > 1 {
        out.push(format!(
            "mean ± h = mean of the cell's repeats (--repeat {}) ± the half width of its 95 % \
             confidence interval (Student t).",
            seen.repeats
        ));
    }
    let mut skips = Vec::new();
    if seen.skip_kv {
        skips.push("skip KV = C × (context + max tokens) does not fit the KV budget");
    }
    if seen.skip_ctx {
        skips.push("skip ctx = context + max tokens exceeds the model's context length");
    }
    if seen.skip_user {
        skips.push("skip = skipped by the user or cut short by a stop");
    }
    if seen.skip_slo {
        skips.push("skip SLO = not measured: --slo-search saw two lower levels fail the SLO");
    }
    if seen.no_tokens {
        skips.push("0 tok = no output tokens arrived inside the window");
    }
    if !skips.is_empty() {
        out.push(format!("{}.", skips.join("; ")));
    }
    out
}

/// Aggregate, per-request and latency matrices with their notes.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let cells = &cx.doc.results;
    let any_samples = cells.iter().any(cells::has_samples);
    let mut seen = Seen::default();
    let mut t = aggregate_table(cx, "Aggregate tok/s", cells, true, &mut seen);
    if any_samples {
        t = t.title_suffix(" + TTFT/ITL");
    }
    let mut out = t.render(cx.color);
    for c in cells {
        if let Some(f) = cells::footnote(c) {
            let tone = if c.ext.status == CellStatus::Error {
                Tone::Warn
            } else {
                Tone::Dim
            };
            out.extend(cx.para(&f, tone));
        }
        for w in cells::warnings(c) {
            out.extend(cx.para(&w, Tone::Warn));
        }
    }
    let lead = if cx.request_mode() {
        "Burst / E2E-only mode: every cell sends a fixed batch of requests; tok/s is the sum of \
         their completion tokens over the time from the first measured send to the last \
         completion."
    } else {
        "Sustained decode: tok/s counts the output tokens whose stream usage arrived inside the \
         measurement window and divides by the window's wall-clock length."
    };
    out.extend(cx.note(lead));
    let src = sources(cells);
    if !src.is_empty() {
        out.extend(cx.note(&format!("Aggregate source(s): {}", src.join(", "))));
    }
    for l in legend(&seen) {
        out.extend(cx.note(&l));
    }
    out.push(String::new());

    let g = grid(cx, cells);
    let mut unused = Seen::default();
    let per = matrix("Per-Request tok/s", &g, cells, |c| {
        Cell::plain(cells::value_text(
            c,
            c.per_request_avg_tps,
            cx.show_hidden,
            true,
            &mut unused,
        ))
    });
    out.extend(per.render(cx.color));
    out.push(String::new());

    if any_samples {
        out.extend(latency_table(cx, &g, cells));
    }
    out.extend(gap_tables(cx, &g, cells));
    out
}

/// Token-gap and (for reasoning output) time-to-first-output matrices, when
/// any cell has them.
fn gap_tables(cx: &Ctx<'_>, g: &Grid, cells: &[CellResult]) -> Vec<String> {
    let mut out = Vec::new();
    let pair = |a: Option<f64>, b: Option<f64>| {
        format!(
            "{}/{}",
            ms_latency(a.unwrap_or(f64::NAN)),
            ms_latency(b.unwrap_or(f64::NAN))
        )
    };
    let cell_or_word = |c: &CellResult, f: &dyn Fn(&CellResult) -> String| {
        cells::status_word(c.ext.status).map_or_else(|| Cell::plain(f(c)), Cell::plain)
    };
    if cells.iter().any(|c| c.ext.token_gap_p50.is_some()) {
        let t = matrix("Token gap: p50 / p99 ms", g, cells, |c| {
            cell_or_word(c, &|c| pair(c.ext.token_gap_p50, c.ext.token_gap_p99))
        });
        out.extend(t.render(cx.color));
        out.extend(cx.note(
            "Token gap = time between consecutive output tokens of a request inside the window; \
             tokens that arrive together (speculative decoding, batched delivery) share the gap \
             before them. This is the stutter a reader sees; ITL is its mean.",
        ));
        out.push(String::new());
    }
    let reasoning = cells.iter().any(|c| {
        c.ext.reasoning_tokens > 0
            || matches!((c.latency.ttft, c.latency.ttfo), (Some(a), Some(b)) if b.p50 > a.p50 * 1.01)
    });
    if reasoning {
        let t = matrix("Time to first output (TTFO): p50 / p99 ms", g, cells, |c| {
            cell_or_word(c, &|c| {
                pair(c.latency.ttfo.map(|d| d.p50), c.latency.ttfo.map(|d| d.p99))
            })
        });
        out.extend(t.render(cx.color));
        out.extend(cx.note(
            "TTFO = time from sending a request to its first answer token, after any reasoning \
             tokens; TTFT counts the first token of either kind. — = no request started inside \
             the window.",
        ));
        out.push(String::new());
    }
    if cells.iter().any(|c| c.ext.tool_call_tokens > 0) {
        let t = matrix("Tool calls: tokens, TTFTC p50 / p99 ms", g, cells, |c| {
            cell_or_word(c, &|c| {
                let t = c.latency.ttftc;
                format!(
                    "{} {}",
                    c.ext.tool_call_tokens,
                    pair(t.map(|d| d.p50), t.map(|d| d.p99))
                )
            })
        });
        out.extend(t.render(cx.color));
        out.extend(cx.note(
            "Tool-call tokens = window tokens of streamed tool calls (names and arguments), a \
             channel apart from reasoning and answer; TTFTC = time from sending a request to \
             its first tool-call token, over the requests that called a tool (--tools).",
        ));
        out.push(String::new());
    }
    out
}

fn latency_table(cx: &Ctx<'_>, g: &Grid, cells: &[CellResult]) -> Vec<String> {
    let t = matrix("Client request latency: p50 / p90 ms", g, cells, |c| {
        if let Some(word) = cells::status_word(c.ext.status) {
            return Cell::plain(word);
        }
        if !cells::has_samples(c) {
            return Cell::plain("-");
        }
        let d = &c.latency.request_latency;
        Cell::plain(format!("{}/{}", ms_latency(d.p50), ms_latency(d.p90)))
    });
    let mut out = t.render(cx.color);
    out.extend(cx.note(
        "TTFT/ITL after an aggregate value are the median time to first token and the median \
         inter-token latency of the cell's requests, in compact ms: 134 = 134 ms, 9k ≈ 9 s, \
         — = none.",
    ));
    let formulas = if cx.request_mode() {
        "Every measured request runs to completion, so latency is its full time from send to \
         last token. ITL = (last token − first token) / (output tokens − 1); tok/s per user = \
         1 / ITL."
    } else {
        "Latency counts only requests that finished on their own inside the cell; streams cut \
         at the window end are left out. ITL = (last token − first token) / (output tokens − 1), \
         per token rather than per chunk; tok/s per user = 1 / ITL. A TTFT far above the \
         prefill time usually means the request waited in the server's queue."
    };
    out.extend(cx.note(formulas));
    out.push(String::new());
    out
}
