//! The Active Streams table: the requests in flight, oldest first. `tok~`
//! and `tok/s~` are estimates (chunks, or characters / 4), not
//! measurements.

use ldb_eval::cstats::ActiveSet;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};

use super::{header_style, title_style};

/// Draw the requests in flight into `area`, at most `limit` rows.
pub fn render(f: &mut Frame<'_>, area: Rect, a: &ActiveSet, limit: u16) {
    let shown = a.rows.len().min(usize::from(limit));
    let heading = if shown < a.total {
        format!("Active Streams (showing {shown}/{})", a.total)
    } else {
        format!("Active Streams ({}/{})", a.total, a.total)
    };
    // the item column only when the task has item ids
    let items = a.rows.iter().any(|r| r.item_id.is_some());
    let rows = a.rows.iter().take(shown).map(|r| {
        let mut cells = vec![r.run_index.to_string()];
        if items {
            cells.push(r.item_id.clone().unwrap_or_default());
        }
        cells.extend([
            r.status.as_str().to_owned(),
            format!("{:.1}s", r.elapsed),
            r.tokens().to_string(),
            if r.rate() > 0.0 {
                format!("{:.1}", r.rate())
            } else {
                "-".into()
            },
            r.latest.clone(),
        ]);
        Row::new(cells)
    });
    let mut widths = vec![Constraint::Length(6)];
    let mut names = vec!["#"];
    if items {
        widths.push(Constraint::Length(12));
        names.push("item");
    }
    widths.extend([
        Constraint::Length(13),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Min(10),
    ]);
    names.extend(["status", "elapsed", "tok~", "tok/s~", "latest text"]);
    f.render_widget(
        Table::new(rows, widths)
            .header(Row::new(names).style(header_style()))
            .block(Block::default().title(Line::styled(heading, title_style()))),
        area,
    );
}
