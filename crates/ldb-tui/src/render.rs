//! The view: free `render` functions, one file per panel, reading the model
//! and never changing it.
//!
//! Wide (≥ 150 columns):
//!
//! ```text
//! ┌ header: engine, model @ server, KV, phase, elapsed, ETA ───────────────┐
//! ├ CURRENT ────────────────────┬ HARDWARE (hidden without telemetry) ─────┤
//! ├ PREFILL ──┬ DECODE ─────────┴────────┬ EVENTS ──────────────────────────┤
//! └ footer: progress, keys ────────────────────────────────────────────────┘
//! ```
//!
//! Mid (108–149) puts the matrix above prefill and events; narrow (< 108)
//! stacks compact panels. Below 60×20 a one-line notice replaces them all.
//! Overlays (help, output viewer) are drawn last, over the panels.

pub mod current;
pub mod events;
pub mod footer;
pub mod hardware;
pub mod header;
pub mod help;
pub mod matrix;
pub mod output;
pub mod prefill;
pub mod replay;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Paragraph};

use crate::layout::{self, MIN_HEIGHT, MIN_WIDTH};
use crate::model::{Model, Overlay};
use crate::theme;

/// Draw one frame of the dashboard.
pub fn render(f: &mut Frame, model: &Model) {
    let area = f.area();
    if !layout::fits(area) {
        too_small(f, area);
        return;
    }
    let snap = &model.snapshot;
    let a = layout::areas(area, snap);
    header::render(f, a.header, snap, a.mode, model.run_since());
    current::render(f, a.current, snap, model.prefill_since());
    if let (Some(r), Some(hw)) = (a.hardware, snap.hardware.as_ref()) {
        hardware::render(f, r, hw, a.mode);
    }
    matrix::render(f, a.matrix, snap);
    if let Some(r) = a.prefill {
        prefill::render(f, r, snap, model.prefill_since());
    }
    events::render(f, a.events, snap);
    footer::render(f, a.footer, model);
    match model.overlay {
        Overlay::None => {}
        Overlay::Help => help::render(f, area),
        Overlay::Output => output::render(f, area, model),
    }
}

fn too_small(f: &mut Frame, area: Rect) {
    let (w, h) = (area.width, area.height);
    let candidates = [
        format!("terminal {w}×{h} is too small (need {MIN_WIDTH}×{MIN_HEIGHT}); q stops the run"),
        format!("terminal too small ({w}×{h}, need {MIN_WIDTH}×{MIN_HEIGHT})"),
        format!("too small: need {MIN_WIDTH}×{MIN_HEIGHT}"),
        "too small".to_owned(),
    ];
    let width = usize::from(w);
    let text = candidates
        .iter()
        .find(|c| c.chars().count() <= width)
        .map_or_else(|| crate::format::fit("too small", width), Clone::clone);
    let line = Line::from(Span::styled(text, theme::warn()));
    f.render_widget(
        Paragraph::new(line),
        Rect {
            height: h.min(1),
            ..area
        },
    );
}

/// Draw a titled, bordered panel; returns the inner area.
pub(crate) fn panel(f: &mut Frame, area: Rect, title: &str) -> Rect {
    let block = Block::bordered()
        .border_type(BorderType::Rounded)
        .border_style(theme::frame())
        .title(Span::styled(format!(" {title} "), theme::title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    inner
}
