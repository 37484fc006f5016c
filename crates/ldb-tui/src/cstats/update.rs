//! The completion-stats view's keys: what a key asks of the run. (The
//! view's state changes only through `CsLive::apply`, in `ldb-eval`.)

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ldb_core::live::Control;

/// `q` or Ctrl-C asks the run to stop; a key release or any other key asks
/// nothing.
pub fn key(k: KeyEvent) -> Option<Control> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
    (k.code == KeyCode::Char('q') || ctrl_c).then_some(Control::Stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventState;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn q_and_ctrl_c_stop_other_keys_and_releases_do_nothing() {
        let none = KeyModifiers::NONE;
        assert_eq!(key(press(KeyCode::Char('q'), none)), Some(Control::Stop));
        assert_eq!(
            key(press(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Control::Stop)
        );
        assert_eq!(key(press(KeyCode::Char('c'), none)), None);
        assert_eq!(key(press(KeyCode::Char('s'), none)), None);
        let release = KeyEvent {
            kind: KeyEventKind::Release,
            state: KeyEventState::NONE,
            ..press(KeyCode::Char('q'), none)
        };
        assert_eq!(key(release), None);
    }
}
