//! CURRENT: the cell or prefill row being measured.

use ldb_core::live::{CellStage, CurrentCell, LiveSnapshot, Phase, PrefillRow};
use ldb_core::tokens::{format_context, thousands};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format;
use crate::model::{prefill_clock, running_prefill};
use crate::render::panel;
use crate::theme;

/// Draw the current cell (or prefill row, or a waiting line) into `area`.
/// `prefill_since` counts a running prefill row's clocks on.
pub fn render(f: &mut Frame, area: Rect, snap: &LiveSnapshot, prefill_since: f64) {
    let inner = panel(f, area, "CURRENT");
    let width = usize::from(inner.width);
    let lines = match (&snap.phase, running_prefill(snap), &snap.current) {
        (Phase::Prefill, Some((_, row)), _) => prefill_lines(row, width, prefill_since),
        (_, _, Some(cell)) => cell_lines(&snap.phase, cell, width),
        // A trace replay or session run has no matrix cell: its own view.
        (phase, _, None) if snap.replay.is_some() => {
            let done = *phase == Phase::Done;
            snap.replay
                .as_ref()
                .map_or_else(Vec::new, |p| crate::render::replay::lines(p, width, done))
        }
        (_, Some((_, row)), None) => prefill_lines(row, width, prefill_since),
        _ if snap.phase == Phase::Done => vec![Line::styled("Run finished", theme::value())],
        _ => vec![Line::styled(
            format!("Waiting… ({})", snap.phase.label()),
            theme::dim(),
        )],
    };
    f.render_widget(Paragraph::new(lines), inner);
}

fn prefill_lines(row: &PrefillRow, width: usize, since: f64) -> Vec<Line<'static>> {
    let (elapsed, left) = prefill_clock(row, since);
    let mut lines = vec![Line::from(vec![
        Span::styled("PREFILL ", theme::title()),
        Span::raw(format!("ctx={}  ", format_context(row.context))),
        Span::styled(row.method.clone(), theme::dim()),
    ])];
    lines.push(Line::raw(format!("elapsed {}", format::duration(elapsed))));
    lines.push(match (row.eta, left) {
        (Some(total), Some(left)) if left >= 0.0 => {
            let frac = elapsed / (row.elapsed + total).max(1e-9);
            let bar_w = width.saturating_sub(22).clamp(8, 30);
            Line::from(vec![
                Span::raw("eta "),
                Span::styled(format::bar(frac, bar_w), theme::value()),
                Span::raw(format!(
                    " {:>3.0}%  left ~{}",
                    frac * 100.0,
                    format::duration(left)
                )),
            ])
        }
        (Some(total), Some(_)) => Line::styled(
            format!(
                "estimate ~{} exceeded; still waiting",
                format::duration(row.elapsed + total)
            ),
            theme::warn(),
        ),
        _ => Line::styled("eta: waiting for a prefill speed estimate", theme::dim()),
    });
    lines
}

fn cell_lines(phase: &Phase, c: &CurrentCell, width: usize) -> Vec<Line<'static>> {
    let kind = match phase {
        Phase::DecodeWarmup => "WARMUP",
        Phase::Burst => "BURST",
        _ => "DECODE",
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{kind} "), theme::title()),
        Span::raw(format!(
            "C={} ctx={}  ",
            c.concurrency,
            format_context(c.context)
        )),
        Span::styled(c.stage.label().to_uppercase(), theme::active()),
    ])];
    lines.push(if c.stage == CellStage::Window && c.window_total > 0.0 {
        let frac = c.window_elapsed / c.window_total;
        let bar_w = width.saturating_sub(14).clamp(8, 30);
        Line::from(vec![
            Span::styled(format::bar(frac, bar_w), theme::value()),
            Span::raw(format!(" {:.0}/{:.0}s", c.window_elapsed, c.window_total)),
        ])
    } else {
        Line::raw(format!(
            "{} {}",
            c.stage.label(),
            format::duration(c.stage_elapsed)
        ))
    });
    let requested = f64::from(c.concurrency);
    let short = c.running.is_some_and(|r| r + 0.05 < requested);
    lines.push(Line::from(vec![
        Span::raw("running "),
        Span::styled(
            format!("{}/{}", format::opt(c.running, 0, ""), c.concurrency),
            if short { theme::warn() } else { theme::text() },
        ),
        Span::raw("  queued "),
        Span::styled(
            format::opt(c.queued, 0, ""),
            if c.queued.is_some_and(|q| q > 0.0) {
                theme::warn()
            } else {
                theme::text()
            },
        ),
        Span::raw(format!("  producing {}/{}", c.producing, c.concurrency)),
    ]));
    lines.push(tps_line(c));
    if let (CellStage::Window, Some(ci)) = (c.stage, &c.rate_ci) {
        let settled = ci.mean > 0.0
            && ci.half_width / ci.mean <= ci.target_rel
            && ci.drift_rel.abs() <= ci.target_rel;
        lines.push(Line::styled(
            format::rate_ci(ci),
            if settled {
                theme::value()
            } else {
                theme::dim()
            },
        ));
    }
    let stats = trace_stats(&c.tps_trace);
    let trace_w = width.saturating_sub(6 + stats.chars().count());
    lines.push(if c.tps_trace.is_empty() {
        Line::styled("trace waiting for samples", theme::dim())
    } else {
        Line::from(vec![
            Span::styled("trace ", theme::dim()),
            Span::styled(format::sparkline(&c.tps_trace, trace_w), theme::value()),
            Span::styled(stats, theme::dim()),
        ])
    });
    if let Some(acc) = c.accept_length {
        lines.push(Line::raw(format!("accept length {acc:.2} tok/step")));
    }
    lines
}

/// `  avg 129 jitter 4.2%` over the trace (jitter = coefficient of variation).
fn trace_stats(trace: &[f64]) -> String {
    if trace.len() < 2 {
        return String::new();
    }
    let n = trace.len() as f64;
    let mean = trace.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return String::new();
    }
    let var = trace.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    format!(
        "  avg {} jitter {:.1}%",
        format::tps(mean, false),
        var.sqrt() / mean * 100.0
    )
}

fn tps_line(c: &CurrentCell) -> Line<'static> {
    let now = c.tps_trace.last().copied();
    let avg = (c.window_elapsed > 0.0).then(|| c.window_tokens as f64 / c.window_elapsed);
    Line::from(vec![
        Span::raw("tok/s "),
        Span::styled(
            now.map_or_else(|| "-".to_owned(), |v| format::tps(v, true)),
            theme::value(),
        ),
        Span::raw(format!(
            "  window avg {}  tokens {}",
            avg.map_or_else(|| "-".to_owned(), |v| format::tps(v, true)),
            thousands(c.window_tokens)
        )),
    ])
}
