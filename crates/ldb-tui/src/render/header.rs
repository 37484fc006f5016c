//! Header: who is being measured and how far the run is.

use ldb_core::live::{LiveSnapshot, Phase};
use ldb_core::tokens::thousands;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::format;
use crate::layout::Mode;
use crate::render::panel;
use crate::theme;

/// Draw the header into `area` (3 rows). `since` is how long ago the run's
/// `elapsed`/`eta` were published; both are counted on by it.
///
/// The run's state (KV, phase, elapsed, ETA) is kept whole; the identity
/// (engine, model, server) is shortened to fit what is left.
pub fn render(f: &mut Frame, area: Rect, snap: &LiveSnapshot, mode: Mode, since: f64) {
    let title = concat!("llm-decode-bench v", env!("CARGO_PKG_VERSION"));
    let inner = panel(f, area, title);
    let sep = || Span::styled(" │ ", theme::dim());
    let mut right = Vec::new();
    if snap.kv_budget > 0 {
        right.push(sep());
        right.push(Span::raw(format!("KV {}", thousands(snap.kv_budget))));
    }
    right.push(sep());
    let phase_style = if snap.phase == Phase::Done {
        theme::value()
    } else {
        theme::active()
    };
    right.push(Span::styled(snap.phase.label(), phase_style));
    right.push(sep());
    let elapsed = format::duration(snap.elapsed + since);
    right.push(Span::raw(if mode == Mode::Narrow {
        elapsed
    } else {
        format!("elapsed {elapsed}")
    }));
    right.push(sep());
    right.push(Span::raw(match snap.eta {
        Some(eta) => format!("ETA {}", format::duration((eta - since).max(0.0))),
        None => "ETA …".to_owned(),
    }));
    let right_w: usize = right.iter().map(|s| s.content.chars().count()).sum();
    let engine = if snap.engine.is_empty() {
        "BENCHMARK".to_owned()
    } else {
        snap.engine.to_uppercase()
    };
    let mut who = snap.model.clone();
    if mode != Mode::Narrow && !snap.server.is_empty() {
        who = format!("{who} @ {}", snap.server);
    }
    let room = usize::from(inner.width).saturating_sub(right_w + engine.chars().count() + 2);
    let mut spans = vec![
        Span::styled(engine, theme::title()),
        Span::raw("  "),
        Span::styled(format::fit(&who, room), theme::value()),
    ];
    spans.extend(right);
    f.render_widget(Paragraph::new(Line::from(spans)), inner);
}
