//! The decode-cell grammar shared by every matrix of the report.
//!
//! A measured cell reads `129.5`, or `∅` when it is capacity-limited and
//! values are hidden; then ` (2e)` for failed requests, then ` (1/4)*` when
//! the server ran fewer streams than asked. Cells that were not measured show
//! a word instead: `ERROR`, `skip KV`, `skip ctx`, `skip`, `0 tok`.

use ldb_core::result::{CellResult, CellStatus, DecodeMode};

use super::format;

/// Which markers appeared in a matrix, so the notes explain only those.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen {
    pub hidden: bool,
    pub eff_note: bool,
    pub error: bool,
    pub skip_kv: bool,
    pub skip_ctx: bool,
    pub skip_user: bool,
    pub skip_slo: bool,
    pub repeats: u32,
    pub no_tokens: bool,
    pub failed_requests: bool,
    pub mismatch: bool,
}

impl Seen {
    fn mark(&mut self, status: CellStatus) {
        match status {
            CellStatus::Error => self.error = true,
            CellStatus::SkippedKv => self.skip_kv = true,
            CellStatus::SkippedContext => self.skip_ctx = true,
            CellStatus::SkippedUser => self.skip_user = true,
            CellStatus::SkippedSlo => self.skip_slo = true,
            CellStatus::NoTokens => self.no_tokens = true,
            CellStatus::Ok | CellStatus::CapacityLimited => {}
        }
    }
}

/// Rows (contexts) and columns (concurrencies) of a matrix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grid {
    pub contexts: Vec<u64>,
    pub concs: Vec<u32>,
}

impl Grid {
    /// The requested levels first (in their order), then any level only the cells have.
    pub fn new(contexts: &[u64], concs: &[u32], cells: &[CellResult]) -> Self {
        let mut g = Grid {
            contexts: contexts.to_vec(),
            concs: concs.to_vec(),
        };
        for c in cells {
            if !g.contexts.contains(&c.context_tokens) {
                g.contexts.push(c.context_tokens);
            }
            if !g.concs.contains(&c.concurrency) {
                g.concs.push(c.concurrency);
            }
        }
        g
    }
}

/// The cell for `(ctx, c)`; the last one wins if a cell was repeated.
pub(crate) fn find(cells: &[CellResult], ctx: u64, c: u32) -> Option<&CellResult> {
    cells
        .iter()
        .rev()
        .find(|r| r.context_tokens == ctx && r.concurrency == c)
}

/// The cell's position as `C=4 ctx=64k`.
pub(crate) fn label(cell: &CellResult) -> String {
    format!(
        "C={} ctx={}",
        cell.concurrency,
        format::context(cell.context_tokens)
    )
}

/// Capacity-limited by status or by the scheduler flag.
pub(crate) fn capacity_limited(cell: &CellResult) -> bool {
    cell.ext.status == CellStatus::CapacityLimited || cell.sched.capacity_limited
}

/// True when the cell carries numbers (measured, not failed or skipped).
pub(crate) fn measured(cell: &CellResult) -> bool {
    matches!(
        cell.ext.status,
        CellStatus::Ok | CellStatus::CapacityLimited
    )
}

/// The word shown instead of a value for cells that have none.
pub(crate) fn status_word(status: CellStatus) -> Option<&'static str> {
    match status {
        CellStatus::Ok | CellStatus::CapacityLimited => None,
        CellStatus::Error => Some("ERROR"),
        CellStatus::SkippedKv => Some("skip KV"),
        CellStatus::SkippedContext => Some("skip ctx"),
        CellStatus::SkippedUser => Some("skip"),
        CellStatus::SkippedSlo => Some("skip SLO"),
        CellStatus::NoTokens => Some("0 tok"),
    }
}

/// ` (R/C)*` when the server ran fewer streams than requested or queued some.
///
/// Duration cells: capacity-limited, any queue, or C > 1 with
/// 0 < mean running < 0.98·C. Request modes: capacity-limited or any queue.
pub(crate) fn eff_note(cell: &CellResult) -> Option<String> {
    let s = &cell.sched;
    let limited = capacity_limited(cell);
    let c = f64::from(cell.concurrency);
    let applies = if cell.benchmark_mode == DecodeMode::Duration {
        limited
            || s.avg_queue_reqs > 0.0
            || (cell.concurrency > 1 && s.avg_running_reqs > 0.0 && s.avg_running_reqs < 0.98 * c)
    } else {
        limited || s.avg_queue_reqs > 0.0
    };
    applies.then(|| {
        let star = if limited { "*" } else { "" };
        format!(" ({:.0}/{}){star}", s.avg_running_reqs, cell.concurrency)
    })
}

/// A value cell of a decode matrix (`value` is the tok/s figure to show).
///
/// `None` for `value` on a measured cell, or a zero value when `zero_dash`,
/// prints `-`.
pub(crate) fn value_text(
    cell: &CellResult,
    value: Option<f64>,
    show_hidden: bool,
    zero_dash: bool,
    seen: &mut Seen,
) -> String {
    seen.mark(cell.ext.status);
    if let Some(word) = status_word(cell.ext.status) {
        return word.to_string();
    }
    let limited = capacity_limited(cell);
    let mut out = if limited && !show_hidden {
        seen.hidden = true;
        "∅".to_string()
    } else {
        match value {
            Some(v) if !(zero_dash && v == 0.0) => {
                let ci = ci_suffix(cell, v);
                if !ci.is_empty() {
                    seen.repeats = seen.repeats.max(ldb_core::repeat::count(cell));
                }
                format!("{v:.1}{ci}")
            }
            _ => "-".to_string(),
        }
    };
    if cell.ext.server_client_mismatch.is_some()
        || cell.ext.client_stalled()
        || cell.ext.client_limited
    {
        seen.mismatch = true;
        out.push('!');
    }
    if cell.num_errors > 0 {
        seen.failed_requests = true;
        out.push_str(&format!(" ({}e)", cell.num_errors));
    }
    if let Some(n) = eff_note(cell) {
        seen.eff_note = true;
        out.push_str(&n);
    }
    out
}

