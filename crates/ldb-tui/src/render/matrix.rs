//! The live decode matrix: rows are contexts, columns concurrencies.

use ldb_core::live::{LiveSnapshot, MatrixCell, MatrixCellState};
use ldb_core::result::CellStatus;
use ldb_core::tokens::format_context;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format;
use crate::render::panel;
use crate::theme;

/// How much each cell says, from most to least verbose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// `129.5 85/12`: one decimal, TTFT/ITL ms and `(R/C)*` markers.
    Full,
    /// `129.5`: one decimal, `(R/C)*` markers.
    Precise,
    /// `130`, `1.2k`, `*` markers.
    Compact,
}

/// The chosen verbosity and the resulting column widths.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Verbosity.
    pub detail: Detail,
    /// Width of the context label column.
    pub label: usize,
    /// Width of each concurrency column.
    pub cols: Vec<usize>,
}

impl Plan {
    /// Panel width including borders.
    pub fn width(&self) -> u16 {
        let inner = self.label + self.cols.iter().map(|c| c + 1).sum::<usize>();
        u16::try_from(inner + 2).unwrap_or(u16::MAX)
    }
}

const LABEL: &str = "ctx\\C";

/// Pick the most verbose plan whose panel fits in `avail` columns.
pub fn plan(snap: &LiveSnapshot, avail: u16) -> Plan {
    let mut last = None;
    for detail in [Detail::Full, Detail::Precise, Detail::Compact] {
        let p = plan_for(snap, detail);
        if p.width() <= avail {
            return p;
        }
        last = Some(p);
    }
    last.unwrap_or_else(|| plan_for(snap, Detail::Compact))
}

fn plan_for(snap: &LiveSnapshot, detail: Detail) -> Plan {
    let label = snap
        .contexts
        .iter()
        .map(|c| format_context(*c).chars().count())
        .chain([LABEL.len()])
        .max()
        .unwrap_or(LABEL.len());
    let cols = snap
        .concurrencies
        .iter()
        .map(|&conc| {
            let head = snap.column_label(conc).chars().count();
            snap.matrix
                .iter()
                .filter(|m| m.concurrency == conc)
                .map(|m| width(&cell_spans(m, snap, detail)))
                .chain([head, min_col(detail)])
                .max()
                .unwrap_or(head)
        })
        .collect();
    Plan {
        detail,
        label,
        cols,
    }
}

/// Columns start at the width of a typical finished cell, so the panel does
/// not jump about as cells fill in.
fn min_col(detail: Detail) -> usize {
    match detail {
        Detail::Full => 12,
        Detail::Precise => 7,
        Detail::Compact => 4,
    }
}

fn width(spans: &[Span<'static>]) -> usize {
    spans.iter().map(|s| s.content.chars().count()).sum()
}

/// The text of one cell.
fn cell_spans(cell: &MatrixCell, snap: &LiveSnapshot, detail: Detail) -> Vec<Span<'static>> {
    let precise = detail != Detail::Compact;
    match &cell.state {
        MatrixCellState::Pending => vec![Span::styled("...", theme::dim())],
        MatrixCellState::Running => {
            let live = snap
                .current
                .as_ref()
                .filter(|c| c.context == cell.context && c.concurrency == cell.concurrency)
                .and_then(|c| c.tps_trace.last().copied());
            let text = match live {
                Some(v) => format!("▶{}", format::tps(v, precise)),
                None => "▶run".to_owned(),
            };
            vec![Span::styled(text, theme::active())]
        }
        MatrixCellState::Done {
            tps,
            ttft_p50,
            itl_p50,
            ttfo_p50,
            status,
            effective,
            tps_ci95,
        } => done_spans(
            *tps,
            *tps_ci95,
            Latency {
                ttft: *ttft_p50,
                itl: *itl_p50,
                ttfo: *ttfo_p50,
            },
            *status,
            *effective,
            cell,
            detail,
        ),
    }
}

/// Median latencies of a finished cell, seconds.
#[derive(Debug, Clone, Copy)]
struct Latency {
    ttft: f64,
    itl: f64,
    /// Time to first output; shown when it differs from TTFT (reasoning).
    ttfo: f64,
}

