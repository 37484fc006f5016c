//! `update(&mut Model, Msg) -> Option<Cmd>`: the only place the model changes.

use std::time::Instant;

use crossterm::event::KeyEvent;
use ldb_core::live::{Control, LiveSnapshot};
use ratatui::layout::Rect;

use crate::keymap::{self, Action};
use crate::layout;
use crate::model::{Model, Overlay};

/// Something that happened.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A key press.
    Key(KeyEvent),
    /// The frame timer fired at this instant (the view's clock).
    Tick(Instant),
    /// The runner published a new snapshot.
    Snapshot(Box<LiveSnapshot>),
    /// The terminal changed size (columns, rows).
    Resize(u16, u16),
}

/// Work for the loop to carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// Send this to the runner.
    Control(Control),
    /// Clear the terminal and draw the whole frame again.
    Redraw,
}

/// Apply `msg` to `model`; returns what the loop must do about it.
pub fn update(model: &mut Model, msg: Msg) -> Option<Cmd> {
    match msg {
        Msg::Tick(now) => {
            // Redraw when a counted-on clock shows a new whole second.
            let before = (model.run_since() as u64, model.prefill_since() as u64);
            model.now = Some(now);
            let stamps = &mut model.stamps;
            stamps.run.get_or_insert(now);
            if crate::model::running_prefill(&model.snapshot).is_some() {
                stamps.prefill.get_or_insert(now);
            }
            let after = (model.run_since() as u64, model.prefill_since() as u64);
            if before != after {
                model.dirty = true;
            }
            None
        }
        Msg::Resize(w, h) => {
            model.size = (w, h);
            model.dirty = true;
            clamp_viewer(model);
            None
        }
        Msg::Snapshot(snapshot) => {
            if cell_key(&model.snapshot) != cell_key(&snapshot) {
                model.skipping = false;
            }
            let old = &model.snapshot;
            if (old.elapsed, old.eta) != (snapshot.elapsed, snapshot.eta) {
                model.stamps.run = model.now;
            }
            if prefill_clock_key(old) != prefill_clock_key(&snapshot) {
                model.stamps.prefill = model.now;
            }
            model.snapshot = *snapshot;
            model.dirty = true;
            clamp_viewer(model);
            None
        }
        Msg::Key(key) => {
            let action = keymap::action(key, model.overlay)?;
            model.dirty = true;
            act(model, action)
        }
    }
}

/// Which cell the snapshot is on; a change ends a pending skip.
fn cell_key(s: &LiveSnapshot) -> (String, Option<(u64, u32)>, usize) {
    (
        s.phase.label().to_owned(),
        s.current.as_ref().map(|c| (c.context, c.concurrency)),
        crate::model::running_prefill(s).map_or(usize::MAX, |(i, _)| i),
    )
}

/// Identity and clocks of the running prefill row; a change restarts the
/// count from the new values.
fn prefill_clock_key(s: &LiveSnapshot) -> Option<(u64, f64, Option<f64>)> {
    crate::model::running_prefill(s).map(|(_, r)| (r.context, r.elapsed, r.eta))
}

fn act(model: &mut Model, action: Action) -> Option<Cmd> {
    match action {
        Action::Stop if model.stopping => None,
        Action::Stop | Action::Interrupt => {
            model.stopping = true;
            Some(Cmd::Control(Control::Stop))
        }
        Action::Skip if model.stopping || model.skipping => None,
        Action::Skip => {
            model.skipping = true;
            Some(Cmd::Control(Control::Skip))
        }
        Action::Redraw => Some(Cmd::Redraw),
        Action::ToggleHelp => {
            model.overlay = toggle(model.overlay, Overlay::Help);
            None
        }
        Action::ToggleOutput => {
            model.overlay = toggle(model.overlay, Overlay::Output);
            None
        }
        Action::Close => {
            model.overlay = Overlay::None;
            None
        }
        Action::NextStream | Action::PrevStream => {
            let n = model.snapshot.outputs.len();
            if n > 0 {
                let step = if action == Action::NextStream {
                    1
                } else {
                    n - 1
                };
                model.viewer.stream = (model.viewer.stream + step) % n;
                model.viewer.scroll = None;
            }
            None
        }
        Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
            let (lines, page) = viewer_extent(model);
            let max = lines.saturating_sub(page);
            let at = model.viewer.scroll.unwrap_or(max);
            let page = page.max(1);
            let to = match action {
                Action::Up => at.saturating_sub(1),
                Action::Down => at + 1,
                Action::PageUp => at.saturating_sub(page),
                _ => at + page,
            };
            model.viewer.scroll = (to < max).then_some(to);
            None
        }
        Action::Top => {
            model.viewer.scroll = Some(0);
            clamp_viewer(model);
            None
        }
        Action::Bottom => {
            model.viewer.scroll = None;
            None
        }
    }
}

fn toggle(current: Overlay, wanted: Overlay) -> Overlay {
    if current == wanted {
        Overlay::None
    } else {
        wanted
    }
}

/// (wrapped line count of the shown stream, visible lines) for the viewer.
pub fn viewer_extent(model: &Model) -> (usize, usize) {
    let area = Rect::new(0, 0, model.size.0, model.size.1);
    let text = layout::output_text(area);
    let lines = model
        .snapshot
        .outputs
        .get(model.viewer.stream)
        .map_or(0, |s| {
            crate::format::wrap(viewer_text(&s.text), text.width.into()).len()
        });
    (lines, text.height.into())
}

/// The part of a stream's text the viewer shows: at most the last
/// [`VIEWER_BYTES`], whatever the runner sends.
pub fn viewer_text(text: &str) -> &str {
    crate::format::tail(text, VIEWER_BYTES)
}

/// Most text the output viewer wraps and scrolls through.
pub const VIEWER_BYTES: usize = 64 * 1024;

/// Keep the stream index and scroll offset inside the current text.
fn clamp_viewer(model: &mut Model) {
    let n = model.snapshot.outputs.len();
    if model.viewer.stream >= n {
        model.viewer.stream = n.saturating_sub(1);
    }
    if let Some(at) = model.viewer.scroll {
        let (lines, page) = viewer_extent(model);
        let max = lines.saturating_sub(page);
        model.viewer.scroll = (at < max).then_some(at);
    }
}

#[cfg(test)]
mod tests;
