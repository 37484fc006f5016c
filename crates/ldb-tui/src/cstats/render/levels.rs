//! The Concurrency Results table: one row per level measured, the best
//! marked.

use ldb_eval::cstats::CsLive;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};

use super::{header_style, title_style};

/// Draw the levels of `v` into `area`.
pub fn render(f: &mut Frame<'_>, area: Rect, v: &CsLive) {
    let best = v.best.map(|b| b.0);
    let rows = v.levels.iter().map(|l| {
        Row::new(vec![
            l.concurrency.to_string(),
            l.phase.as_str().to_owned(),
            format!("{}/{}", l.completed, l.attempted),
            format!("{:.1}", l.rate),
            if Some(l.concurrency) == best {
                "best".into()
            } else {
                String::new()
            },
        ])
    });
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(13),
                Constraint::Length(16),
                Constraint::Length(6),
            ],
        )
        .header(
            Row::new(["parallel", "phase", "done/started", "aggregate tok/s", ""])
                .style(header_style()),
        )
        .block(Block::default().title(Line::styled("Concurrency Results", title_style()))),
        area,
    );
}