fn done_spans(
    tps: Option<f64>,
    ci95: Option<f64>,
    lat: Latency,
    status: CellStatus,
    effective: f64,
    cell: &MatrixCell,
    detail: Detail,
) -> Vec<Span<'static>> {
    let precise = detail != Detail::Compact;
    let word = |long: &'static str, short: &'static str, style: Style| {
        vec![Span::styled(if precise { long } else { short }, style)]
    };
    match status {
        CellStatus::Error => return word("ERROR", "err", theme::error()),
        CellStatus::SkippedUser => return word("skipped", "skip", theme::warn()),
        CellStatus::SkippedSlo => return word("skip SLO", "slo", theme::dim()),
        CellStatus::SkippedKv | CellStatus::SkippedContext => {
            return vec![Span::styled("∅", theme::dim())];
        }
        CellStatus::NoTokens => return word("0 tok", "0", theme::warn()),
        CellStatus::Ok | CellStatus::CapacityLimited => {}
    }
    let Some(v) = tps else {
        return vec![Span::styled("∅", theme::warn())];
    };
    let limited = status == CellStatus::CapacityLimited
        || (effective > 0.0 && effective + 0.05 < f64::from(cell.concurrency));
    let mut spans = vec![Span::styled(
        format::tps(v, precise),
        if limited {
            theme::warn()
        } else {
            theme::value()
        },
    )];
    // --repeat: the mean of the repeats so far ± its 95 % interval.
    if let Some(h) = ci95.filter(|_| precise) {
        spans.push(Span::styled(
            format!("±{}", format::tps(h, precise)),
            theme::dim(),
        ));
    }
    if limited {
        // open-loop rate cells have no concurrency to compare with: a
        // saturated one gets the bare marker
        let marker = if precise && effective > 0.0 {
            format!(" ({effective:.1}/{})*", cell.concurrency)
        } else {
            "*".to_owned()
        };
        spans.push(Span::styled(marker, theme::warn()));
    }
    if detail == Detail::Full {
        spans.push(Span::styled(
            format!(" {}/{}", format::ms(lat.ttft), format::ms(lat.itl)),
            theme::dim(),
        ));
        if lat.ttfo.is_finite() && lat.ttfo > lat.ttft * 1.01 {
            spans.push(Span::styled(
                format!(" o{}", format::ms(lat.ttfo)),
                theme::dim(),
            ));
        }
    }
    spans
}

/// Draw the matrix into `area` (borders included).
pub fn render(f: &mut Frame, area: Rect, snap: &LiveSnapshot) {
    let p = plan(snap, area.width);
    let title = match p.detail {
        Detail::Full if area.width >= 30 => "DECODE tok/s + TTFT/ITL ms",
        _ => "DECODE tok/s",
    };
    let inner = panel(f, area, title);
    let mut lines = Vec::with_capacity(snap.contexts.len() + 3);
    let mut head = vec![Span::styled(
        format!("{LABEL:<w$}", w = p.label),
        theme::dim(),
    )];
    for (conc, w) in snap.concurrencies.iter().zip(&p.cols) {
        head.push(Span::styled(
            format!(" {:>w$}", snap.column_label(*conc)),
            theme::title(),
        ));
    }
    lines.push(Line::from(head));
    for &ctx in &snap.contexts {
        let mut row = vec![Span::styled(
            format!("{:>w$}", format_context(ctx), w = p.label),
            theme::title(),
        )];
        for (&conc, &w) in snap.concurrencies.iter().zip(&p.cols) {
            let spans = snap
                .matrix
                .iter()
                .find(|m| m.context == ctx && m.concurrency == conc)
                .map_or_else(|| vec![Span::raw("")], |m| cell_spans(m, snap, p.detail));
            let pad = (w + 1).saturating_sub(width(&spans));
            row.push(Span::raw(" ".repeat(pad)));
            row.extend(spans);
        }
        lines.push(Line::from(row));
    }
    let legend = LEGENDS
        .iter()
        .skip(if p.detail == Detail::Full { 0 } else { 1 })
        .find(|l| l.chars().count() <= usize::from(inner.width));
    if let Some(legend) = legend.filter(|_| usize::from(inner.height) >= lines.len() + 2) {
        lines.push(Line::default());
        lines.push(Line::styled(*legend, theme::dim()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Marker legends, most to least verbose; the first that fits is shown.
const LEGENDS: [&str; 4] = [
    "▶ running  ∅ KV/ctx limit  (R/C)* capacity-limited  TTFT/ITL p50 ms",
    "▶ running  ∅ KV/ctx limit  (R/C)* capacity-limited",
    "▶ run  ∅ KV limit  * capacity",
    "∅ KV  * cap",
];
