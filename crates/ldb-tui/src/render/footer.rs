//! Footer: overall progress and the keys.

use ldb_core::live::{LiveSnapshot, MatrixCellState};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format;
use crate::model::Model;
use crate::theme;

/// (finished, total) over matrix cells and prefill rows.
pub fn progress(snap: &LiveSnapshot) -> (usize, usize) {
    let cells = snap
        .matrix
        .iter()
        .filter(|m| matches!(m.state, MatrixCellState::Done { .. }))
        .count();
    let rows = snap
        .prefill
        .iter()
        .filter(|r| r.tok_per_sec.is_some() || r.skipped.is_some())
        .count();
    (cells + rows, snap.matrix.len() + snap.prefill.len())
}

/// Draw the footer into `area` (1 row).
pub fn render(f: &mut Frame, area: Rect, model: &Model) {
    let (done, total) = progress(&model.snapshot);
    let frac = if total == 0 {
        0.0
    } else {
        done as f64 / total as f64
    };
    let bar_w = if area.width >= 150 { 40 } else { 16 };
    let mut spans = vec![
        Span::styled(format::bar(frac, bar_w), theme::value()),
        Span::raw(format!(" {done}/{total} tests  ")),
    ];
    if model.stopping {
        spans.push(Span::styled(
            "stopping: finishing bookkeeping, then saving results…",
            theme::warn(),
        ));
    } else if !model.keys_enabled {
        spans.push(Span::styled(
            "keys off (stdin is not a terminal)",
            theme::dim(),
        ));
    } else {
        if model.skipping {
            spans.push(Span::styled("skip requested  ", theme::warn()));
        }
        spans.push(Span::styled(
            "s skip  q stop  o output  ? help",
            theme::dim(),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
