//! Keys to intentions. The single place that knows which key does what.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::Overlay;

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `q`: stop the run gracefully (sent once).
    Stop,
    /// Ctrl-C: stop; repeated presses are passed on so the runner may hurry.
    Interrupt,
    /// Ctrl-L: repaint the whole screen (after stray output scribbled on it).
    Redraw,
    /// `s`: skip the current cell or prefill row.
    Skip,
    /// `o`: open/close the output viewer.
    ToggleOutput,
    /// `?`: open/close the help.
    ToggleHelp,
    /// `Esc`: close any overlay.
    Close,
    /// Up one line (output viewer).
    Up,
    /// Down one line (output viewer).
    Down,
    /// Up one page (output viewer).
    PageUp,
    /// Down one page (output viewer).
    PageDown,
    /// First line (output viewer).
    Top,
    /// Last line, following new text (output viewer).
    Bottom,
    /// Next stream (output viewer).
    NextStream,
    /// Previous stream (output viewer).
    PrevStream,
}

/// The action bound to `key` while `overlay` is shown, if any.
pub fn action(key: KeyEvent, overlay: Overlay) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        return match key.code {
            KeyCode::Char('c') => Some(Action::Interrupt),
            KeyCode::Char('l') => Some(Action::Redraw),
            _ => None,
        };
    }
    let global = match key.code {
        KeyCode::Char('q') => Some(Action::Stop),
        KeyCode::Char('s') => Some(Action::Skip),
        KeyCode::Char('o') => Some(Action::ToggleOutput),
        KeyCode::Char('?') => Some(Action::ToggleHelp),
        KeyCode::Esc => Some(Action::Close),
        _ => None,
    };
    if global.is_some() || overlay != Overlay::Output {
        return global;
    }
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
        KeyCode::PageUp => Some(Action::PageUp),
        KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::PageDown),
        KeyCode::Home | KeyCode::Char('g') => Some(Action::Top),
        KeyCode::End | KeyCode::Char('G') => Some(Action::Bottom),
        KeyCode::Right | KeyCode::Char('n') | KeyCode::Tab => Some(Action::NextStream),
        KeyCode::Left | KeyCode::Char('p') | KeyCode::BackTab => Some(Action::PrevStream),
        _ => None,
    }
}

/// Key help rows (key, meaning), shown by the help overlay and in the docs.
pub const HELP: &[(&str, &str)] = &[
    ("q", "stop: save JSON and print the partial report"),
    ("Ctrl-C", "same as q"),
    ("s", "skip the current cell or prefill row"),
    ("o", "show streamed output of one request"),
    ("↑/↓ PgUp/PgDn", "scroll the output (Home/End: top/follow)"),
    ("←/→ n/p", "previous / next stream"),
    ("Ctrl-L", "repaint the screen"),
    ("?", "this help"),
    ("Esc", "close the overlay"),
];
