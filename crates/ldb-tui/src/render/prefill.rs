//! PREFILL: one row per context, with a live ETA for the row running now.

use ldb_core::live::{LiveSnapshot, PrefillRow};
use ldb_core::tokens::{format_context, thousands};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format;
use crate::model::{prefill_clock, running_prefill};
use crate::render::panel;
use crate::theme;

/// Draw the prefill rows into `area`; `since` counts the running row's
/// clocks on.
pub fn render(f: &mut Frame, area: Rect, snap: &LiveSnapshot, since: f64) {
    let inner = panel(f, area, "PREFILL C=1");
    let running = running_prefill(snap).map(|(i, _)| i);
    let mut lines = vec![Line::styled(
        format!("{:>6} {:>7} {:>8}  method", "ctx", "TTFT", "tok/s"),
        theme::dim(),
    )];
    let rows = usize::from(inner.height).saturating_sub(1);
    // Keep the running row visible when there are more rows than space.
    let first = match running {
        Some(i) if i >= rows => i + 1 - rows,
        _ => 0,
    };
    for (i, row) in snap.prefill.iter().enumerate().skip(first).take(rows) {
        lines.push(row_line(row, (running == Some(i)).then_some(since)));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn row_line(row: &PrefillRow, running: Option<f64>) -> Line<'static> {
    let ctx = Span::styled(
        format!("{:>6}", format_context(row.context)),
        theme::title(),
    );
    if let Some(reason) = &row.skipped {
        return Line::from(vec![
            ctx,
            Span::styled(format!(" {:>7} ", "skip"), theme::warn()),
            Span::styled(reason.clone(), theme::dim()),
        ]);
    }
    if let Some(tps) = row.tok_per_sec {
        return Line::from(vec![
            ctx,
            Span::raw(format!(" {:>7}", format::opt(row.ttft, 2, "s"))),
            Span::styled(
                format!(" {:>8}", thousands(tps.round() as u64)),
                theme::value(),
            ),
            Span::styled(format!("  {}", row.method), theme::dim()),
        ]);
    }
    if let Some(since) = running {
        let (elapsed, left) = prefill_clock(row, since);
        let eta = match left {
            Some(l) if l >= 0.0 => format!("eta ~{}", format::duration(l)),
            Some(_) => "over estimate".to_owned(),
            None => "eta …".to_owned(),
        };
        return Line::from(vec![
            ctx,
            Span::styled(
                format!(" ▶{:>6}", format::duration(elapsed)),
                theme::active(),
            ),
            Span::styled(format!(" {eta}"), theme::active()),
        ]);
    }
    Line::from(vec![
        ctx,
        Span::styled(format!(" {:>7}", "..."), theme::dim()),
    ])
}
