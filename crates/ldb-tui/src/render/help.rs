//! The key help overlay.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::keymap::HELP;
use crate::layout::centered;
use crate::render::panel;
use crate::theme;

/// Draw the help box centred in `area`.
pub fn render(f: &mut Frame, area: Rect) {
    let h = u16::try_from(HELP.len())
        .unwrap_or(u16::MAX)
        .saturating_add(4);
    let r = centered(area, 64, h);
    f.render_widget(Clear, r);
    let inner = panel(f, r, "KEYS");
    let mut lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:>14}  "), theme::title()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::styled("Esc or ? closes this help", theme::dim()));
    f.render_widget(Paragraph::new(lines), inner);
}
