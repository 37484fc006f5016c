//! `report --csv`: one row per cell (decode and burst), then the rows of
//! trace replays and sessions (`csv/replay.rs`), then those of the
//! interference probe (`csv/interference.rs`), for spreadsheets and scripts.
//!
//! Column names are stable: snake_case, the result file's key where the
//! value is a key of the cell (`kind` is the only added one). Empty fields
//! are JSON `null` (not measured or not reported). `docs/report.md` lists
//! every column with its unit. Every field passes through
//! [`formula::neutralise`], so text from a result file is never read as a
//! spreadsheet formula.

mod formula;
mod interference;
mod replay;

use std::io::Write;

use ldb_core::document::ResultDocument;
use ldb_core::repeat::RepeatEntry;
use ldb_core::result::{CellResult, Dist};
use ldb_core::student::MeanCi;

/// One column: its name and how a cell fills it.
struct Column {
    name: &'static str,
    value: fn(&CellResult) -> String,
}

fn f(v: f64) -> String {
    if v.is_finite() {
        v.to_string()
    } else {
        String::new()
    }
}

fn of(v: Option<f64>) -> String {
    v.map_or_else(String::new, f)
}

fn dist(d: Option<Dist>, pick: fn(&Dist) -> f64) -> String {
    d.as_ref().map_or_else(String::new, |d| f(pick(d)))
}

macro_rules! col {
    ($name:literal, $body:expr) => {
        Column {
            name: $name,
            value: $body,
        }
    };
}

/// The columns in file order. The first two (`kind`, then the cell key) are
/// filled by the writer; these follow them.
const COLUMNS: &[Column] = &[
    col!("concurrency", |c| c.concurrency.to_string()),
    col!("context_tokens", |c| c.context_tokens.to_string()),
    col!("benchmark_mode", |c| c.benchmark_mode.as_str().to_string()),
    col!("status", |c| c.ext.status.as_str().to_string()),
    col!("aggregate_tps", |c| of(c.aggregate_tps)),
    col!("per_request_avg_tps", |c| of(c.per_request_avg_tps)),
    col!("effective_concurrency", |c| f(c
        .sched
        .effective_concurrency)),
    col!("ttft_p50", |c| dist(c.latency.ttft, |d| d.p50)),
    col!("ttft_p90", |c| dist(c.latency.ttft, |d| d.p90)),
    col!("ttft_p99", |c| dist(c.latency.ttft, |d| d.p99)),
    col!("ttfo_p50", |c| dist(c.latency.ttfo, |d| d.p50)),
    col!("ttfo_p99", |c| dist(c.latency.ttfo, |d| d.p99)),
    col!("inter_token_latency_p50", |c| f(c
        .latency
        .inter_token_latency
        .p50)),
    col!("inter_token_latency_p99", |c| f(c
        .latency
        .inter_token_latency
        .p99)),
    col!("output_tps_per_user_p50", |c| f(c
        .latency
        .output_tps_per_user
        .p50)),
    col!("request_latency_p50", |c| f(c.latency.request_latency.p50)),
    col!("request_latency_p99", |c| f(c.latency.request_latency.p99)),
    col!("token_gap_p50", |c| of(c.ext.token_gap_p50)),
    col!("token_gap_p99", |c| of(c.ext.token_gap_p99)),
    col!("token_gap_max", |c| of(c.ext.token_gap_max)),
    col!("total_tokens", |c| c.total_tokens.to_string()),
    col!("measurement_seconds", |c| f(c.measurement_seconds)),
    col!("request_count", |c| c.latency.request_count.to_string()),
    col!("num_completed", |c| c.num_completed.to_string()),
    col!("num_errors", |c| c.num_errors.to_string()),
    col!("error_rate", |c| f(c.ext.error_rate)),
    col!("avg_running_reqs", |c| f(c.sched.avg_running_reqs)),
    col!("avg_queue_reqs", |c| f(c.sched.avg_queue_reqs)),
    col!("server_utilization", |c| f(c.server_utilization)),
    col!("server_spec_accept_length", |c| f(c.spec.accept_length)),
    col!("tokens_per_joule", |c| f(c.ext.tokens_per_joule)),
    col!("decode_joules_per_token", |c| energy(c, |e| e
        .decode_joules_per_token)),
    col!("prefill_joules_per_token", |c| energy(c, |e| e
        .prefill_joules_per_token)),
    col!("idle_power_w", |c| energy(c, |e| e.idle_power_w)),
    col!("tokens_per_second_per_kw", |c| energy(c, |e| e
        .tokens_per_second_per_kw)),
    col!("usd_per_million_output_tokens", |c| energy(c, |e| e
        .usd_per_million_output_tokens)),
    col!("status_reason", |c| c.ext.status_reason.clone()),
    col!("slo_met", |c| c
        .ext
        .slo_met
        .flatten()
        .map_or_else(String::new, |b| b.to_string())),
    col!("slo_failed", |c| c
        .ext
        .slo_failed
        .as_deref()
        .unwrap_or_default()
        .join(" ")),
    col!("goodput", |c| of(c.ext.goodput.flatten())),
    // --repeat: empty for cells measured once.
    col!("repeat", |_| String::new()),
    col!("repeat_count", |c| if c.ext.repeats.is_empty() {
        String::new()
    } else {
        c.ext.repeats.len().to_string()
    }),
    col!("aggregate_tps_std_dev", |c| stat(c, "aggregate_tps", |m| m
        .std_dev)),
    col!("aggregate_tps_ci95", |c| stat(c, "aggregate_tps", |m| m
        .ci95)),
    col!("per_request_avg_tps_ci95", |c| stat(
        c,
        "per_request_avg_tps",
        |m| m.ci95
    )),
    col!("ttft_p99_ci95", |c| stat(c, "ttft_p99", |m| m.ci95)),
    col!("window_start_unix", |c| of(c.ext.window_start_unix)),
    col!("prefix_cache_intended", |c| of(c
        .ext
        .prefix_cache
        .prefix_cache_intended)),
    col!("server_prefix_cache_hit_rate", |c| of(c
        .ext
        .server_prefix_cache_hit_rate)),
    col!("server_prefix_cache_source", |c| c
        .ext
        .prefix_cache
        .server_prefix_cache_source
        .clone()),
    col!("prefix_cache_gap", |c| c
        .ext
        .prefix_cache
        .mismatch(c.ext.server_prefix_cache_hit_rate)
        .to_string()),
    // TTFT breakdown (methodology §9.4), seconds; empty without one.
    col!("engine_ttft_mean", |c| ttft(c, |b| b
        .engine_ttft()
        .and_then(|e| e.mean_s))),
    col!("engine_ttft_p50", |c| ttft(c, |b| b
        .engine_ttft()
        .and_then(|e| e.p50)
        .map(|q| q.value))),
    col!("engine_ttft_p50_error_bound", |c| ttft(c, |b| b
        .engine_ttft()
        .and_then(|e| e.p50)
        .and_then(|q| q.error_bound()))),
    col!("queue_time_mean", |c| ttft(c, |b| b.mean_of("queue"))),
    col!("prefill_time_mean", |c| ttft(c, |b| b.mean_of("prefill"))),
    col!("decode_time_mean", |c| ttft(c, |b| b.mean_of("decode"))),
    col!("inference_time_mean", |c| ttft(c, |b| b
        .mean_of("inference"))),
    col!("frontend_overhead_mean", |c| ttft(c, |b| b
        .frontend_overhead_mean_s)),
    col!("frontend_overhead_p50", |c| ttft(c, |b| b
        .frontend_overhead_p50_s)),
    col!("frontend_dominant", |c| c
        .ext
        .ttft_breakdown
        .as_ref()
        .map_or_else(String::new, |b| b
            .frontend_dominant
            .to_string())),
    col!("preemptions", |c| c
        .ext
        .ttft_breakdown
        .as_ref()
        .and_then(|b| b.preemptions)
        .map_or_else(String::new, |p| p.to_string())),
];

