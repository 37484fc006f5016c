//! Terminal setup and restoration on every exit path.
//!
//! [`TerminalGuard`] enters the alternate screen (and raw mode when keys are
//! read) and restores both when dropped, which covers normal returns, errors
//! and unwinding. A process-wide panic hook restores the terminal before the
//! previous hook prints the panic, so the message lands on the normal screen
//! even when another thread panics.

use std::io::{self, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use crate::error::{Error, Result};

static SCREEN: AtomicBool = AtomicBool::new(false);
static RAW: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Owns the terminal while the dashboard is shown.
#[derive(Debug)]
pub struct TerminalGuard(());

impl TerminalGuard {
    /// Enter the alternate screen, hide the cursor and, when `raw`, raw mode.
    pub fn enter(raw: bool) -> Result<TerminalGuard> {
        install_panic_hook();
        if raw {
            enable_raw_mode().map_err(Error::Terminal)?;
            RAW.store(true, Ordering::SeqCst);
        }
        SCREEN.store(true, Ordering::SeqCst);
        let guard = TerminalGuard(());
        // On failure the guard's drop undoes raw mode.
        execute!(io::stdout(), EnterAlternateScreen, Hide).map_err(Error::Terminal)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leave the alternate screen, show the cursor and leave raw mode, if they
/// are in effect. Safe to call more than once and from any thread.
pub fn restore() {
    if SCREEN.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(out, LeaveAlternateScreen, Show);
        let _ = out.flush();
    }
    if RAW.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
    }
}

/// True while the dashboard owns the terminal (false after a panic hook ran).
pub fn is_active() -> bool {
    SCREEN.load(Ordering::SeqCst)
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