/// ` ± 2.3` after a repeated cell's mean (`--repeat`): the half width of
/// its 95 % interval, for whichever headline value `v` is (matched by value:
/// the record holds each mean exactly). Empty for a single measurement.
pub(crate) fn ci_suffix(cell: &CellResult, v: f64) -> String {
    ["aggregate_tps", "per_request_avg_tps"]
        .iter()
        .filter_map(|k| cell.ext.repeat_stats.get(*k))
        .find(|m| m.mean == v)
        .and_then(|m| m.ci95)
        .map(|h| format!(" ± {h:.1}"))
        .unwrap_or_default()
}

/// True when the cell has client request samples behind its statistics.
pub(crate) fn has_samples(cell: &CellResult) -> bool {
    cell.latency.request_count > 0 || !cell.request_samples.is_empty()
}

/// `TTFT/ITL` p50 detail in compact ms, for measured cells with samples.
pub(crate) fn ttft_itl(cell: &CellResult) -> Option<String> {
    (measured(cell) && has_samples(cell)).then(|| {
        format!(
            "{}/{}",
            format::ms_detail(cell.latency.ttft.map_or(f64::NAN, |d| d.p50)),
            format::ms_detail(cell.latency.inter_token_latency.p50)
        )
    })
}

/// Warnings about a measured cell's numbers: client and server disagree, the
/// server ignored `ignore_eos`, usage that could not be trusted.
pub(crate) fn warnings(cell: &CellResult) -> Vec<String> {
    let at = format!(
        "C={} ctx={}",
        cell.concurrency,
        format::context(cell.context_tokens)
    );
    let mut out = Vec::new();
    if let Some(m) = &cell.ext.server_client_mismatch {
        out.push(format!(
            "{at}: the client received {:.1} tok/s while the server's counter says it generated \
             {:.1} tok/s over the same window ({:+.1}%). Likely causes: the server's front end \
             delivers slower than its engine generates, this client is short of CPU, or another \
             workload used the server.",
            m.client_tps, m.server_tps, m.difference_pct
        ));
    }
    if cell.ext.client_stalled() {
        out.push(format!(
            "{at}: the benchmark itself was not running for {:.1} s inside the window (its \
             process was starved of CPU or frozen), so tokens waited unread and the client's \
             numbers for this cell are not trustworthy{}{}.",
            cell.ext.client_stall_max_s,
            if cell.ext.measure_attempts > 1 {
                "; it stalled in both windows it was measured in"
            } else {
                ""
            },
            cell.ext
                .client_load()
                .describe()
                .map(|d| format!(" (over the window: {d})"))
                .unwrap_or_default()
        ));
    }
    if cell.ext.client_limited {
        out.push(format!(
            "{at}: the benchmark itself was the bottleneck in this window ({}), so the server \
             may be faster than these numbers and its latencies lower. Give the client more \
             CPU, another host or fewer streams; `llm-decode-bench selftest` shows this \
             host's client ceiling.",
            cell.ext
                .headroom()
                .describe()
                .unwrap_or_else(|| "client_limited".into())
        ));
    }
    if cell.ext.early_stop_requests > 0 {
        out.push(format!(
            "{at}: {} requests stopped at end-of-sequence although ignore_eos was sent: the \
             server ignores ignore_eos, so outputs are shorter than --max-tokens.",
            cell.ext.early_stop_requests
        ));
    }
    if cell.ext.usage_anomalies > 0 {
        out.push(format!(
            "{at}: {} requests reported usage that went backwards or was not a valid count; \
             their tokens were counted by chunks.",
            cell.ext.usage_anomalies
        ));
    }
    out
}

/// The footnote for a cell that failed or was not measured, if there is something to say.
pub(crate) fn footnote(cell: &CellResult) -> Option<String> {
    let reason = cell.ext.status_reason.trim();
    let text = match cell.ext.status {
        CellStatus::Ok | CellStatus::CapacityLimited => return None,
        CellStatus::Error if reason.is_empty() => "failed (no reason recorded)".to_string(),
        CellStatus::SkippedKv => {
            let e = &cell.ext;
            let short = (e.kv_deficit_tokens > 0).then(|| {
                format!(
                    "needs {} KV tokens, {} more than the budget",
                    format::thousands(e.kv_required_tokens),
                    format::thousands(e.kv_deficit_tokens)
                )
            });
            match (reason.is_empty(), short) {
                (true, None) => "over the KV budget".to_string(),
                (true, Some(s)) => s,
                (false, None) => reason.to_string(),
                (false, Some(s)) => format!("{reason} ({s})"),
            }
        }
        _ if reason.is_empty() => return None,
        _ => reason.to_string(),
    };
    Some(format!("{}: {text}", label(cell)))
}
