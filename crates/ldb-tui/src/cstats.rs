//! The completion-stats live view: one panel (header, live statistics, the
//! requests in flight, concurrency results, the latest completed requests;
//! with telemetry a hardware panel beside the top part), redrawn about every
//! 0.35 s and on every change. `q` or Ctrl-C asks the run to stop; the run
//! then finishes its partial report.
//!
//! Model, update, render, like the matrix dashboard: the model is
//! `ldb_eval::cstats::CsLive`, changed only by `CsLive::apply` as the
//! runner's `CsEvent`s arrive through a watch channel; [`update::key`]
//! turns a key into a request to the run; [`render`] draws the model, one
//! file per part of the panel. This file runs the terminal loop.

pub mod render;
pub mod update;

use std::io::{self, IsTerminal};
use std::thread::JoinHandle;
use std::time::Duration;

use crossterm::event::{self, Event};
use ldb_core::live::Control;
use ldb_eval::cstats::CsLive;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::{mpsc, watch};

pub use render::render;

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
                && let Some(c) = update::key(k)
            {
                let _ = controls.try_send(c);
            }
        } else if !keys {
            std::thread::sleep(PERIOD);
        }
    }
    Ok(())
}
