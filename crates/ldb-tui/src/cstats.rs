//! The completion-stats live view: one panel (header, live statistics, the
//! requests in flight, concurrency results, the latest completed requests;
//! with telemetry a hardware panel beside the top part), redrawn about every
//! 0.35 s and on every change. `q` or Ctrl-C asks the run to stop; the run
//! then finishes its partial report. The state is `ldb_eval::cstats::CsLive`,
//! fed by the runner's events through a watch channel.

use std::io::{self, IsTerminal};
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ldb_core::live::Control;
use ldb_eval::cstats::{ActiveSet, CsLive, Phase};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use tokio::sync::{mpsc, watch};

use crate::layout::Mode;
use crate::terminal::{self, TerminalGuard};

/// Time between redraws when nothing changed.
const PERIOD: Duration = Duration::from_millis(350);

/// The running live view; [`CsUi::finish`] gives the terminal back.
#[derive(Debug)]
pub struct CsUi {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl CsUi {
    /// Stop drawing and restore the terminal.
    pub fn finish(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        terminal::restore();
    }
}

impl Drop for CsUi {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        terminal::restore();
    }
}

/// Start the live view on its own thread, or `None` when stdout is not a
/// terminal (the caller prints plain lines then). Keys are read only when
/// stdin is a terminal too.
pub fn spawn_cs(state: watch::Receiver<CsLive>, controls: mpsc::Sender<Control>) -> Option<CsUi> {
    if !io::stdout().is_terminal() {
        return None;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("ldb-tui-cstats".into())
        .spawn(move || {
            if let Err(e) = screen(state, controls, stop_rx) {
                terminal::restore();
                eprintln!("live view: {e}");
            }
        })
        .ok()?;
    Some(CsUi {
        stop: stop_tx,
        thread: Some(thread),
    })
}

fn screen(
    state: watch::Receiver<CsLive>,
    controls: mpsc::Sender<Control>,
    stop: watch::Receiver<bool>,
) -> crate::Result<()> {
    let keys = io::stdin().is_terminal();
    let _guard = TerminalGuard::enter(keys)?;
    let mut term =
        Terminal::new(CrosstermBackend::new(io::stdout())).map_err(crate::Error::Terminal)?;
    term.clear().map_err(crate::Error::Draw)?;
    while !*stop.borrow() {
        let view = state.borrow().clone();
        term.draw(|f| render(f, f.area(), &view))
            .map_err(crate::Error::Draw)?;
        // wait for a key or the next frame
        if keys && event::poll(PERIOD).unwrap_or(false) {
            if let Ok(Event::Key(k)) = event::read()
                && k.kind != KeyEventKind::Release
            {
                let ctrl_c =
                    k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
                if k.code == KeyCode::Char('q') || ctrl_c {
                    let _ = controls.try_send(Control::Stop);
                }
            }
        } else if !keys {
            std::thread::sleep(PERIOD);
        }
    }
    Ok(())
}

/// Rows of the Active Streams table at least (more on a tall terminal).
const ACTIVE_ROWS_MIN: u16 = 6;

/// Draw the panel for `v` into `area`.
pub fn render(f: &mut ratatui::Frame<'_>, area: Rect, v: &CsLive) {
    let title_style = Style::default()
        .fg(Color::Rgb(0x00, 0x8f, 0x4f))
        .add_modifier(Modifier::BOLD);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::styled(format!(" {} ", v.title), title_style));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let recent_rows = v.recent.len().max(1) as u16 + 2;
    let level_rows = if v.levels.is_empty() {
        0
    } else {
        v.levels.len() as u16 + 2
    };
    // the in-flight table takes what the other parts leave, at least a few rows
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
    let left = match &v.hardware {
        Some(hw) => {
            // the hardware panel shares the top row: 3:2 when wide, else 3:1
            let (a, b) = if area.width >= 130 { (3, 2) } else { (3, 1) };
            let [left, right] =
                Layout::horizontal([Constraint::Fill(a), Constraint::Fill(b)]).areas(top);
            crate::render::hardware::render(f, right, hw, Mode::for_width(area.width));
            left
        }
        None => top,
    };
    let [head, stats, active] = Layout::vertical([
        Constraint::Length(HEAD_ROWS),
        Constraint::Length(STATS_ROWS),
        Constraint::Length(active_rows),
    ])
    .areas(left);
    f.render_widget(Paragraph::new(header(v)), head);
    let [tok, rate, ttft] = v.stats();
    let header_style = Style::default().add_modifier(Modifier::BOLD);
    let stat_rows = vec![
        Row::new(vec![
            "completed".into(),
            format!("{} ({} errors)", v.completed(), v.errors),
            String::new(),
            String::new(),
        ]),
        Row::new(vec![
            "score".into(),
            v.score_text(),
            String::new(),
            String::new(),
        ]),
        Row::new(vec!["stars".into(), stars(v), String::new(), String::new()]),
        Row::new(vec![
            "completion tok".into(),
            format!("{:.0}", tok.0),
            format!("{:.0}", tok.1),
            format!("{:.0}", tok.2),
        ]),
        Row::new(vec![
            "gen tok/s".into(),
            format!("{:.1}", rate.0),
            format!("{:.1}", rate.1),
            format!("{:.1}", rate.2),
        ]),
        Row::new(vec![
            "active now".into(),
            format!(
                "~{:.0} tok/s, ~{} tok, {} streams",
                v.active.rate, v.active.tokens, v.active.total
            ),
            String::new(),
            String::new(),
        ]),
        Row::new(vec![
            "TTFT s".into(),
            format!("{:.3}", ttft.0),
            format!("{:.3}", ttft.1),
            format!("{:.3}", ttft.2),
        ]),
    ];
    f.render_widget(
        Table::new(
            stat_rows,
            [
                Constraint::Length(16),
                Constraint::Length(34),
                Constraint::Length(10),
                Constraint::Length(10),
            ],
        )
        .header(Row::new(["metric", "value", "p50", "p90"]).style(header_style))
        .block(Block::default().title(Line::styled("Live Statistics", title_style))),
        stats,
    );
    active_table(f, active, &v.active, active_rows - 2, title_style);
    if !v.levels.is_empty() {
        let rows = v.levels.iter().map(|l| {
            Row::new(vec![
                l.concurrency.to_string(),
                l.phase.as_str().to_owned(),
                format!("{}/{}", l.completed, l.attempted),
                format!("{:.1}", l.rate),
                if Some(l.concurrency) == v.best.map(|b| b.0) {
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
                    .style(header_style),
            )
            .block(Block::default().title(Line::styled("Concurrency Results", title_style))),
            levels,
        );
    }
    let rows = v.recent.iter().rev().map(|r| {
        let score = match (&r.error, &r.score_label, r.cancelled) {
            (_, _, true) => "CANCEL".to_owned(),
            (Some(_), _, _) => "ERR".to_owned(),
            (None, Some(l), _) => l.to_uppercase(),
            _ => "-".to_owned(),
        };
        let answer = r.error.clone().unwrap_or_else(|| r.final_answer.clone());
        Row::new(vec![
            r.run_index.to_string(),
            r.phase.as_str().to_owned(),
            r.concurrency.to_string(),
            r.completion_tokens.to_string(),
            format!("{:.1}", r.gen_tok_s),
            score,
            answer.chars().take(90).collect(),
        ])
    });
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
            .style(header_style),
        )
        .block(Block::default().title(Line::styled("Completed Requests", title_style))),
        recent,
    );
}

/// Rows of the header lines.
const HEAD_ROWS: u16 = 5;
/// Rows of the Live Statistics table: title, column names, seven metrics.
const STATS_ROWS: u16 = 9;

/// The requests in flight, oldest first, at most `limit` rows. `tok~` and
/// `tok/s~` are estimates (chunks, or characters / 4), not measurements.
fn active_table(f: &mut ratatui::Frame<'_>, area: Rect, a: &ActiveSet, limit: u16, title: Style) {
    let shown = a.rows.len().min(usize::from(limit));
    let heading = if shown < a.total {
        format!("Active Streams (showing {shown}/{})", a.total)
    } else {
        format!("Active Streams ({}/{})", a.total, a.total)
    };
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
    let header_style = Style::default().add_modifier(Modifier::BOLD);
    f.render_widget(
        Table::new(rows, widths)
            .header(Row::new(names).style(header_style))
            .block(Block::default().title(Line::styled(heading, title))),
        area,
    );
}

fn header(v: &CsLive) -> Vec<Line<'static>> {
    let phase = v.phase.map_or("starting", Phase::as_str);
    let pct = if v.batch_total > 0 {
        100.0 * v.batch_done as f64 / v.batch_total as f64
    } else {
        0.0
    };
    let filled = ((pct / 100.0) * 34.0).round() as usize;
    let bar = format!(
        "{}{}",
        "█".repeat(filled.min(34)),
        "░".repeat(34 - filled.min(34))
    );
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
            "{phase}  completed {}/{}  {bar} {pct:.0}%",
            v.batch_done, v.batch_total
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

/// A 10-slot bar: ★ correct, ☆ near, ✕ fail, ⊘ truncated, by largest remainder.
fn stars(v: &CsLive) -> String {
    let n = |l: &str| v.labels.get(l).copied().unwrap_or(0) as f64;
    let parts = [
        ('★', n("pass") + n("exact")),
        ('☆', n("near")),
        ('✕', n("fail")),
        ('⊘', n("truncated")),
    ];
    let total: f64 = parts.iter().map(|p| p.1).sum();
    if total == 0.0 {
        return "-".into();
    }
    let exact: Vec<f64> = parts.iter().map(|p| p.1 * 10.0 / total).collect();
    let mut slots: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let mut left = 10 - slots.iter().sum::<usize>();
    for i in order {
        if left == 0 {
            break;
        }
        slots[i] += 1;
        left -= 1;
    }
    parts
        .iter()
        .zip(slots)
        .map(|(p, k)| p.0.to_string().repeat(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_panel_draws_its_sections() {
        let mut v = CsLive::new("Completion Token Statistics");
        v.labels.insert("pass".into(), 2);
        v.labels.insert("fail".into(), 1);
        assert_eq!(stars(&v), "★★★★★★★✕✕✕");
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
}
