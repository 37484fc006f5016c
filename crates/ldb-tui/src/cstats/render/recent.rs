//! The Completed Requests table: the latest finished requests, newest
//! first, with their score and final answer.

use ldb_eval::cstats::{CsLive, CsRun};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Row, Table};

use super::{header_style, title_style};

/// Characters of the final answer shown.
const ANSWER_CHARS: usize = 90;

/// Draw the latest completed requests of `v` into `area`.
pub fn render(f: &mut Frame<'_>, area: Rect, v: &CsLive) {
    let rows = v.recent.iter().rev().map(row);
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(6),
                Constraint::Length(8),
                Constraint::Length(9),
                Constraint::Length(11),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Min(10),
            ],
        )
        .header(
            Row::new([
                "#",
                "phase",
                "parallel",
                "output tok",
                "gen tok/s",
                "score",
                "final answer",
            ])
            .style(header_style()),
        )
        .block(Block::default().title(Line::styled("Completed Requests", title_style()))),
        area,
    );
}

fn row(r: &CsRun) -> Row<'static> {
    Row::new(vec![
        r.run_index.to_string(),
        r.phase.as_str().to_owned(),
        r.concurrency.to_string(),
        r.completion_tokens.to_string(),
        format!("{:.1}", r.gen_tok_s),
        score(r),
        r.error
            .as_deref()
            .unwrap_or(&r.final_answer)
            .chars()
            .take(ANSWER_CHARS)
            .collect(),
    ])
}

/// CANCEL, ERR, the score label in capitals, or `-`.
fn score(r: &CsRun) -> String {
    match (&r.error, &r.score_label, r.cancelled) {
        (_, _, true) => "CANCEL".to_owned(),
        (Some(_), _, _) => "ERR".to_owned(),
        (None, Some(l), _) => l.to_uppercase(),
        _ => "-".to_owned(),
    }
}