/// A TTFT-breakdown figure of the cell, empty when absent.
fn ttft(
    c: &CellResult,
    get: impl Fn(&ldb_core::ttft_breakdown::TtftBreakdown) -> Option<f64>,
) -> String {
    c.ext
        .ttft_breakdown
        .as_ref()
        .and_then(get)
        .map_or_else(String::new, f)
}

/// A `repeat_stats` figure of the cell, empty when it has none.
fn stat(c: &CellResult, key: &str, pick: fn(&MeanCi) -> Option<f64>) -> String {
    of(c.ext.repeat_stats.get(key).and_then(pick))
}

/// The columns a repeat row (`kind` `decode_repeat` or `burst_repeat`)
/// fills: the cell's key, the repeat's status and the values each repeat
/// keeps; the others stay empty.
const REPEAT_COLUMNS: &[&str] = &[
    "concurrency",
    "context_tokens",
    "benchmark_mode",
    "status",
    "aggregate_tps",
    "per_request_avg_tps",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "ttfo_p50",
    "ttfo_p99",
    "token_gap_p50",
    "token_gap_p99",
    "token_gap_max",
    "repeat",
    "window_start_unix",
];

/// The header row, in file order: `kind`, the cell columns, then the
/// columns only replay rows fill, then those only interference rows fill.
pub fn header() -> Vec<&'static str> {
    std::iter::once("kind")
        .chain(COLUMNS.iter().map(|c| c.name))
        .chain(replay::REPLAY_COLUMNS.iter().copied())
        .chain(interference::INTERFERENCE_COLUMNS.iter().copied())
        .collect()
}

/// Empty fields for the replay and interference columns of a cell row.
fn no_replay() -> impl Iterator<Item = String> {
    replay::REPLAY_COLUMNS
        .iter()
        .chain(interference::INTERFERENCE_COLUMNS)
        .map(|_| String::new())
}

/// A replay row: each value under its column, the others empty.
fn replay_row(kind: &str, pairs: &replay::Pairs) -> Vec<String> {
    let mut row: Vec<String> = header().iter().map(|_| String::new()).collect();
    row[0] = kind.to_string();
    for (name, value) in pairs {
        if let Some(at) = header().iter().position(|h| h == name) {
            row[at] = value.clone();
        }
    }
    row
}

