//! Event log: the most recent lines that fit.

use ldb_core::live::LiveSnapshot;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use crate::render::panel;
use crate::theme;

/// Draw the tail of the event log into `area`.
pub fn render(f: &mut Frame, area: Rect, snap: &LiveSnapshot) {
    let inner = panel(f, area, "EVENTS");
    if snap.events.is_empty() {
        f.render_widget(
            Paragraph::new(Line::styled("No events yet", theme::dim())),
            inner,
        );
        return;
    }
    let skip = snap.events.len().saturating_sub(inner.height.into());
    let lines: Vec<Line> = snap.events[skip..]
        .iter()
        .map(|e| {
            let style = if e.contains("ERROR") || e.contains("failed") || e.contains("WARNING") {
                theme::warn()
            } else {
                theme::text()
            };
            Line::styled(e.as_str(), style)
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}
