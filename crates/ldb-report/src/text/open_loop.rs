//! The open-loop section (`--request-rate`): one row per rate × context.

use ldb_core::open_loop::RateResult;

use super::Ctx;
use super::cells::status_word;
use super::format::{context, ms_plain, rate};
use super::style::Tone;
use super::table::{Cell, Table, panel};

/// A rate that may be unknown (an older file has no completion rate).
fn opt_rate(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), rate)
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), ms_plain)
}

/// The section (empty without rate cells).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let rows = &cx.doc.rate_results;
    if rows.is_empty() {
        return Vec::new();
    }
    let arrival = cx
        .doc
        .metadata
        .open_loop
        .as_ref()
        .map_or_else(|| "poisson".to_string(), |o| o.arrival.to_string());
    let mut out = panel(
        "Open loop",
        &format!(
            "Open-loop load — requests leave at scheduled times ({arrival} arrivals) whether or not \
             earlier ones finished; TTFT, TTFO and E2E count from the scheduled time, so a queue in \
             the server shows as latency."
        ),
        cx.text_width(),
        cx.color,
        false,
    );
    out.push(String::new());
    out.extend(table(rows).render(cx.color));
    for r in rows {
        if let Some(note) = note(r) {
            out.extend(cx.para(&note, Tone::Dim));
        }
    }
    out.extend(cx.note(
        "Rate = offered requests/s; sent = requests sent per second; done = completed requests \
         per second from the first send to the last completion (below the rate: the server did \
         not keep up). Times in ms (p50/p99). Lag = how late the \
         client sent (p99). In flight = most requests open at once. SAT = the wait for the first \
         token grew through the cell: the server did not keep up with the rate.",
    ));
    out.push(String::new());
    out
}

fn table(rows: &[RateResult]) -> Table {
    let mut t = Table::new(
        "Open-loop cells",
        &[
            "ctx",
            "rate",
            "sent/s",
            "done/s",
            "out tok/s",
            "TTFT p50/p99",
            "TTFO p50",
            "E2E p50/p99",
            "gap p99",
            "lag p99",
            "in flight",
            "done/err",
            "",
        ],
    )
    .right(&[1, 2, 3, 4, 6, 8, 9, 10]);
    for r in rows {
        let mut row = vec![
            Cell::plain(context(r.context_tokens)),
            Cell::plain(rate(r.request_rate)),
        ];
        if let Some(word) = status_word(r.status).filter(|_| r.request_count == 0) {
            row.push(Cell::plain(word));
            row.extend((0..10).map(|_| Cell::plain("")));
        } else {
            row.extend([
                Cell::plain(opt_rate(r.offered_rate_measured)),
                Cell::plain(opt_rate(r.achieved_rate)),
                Cell::plain(rate(r.output_tps)),
                Cell::plain(format!("{}/{}", ms(r.ttft_p50), ms(r.ttft_p99))),
                Cell::plain(ms(r.ttfo_p50)),
                Cell::plain(format!("{}/{}", ms(r.e2e_p50), ms(r.e2e_p99))),
                Cell::plain(ms(r.token_gap_p99)),
                Cell::plain(ms(r.dispatch_lag_p99)),
                Cell::plain(format!(
                    "{}{}",
                    r.max_in_flight,
                    if r.max_in_flight_capped { " (cap)" } else { "" }
                )),
                Cell::plain(format!("{}/{}", r.completed, r.errors)),
                Cell::plain(match status_word(r.status) {
                    Some(w) => w.to_string(),
                    None if r.saturated => "SAT".into(),
                    None => String::new(),
                }),
            ]);
        }
        t.push(row);
    }
    t
}

fn note(r: &RateResult) -> Option<String> {
    (!r.status_reason.is_empty()).then(|| {
        format!(
            "{} req/s ctx={}: {}",
            rate(r.request_rate),
            context(r.context_tokens),
            r.status_reason
        )
    })
}
