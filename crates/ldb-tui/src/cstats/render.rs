//! Drawing the completion-stats panel: the layout here, one file per part
//! (header lines, live statistics, requests in flight, concurrency results,
//! completed requests). Reads the model, never changes it.

pub mod active;
pub mod header;
pub mod levels;
pub mod recent;
pub mod stats;

use ldb_eval::cstats::CsLive;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};

use crate::layout::Mode;

/// Rows of the Active Streams table at least (more on a tall terminal).
const ACTIVE_ROWS_MIN: u16 = 6;
/// Rows of the header lines.
const HEAD_ROWS: u16 = 5;
/// Rows of the Live Statistics table: title, column names, seven metrics.
const STATS_ROWS: u16 = 9;

/// The panel's title and its tables' titles.
pub(crate) fn title_style() -> Style {
    Style::default()
        .fg(Color::Rgb(0x00, 0x8f, 0x4f))
        .add_modifier(Modifier::BOLD)
}

/// The tables' column names.
pub(crate) fn header_style() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Where each part goes inside the panel.
struct Areas {
    head: Rect,
    stats: Rect,
    active: Rect,
    /// Rows the in-flight table may list.
    active_limit: u16,
    /// Beside the top part when telemetry runs.
    hardware: Option<Rect>,
    levels: Rect,
    recent: Rect,
}

/// Draw the panel for `v` into `area`.
pub fn render(f: &mut Frame<'_>, area: Rect, v: &CsLive) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::styled(format!(" {} ", v.title), title_style()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let a = areas(area, inner, v);
    if let (Some(r), Some(hw)) = (a.hardware, &v.hardware) {
        crate::render::hardware::render(f, r, hw, Mode::for_width(area.width));
    }
    header::render(f, a.head, v);
    stats::render(f, a.stats, v);
    active::render(f, a.active, &v.active, a.active_limit);
    if !v.levels.is_empty() {
        levels::render(f, a.levels, v);
    }
    recent::render(f, a.recent, v);
}

/// The in-flight table takes what the other parts leave, at least a few
/// rows; the hardware panel shares the top row (3:2 when wide, else 3:1).
fn areas(area: Rect, inner: Rect, v: &CsLive) -> Areas {
    let recent_rows = v.recent.len().max(1) as u16 + 2;
    let level_rows = if v.levels.is_empty() {
        0
    } else {
        v.levels.len() as u16 + 2
    };
    let fixed = HEAD_ROWS + STATS_ROWS + level_rows + recent_rows + 2;
    let active_limit = inner.height.saturating_sub(fixed).max(ACTIVE_ROWS_MIN);
    let active_rows = (v.active.rows.len() as u16).clamp(1, active_limit) + 2;
    let [top, levels, recent, _] = Layout::vertical([
        Constraint::Length(HEAD_ROWS + STATS_ROWS + active_rows),
        Constraint::Length(level_rows),
        Constraint::Length(recent_rows),
        Constraint::Min(0),
    ])
    .areas(inner);
    let (left, hardware) = if v.hardware.is_some() {
        let (a, b) = if area.width >= 130 { (3, 2) } else { (3, 1) };
        let [left, right] =
            Layout::horizontal([Constraint::Fill(a), Constraint::Fill(b)]).areas(top);
        (left, Some(right))
    } else {
        (top, None)
    };
    let [head, stats, active] = Layout::vertical([
        Constraint::Length(HEAD_ROWS),
        Constraint::Length(STATS_ROWS),
        Constraint::Length(active_rows),
    ])
    .areas(left);
    Areas {
        head,
        stats,
        active,
        active_limit: active_rows - 2,
        hardware,
        levels,
        recent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_panel_draws_its_sections() {
        let v = CsLive::new("Completion Token Statistics");
        let mut t = Terminal::new(TestBackend::new(120, 30)).unwrap();
        t.draw(|f| render(f, f.area(), &v)).unwrap();
        let text: String = t
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        for s in [
            "Completion Token Statistics",
            "Live Statistics",
            "Completed Requests",
            "q = stop",
        ] {
            assert!(text.contains(s), "{s}");
        }
    }

    #[test]
    fn the_in_flight_table_gets_the_rows_the_others_leave() {
        use ldb_eval::cstats::{ActiveSet, ActiveStream, StreamStatus};
        let mut v = CsLive::new("t");
        let (area, inner) = (Rect::new(0, 0, 120, 50), Rect::new(1, 1, 118, 48));
        let a = areas(area, inner, &v);
        assert_eq!(a.active_limit, 1, "one empty row while nothing runs");
        assert!(a.hardware.is_none());
        assert_eq!(a.levels.height, 0, "no level yet");
        let stream = |i| ActiveStream {
            run_index: i,
            item_id: None,
            status: StreamStatus::Streaming,
            elapsed: 1.0,
            since_first: 0.5,
            chunks: 3,
            chars: 9,
            latest: String::new(),
        };
        v.active = ActiveSet::new((0..100).map(stream).collect());
        let a = areas(area, inner, &v);
        // 48 rows less the header 5, statistics 9, completed 3 and 2 titles
        assert_eq!(a.active_limit, 29);
        assert_eq!((a.head.height, a.stats.height), (HEAD_ROWS, STATS_ROWS));
    }
}
