//! The output viewer: recent streamed text of one request.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::format;
use crate::layout;
use crate::model::Model;
use crate::render::panel;
use crate::theme;
use crate::update::{viewer_extent, viewer_text};

/// Draw the viewer over `area`.
pub fn render(f: &mut Frame, area: Rect, model: &Model) {
    let r = layout::output_viewer(area);
    f.render_widget(Clear, r);
    let inner = panel(f, r, "OUTPUT");
    let text_area = layout::output_text(area);
    let outputs = &model.snapshot.outputs;
    let Some(stream) = outputs.get(model.viewer.stream) else {
        f.render_widget(
            Paragraph::new(Line::styled(
                "No streamed output yet (o or Esc closes)",
                theme::dim(),
            )),
            inner,
        );
        return;
    };
    let (total, page) = viewer_extent(model);
    let max = total.saturating_sub(page);
    let first = model.viewer.scroll.unwrap_or(max).min(max);
    let position = if model.viewer.scroll.is_none() {
        "following".to_owned()
    } else {
        format!("line {}/{}", first + 1, total)
    };
    let bar = Line::from(vec![
        Span::styled(
            format!(
                "stream {}/{} (slot {}) ",
                model.viewer.stream + 1,
                outputs.len(),
                stream.slot
            ),
            theme::title(),
        ),
        Span::styled(
            format!(" {position}  ←/→ stream  ↑/↓ PgUp/PgDn scroll  Esc close"),
            theme::dim(),
        ),
    ]);
    f.render_widget(Paragraph::new(bar), Rect { height: 1, ..inner });
    let lines: Vec<Line> = format::wrap(viewer_text(&stream.text), text_area.width.into())
        .into_iter()
        .skip(first)
        .take(page)
        .map(Line::raw)
        .collect();
    f.render_widget(Paragraph::new(lines), text_area);
}
