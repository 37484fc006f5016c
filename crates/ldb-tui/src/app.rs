//! The UI thread: the screen loop, the plain loop and the key reader.

use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyEventKind};
use ldb_core::live::{Control, LiveSnapshot};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{MissedTickBehavior, interval};

use crate::UiOptions;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::plain::{self, PlainPrinter};
use crate::terminal::{self, TerminalGuard};
use crate::update::{Cmd, Msg, update};

/// Reads terminal events on its own thread until dropped.
struct KeyReader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KeyReader {
    fn spawn(tx: mpsc::Sender<Event>) -> io::Result<KeyReader> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("ldb-tui-keys".into())
            .spawn(move || {
                // Poll with a timeout so the thread notices `stop` promptly.
                while !flag.load(Ordering::Relaxed) {
                    match event::poll(Duration::from_millis(50)) {
                        Ok(false) => {}
                        Ok(true) => {
                            let Ok(ev) = event::read() else { break };
                            if tx.blocking_send(ev).is_err() {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
            })?;
        Ok(KeyReader {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for KeyReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn to_msg(ev: Event) -> Option<Msg> {
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => Some(Msg::Key(k)),
        Event::Resize(w, h) => Some(Msg::Resize(w, h)),
        _ => None,
    }
}

fn send_control(controls: &mpsc::Sender<Control>, c: Control) {
    if let Err(mpsc::error::TrySendError::Full(c)) = controls.try_send(c) {
        // Never wait on the runner from the UI loop; deliver in the background.
        let tx = controls.clone();
        tokio::spawn(async move {
            let _ = tx.send(c).await;
        });
    }
}

type Term = Terminal<CrosstermBackend<io::Stdout>>;

/// Frame pacing: draw only when something changed and a period has passed.
struct Pacer {
    period: Duration,
    last: Option<Instant>,
}

impl Pacer {
    fn due(&self) -> bool {
        self.last.is_none_or(|t| t.elapsed() >= self.period)
    }
}

/// Apply one message: update the model, carry out its command, draw if due.
fn step(
    model: &mut Model,
    msg: Msg,
    term: &mut Term,
    pacer: &mut Pacer,
    controls: &mpsc::Sender<Control>,
) -> Result<()> {
    match update(model, msg) {
        Some(Cmd::Control(c)) => send_control(controls, c),
        Some(Cmd::Redraw) => {
            term.clear().map_err(Error::Draw)?;
            model.dirty = true;
            pacer.last = None;
        }
        None => {}
    }
    if model.dirty && pacer.due() {
        term.draw(|f| crate::render::render(f, model))
            .map_err(Error::Draw)?;
        model.dirty = false;
        pacer.last = Some(Instant::now());
    }
    Ok(())
}

/// Run the dashboard until `stop` fires (or its sender is dropped).
pub(crate) async fn run_screen(
    snapshots: &mut watch::Receiver<LiveSnapshot>,
    controls: &mpsc::Sender<Control>,
    opts: &UiOptions,
    stop: &mut oneshot::Receiver<()>,
) -> Result<()> {
    if !io::stdout().is_terminal() {
        return Err(Error::NotATerminal);
    }
    let keys = opts.keys && io::stdin().is_terminal();
    // Drop order matters: the key reader stops, then the guard restores.
    let _guard = TerminalGuard::enter(keys)?;
    let mut term = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(Error::Terminal)?;
    term.clear().map_err(Error::Draw)?;
    let size = term.size().map_err(Error::Terminal)?;
    let first = snapshots.borrow_and_update().clone();
    let mut model = Model::new(first, (size.width, size.height), keys);
    let (key_tx, mut key_rx) = mpsc::channel(64);
    let reader = keys.then(|| KeyReader::spawn(key_tx).ok()).flatten();
    let mut keys_open = reader.is_some();
    let mut snaps_open = true;
    let period = opts.frame_period();
    let mut pacer = Pacer { period, last: None };
    let mut tick = interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        let msg = tokio::select! {
            biased;
            _ = &mut *stop => break,
            ev = key_rx.recv(), if keys_open => match ev.map(to_msg) {
                Some(Some(m)) => m,
                Some(None) => continue,
                None => { keys_open = false; continue; }
            },
            r = snapshots.changed(), if snaps_open => match r {
                Ok(()) => Msg::Snapshot(Box::new(snapshots.borrow_and_update().clone())),
                Err(_) => { snaps_open = false; continue; }
            },
            at = tick.tick() => {
                // Resize events need stdin; poll the size so a resize is
                // noticed without keys too.
                match crossterm::terminal::size() {
                    Ok(s) if s != model.size => Msg::Resize(s.0, s.1),
                    _ => Msg::Tick(at.into_std()),
                }
            }
        };
        if !terminal::is_active() {
            // A panic elsewhere restored the terminal: stop drawing over it.
            break;
        }
        step(&mut model, msg, &mut term, &mut pacer, controls)?;
    }
    drop(reader);
    Ok(())
}

/// Print events and progress lines to `out` until `stop` fires (or its
/// sender is dropped), then the last snapshot's events not printed yet.
/// Stops writing, but keeps waiting for `stop`, once `out` fails.
pub(crate) async fn run_plain(
    snapshots: &mut watch::Receiver<LiveSnapshot>,
    opts: &UiOptions,
    stop: &mut oneshot::Receiver<()>,
    out: &mut dyn Write,
) {
    let mut printer = PlainPrinter::new(opts.progress_every);
    let mut open = true;
    let mut alive = true;
    loop {
        let snap = snapshots.borrow_and_update().clone();
        if alive {
            let lines = printer.lines(&snap, Instant::now(), &plain::clock());
            alive = plain::emit(out, &lines);
        }
        tokio::select! {
            biased;
            _ = &mut *stop => break,
            r = snapshots.changed(), if open => if r.is_err() { open = false },
        }
    }
    if alive {
        let snap = snapshots.borrow().clone();
        let lines = printer.events(&snap, &plain::clock());
        plain::emit(out, &lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_loop_prints_new_events_and_flushes_on_stop() {
        let (tx, mut rx) = watch::channel(LiveSnapshot::default());
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let opts = UiOptions::default();
        let mut out = Vec::new();
        let feeder = async {
            for i in 0..3 {
                tx.send_modify(|s| s.events.push(format!("10:00:0{i} event {i}")));
                tokio::task::yield_now().await;
            }
            // Published just before the stop: still printed.
            tx.send_modify(|s| s.events.push("10:00:09 last".into()));
            let _ = stop_tx.send(());
        };
        tokio::join!(run_plain(&mut rx, &opts, &mut stop_rx, &mut out), feeder);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "10:00:00 event 0",
                "10:00:01 event 1",
                "10:00:02 event 2",
                "10:00:09 last"
            ]
        );
    }

    #[tokio::test]
    async fn plain_loop_ends_when_the_handle_is_dropped_even_without_snapshots() {
        let (tx, mut rx) = watch::channel(LiveSnapshot::default());
        drop(tx);
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        drop(stop_tx);
        let mut out = Vec::new();
        run_plain(&mut rx, &UiOptions::default(), &mut stop_rx, &mut out).await;
        assert!(out.is_empty());
    }
}
