//! The header lines: phase and batch progress, the current level and the
//! best so far, the scout, the latest note, and how to stop.

use ldb_eval::cstats::{CsLive, Phase};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

/// Cells of the batch progress bar.
const BAR_CELLS: usize = 34;

/// Draw the header lines of `v` into `area`.
pub fn render(f: &mut Frame<'_>, area: Rect, v: &CsLive) {
    f.render_widget(Paragraph::new(lines(v)), area);
}

fn lines(v: &CsLive) -> Vec<Line<'static>> {
    let phase = v.phase.map_or("starting", Phase::as_str);
    let pct = if v.batch_total > 0 {
        100.0 * v.batch_done as f64 / v.batch_total as f64
    } else {
        0.0
    };
    let best = v.best.map_or("best C=-".to_owned(), |(c, r)| {
        format!("best C={c}, best={r:.1} tok/s")
    });
    let stop = if v.stopping {
        Line::styled(
            "stopping: finishing the partial report",
            Style::default().fg(Color::Yellow),
        )
    } else {
        Line::from("q = stop and report what was measured")
    };
    vec![
        Line::from(format!(
            "{phase}  completed {}/{}  {} {pct:.0}%",
            v.batch_done,
            v.batch_total,
            bar(pct)
        )),
        Line::from(format!(
            "current C={}  measured runs finished {}  |  {best}",
            v.concurrency, v.finished
        )),
        Line::from(format!("scout: {}", v.scout.as_deref().unwrap_or("-"))),
        Line::from(v.notes.back().cloned().unwrap_or_default()),
        stop,
    ]
}

/// `pct` percent of the bar filled.
fn bar(pct: f64) -> String {
    let filled = (((pct / 100.0) * BAR_CELLS as f64).round() as usize).min(BAR_CELLS);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR_CELLS - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_by_the_batch_done() {
        assert_eq!(bar(0.0), "░".repeat(34));
        assert_eq!(bar(50.0), format!("{}{}", "█".repeat(17), "░".repeat(17)));
        assert_eq!(bar(120.0), "█".repeat(34));
    }
}