/// Writes the CSV of `doc` (header, then the decode cells in run order,
/// then the burst cells, then the replays, then the interference probe's
/// injections) to `w`.
pub fn write(doc: &ResultDocument, w: impl Write) -> Result<(), ::csv::Error> {
    let mut out = SafeWriter(::csv::Writer::from_writer(w));
    out.write_record(header().into_iter().map(String::from))?;
    for (kind, cells) in [("decode", &doc.results), ("burst", &doc.burst_results)] {
        for c in cells {
            let row = std::iter::once(kind.to_string())
                .chain(COLUMNS.iter().map(|col| (col.value)(c)))
                .chain(no_replay());
            out.write_record(row)?;
            for r in &c.ext.repeats {
                out.write_record(repeat_row(kind, c, r))?;
            }
        }
    }
    for (kind, pairs) in replay::rows(doc).into_iter().chain(interference::rows(doc)) {
        out.write_record(replay_row(kind, &pairs))?;
    }
    out.0.flush()?;
    Ok(())
}

/// The CSV writer every row goes through: each field neutralised.
struct SafeWriter<W: Write>(::csv::Writer<W>);

impl<W: Write> SafeWriter<W> {
    fn write_record(&mut self, row: impl IntoIterator<Item = String>) -> Result<(), ::csv::Error> {
        self.0
            .write_record(row.into_iter().map(formula::neutralise))
    }
}

/// One repeat of a repeated cell, as its own row after the cell's row.
fn repeat_row(kind: &str, cell: &CellResult, r: &RepeatEntry) -> Vec<String> {
    let mut one = CellResult {
        concurrency: cell.concurrency,
        context_tokens: cell.context_tokens,
        benchmark_mode: cell.benchmark_mode,
        ..CellResult::default()
    };
    one.ext.status = r.status;
    one.ext.window_start_unix = r.window_start_unix;
    ldb_core::repeat::apply_values(&mut one, r);
    std::iter::once(format!("{kind}_repeat"))
        .chain(COLUMNS.iter().map(|col| match col.name {
            "repeat" => r.repeat.to_string(),
            n if REPEAT_COLUMNS.contains(&n) => (col.value)(&one),
            _ => String::new(),
        }))
        .chain(no_replay())
        .collect()
}

/// An energy-and-cost figure of the cell, empty when absent (its reason is
/// in the result JSON).
fn energy(
    c: &CellResult,
    get: impl Fn(&ldb_core::energy_cost::CellEnergyCost) -> Option<f64>,
) -> String {
    c.ext
        .energy_cost
        .as_ref()
        .and_then(get)
        .map_or_else(String::new, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_are_unique_snake_case() {
        let h = header();
        let mut seen = std::collections::HashSet::new();
        for name in &h {
            assert!(seen.insert(*name), "duplicate {name}");
            assert!(
                name.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
            );
        }
    }

    #[test]
    fn a_repeated_cell_has_a_row_per_repeat_after_its_own() {
        let mut doc = ResultDocument::default();
        let cell = |tps: f64| CellResult {
            concurrency: 4,
            aggregate_tps: Some(tps),
            ..CellResult::default()
        };
        let mut c = cell(100.0);
        ldb_core::repeat::add(&mut c, cell(110.0), 2);
        doc.results.push(c);
        doc.results.push(cell(50.0));
        let mut buf = Vec::new();
        write(&doc, &mut buf).expect("written");
        let mut r = ::csv::Reader::from_reader(buf.as_slice());
        let rows: Vec<_> = r.records().map(|x| x.expect("parses")).collect();
        let at = |n: &str| header().iter().position(|h| *h == n).expect("column");
        let kinds: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
        assert_eq!(
            kinds,
            ["decode", "decode_repeat", "decode_repeat", "decode"]
        );
        assert_eq!(&rows[0][at("aggregate_tps")], "105");
        assert_eq!(&rows[0][at("repeat_count")], "2");
        assert_eq!(&rows[1][at("repeat")], "1");
        assert_eq!(&rows[2][at("aggregate_tps")], "110");
        assert_eq!(&rows[2][at("total_tokens")], "");
        assert_eq!(&rows[3][at("repeat")], "");
        assert!(rows.iter().all(|r| r.len() == header().len()));
    }

    #[test]
    fn a_reason_with_commas_and_quotes_stays_one_field() {
        let mut doc = ResultDocument::default();
        let mut c = CellResult::default();
        c.ext.status_reason = "HTTP 500: \"boom\", then more\nlines".into();
        doc.results.push(c);
        let mut buf = Vec::new();
        write(&doc, &mut buf).expect("written");
        let mut r = ::csv::Reader::from_reader(buf.as_slice());
        let row = r.records().next().expect("a row").expect("parses");
        assert_eq!(row.len(), header().len());
        let at = header()
            .iter()
            .position(|n| *n == "status_reason")
            .expect("column");
        assert_eq!(&row[at], "HTTP 500: \"boom\", then more\nlines");
        assert_eq!(&row[0], "decode");
    }
}
