//! Live terminal dashboard and plain-mode progress printer for
//! llm-decode-bench.
//!
//! The runner publishes [`LiveSnapshot`]s on a `tokio::sync::watch` channel
//! and never waits on the UI. [`spawn`] starts the UI on its own thread:
//!
//! - [`DisplayMode::Screen`]: a ratatui dashboard on the alternate screen,
//!   redrawn at most `refresh_hz` times a second when something changed. Keys
//!   are turned into [`Control`] messages (`q`/Ctrl-C → `Stop`, `s` → `Skip`).
//! - [`DisplayMode::Plain`]: one line per new event plus periodic progress
//!   lines, for logs and CI.
//!
//! The code follows the Elm architecture: [`model::Model`] holds the state,
//! [`update::update`] is the only function that changes it, and the
//! [`render`] module draws it, one file per panel.
//!
//! ```no_run
//! # async fn demo() {
//! use ldb_core::live::LiveSnapshot;
//! use tokio::sync::{mpsc, watch};
//! let (snap_tx, snap_rx) = watch::channel(LiveSnapshot::default());
//! let (ctl_tx, mut ctl_rx) = mpsc::channel(8);
//! let mode = ldb_tui::choose_mode(None);
//! let ui = ldb_tui::spawn(mode, snap_rx, ctl_tx, ldb_tui::UiOptions::default());
//! // … run the benchmark, `snap_tx.send_replace(..)`, watch `ctl_rx` …
//! ui.finish().await;
//! # drop((snap_tx, ctl_rx));
//! # }
//! ```
//!
//! See also: `ldb_core::live` (the snapshot model), `docs/dashboard.md`.

mod app;
pub mod cstats;
pub mod demo;
pub mod error;
pub mod format;
pub mod keymap;
pub mod layout;
pub mod model;
pub mod plain;
pub mod render;
pub mod terminal;
pub mod theme;
pub mod update;

use std::fmt;
use std::io::IsTerminal;
use std::str::FromStr;
use std::thread::JoinHandle;
use std::time::Duration;

pub use error::{Error, Result};
pub use ldb_core::live::{Control, LiveSnapshot};
use tokio::sync::{mpsc, oneshot, watch};

/// How the run is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayMode {
    /// Full-screen dashboard (alternate screen).
    Screen,
    /// Plain lines, no terminal control.
    Plain,
}

impl DisplayMode {
    /// The word used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DisplayMode::Screen => "screen",
            DisplayMode::Plain => "plain",
        }
    }
}

impl fmt::Display for DisplayMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DisplayMode {
    type Err = Error;

    /// `screen` (or the reference's `live`) and `plain`, any case.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "screen" | "live" => Ok(DisplayMode::Screen),
            "plain" => Ok(DisplayMode::Plain),
            _ => Err(Error::UnknownMode(s.to_owned())),
        }
    }
}

/// The mode to use: `Plain` whenever stdout is not a terminal (or `TERM` is
/// `dumb`), otherwise the requested mode, `Screen` by default.
pub fn choose_mode(requested: Option<DisplayMode>) -> DisplayMode {
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    if !std::io::stdout().is_terminal() || dumb {
        DisplayMode::Plain
    } else {
        requested.unwrap_or(DisplayMode::Screen)
    }
}

/// The slowest dashboard refresh accepted (one frame every 5 s, as the reference floors it).
pub const MIN_REFRESH_HZ: f64 = 0.2;
/// The fastest: more frames than this only cost CPU next to the streams.
pub const MAX_REFRESH_HZ: f64 = 10.0;

impl UiOptions {
    /// Time between frames.
    pub fn frame_period(&self) -> Duration {
        let hz = if self.refresh_hz.is_finite() {
            self.refresh_hz.clamp(MIN_REFRESH_HZ, MAX_REFRESH_HZ)
        } else {
            MAX_REFRESH_HZ
        };
        Duration::from_secs_f64(1.0 / hz)
    }
}

/// Tuning knobs.
#[derive(Debug, Clone)]
pub struct UiOptions {
    /// Redraws per second at most (`--refresh-rate`), clamped to
    /// [`MIN_REFRESH_HZ`]..=[`MAX_REFRESH_HZ`]; also the rate of the clocks' tick.
    pub refresh_hz: f64,
    /// Plain mode: the shortest gap between two progress lines of one cell.
    pub progress_every: Duration,
    /// Read keys in screen mode. Ignored (keys off, no raw mode) when stdin
    /// is not a terminal; plain mode never reads keys.
    pub keys: bool,
}

impl Default for UiOptions {
    fn default() -> Self {
        UiOptions {
            refresh_hz: MAX_REFRESH_HZ,
            progress_every: Duration::from_secs(5),
            keys: true,
        }
    }
}

/// The running UI. Call [`UiHandle::finish`] before printing the report;
/// dropping the handle also stops the UI, blocking briefly while it exits.
#[derive(Debug)]
pub struct UiHandle {
    mode: DisplayMode,
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
    thread: Option<JoinHandle<()>>,
}

impl UiHandle {
    /// The mode the UI was started in.
    pub fn mode(&self) -> DisplayMode {
        self.mode
    }

    /// Stop drawing, restore the terminal (leaving the alternate screen) and
    /// return once the UI thread has finished. Plain mode prints the events
    /// of the last snapshot that were not printed yet first.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
        // The thread has signalled `done` as its last act; joining is immediate.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for UiHandle {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        terminal::restore();
    }
}

/// Start the UI on its own thread. `snapshots` is updated by the runner;
/// `controls` receives `Skip`/`Stop` from the keyboard (screen mode only).
///
/// If the dashboard cannot take the terminal, the UI says why on stderr and
/// falls back to plain mode; it never exits the process.
pub fn spawn(
    mode: DisplayMode,
    mut snapshots: watch::Receiver<LiveSnapshot>,
    controls: mpsc::Sender<Control>,
    opts: UiOptions,
) -> UiHandle {
    let (stop_tx, mut stop_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let body = move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => rt.block_on(async {
                if mode == DisplayMode::Screen {
                    let r = app::run_screen(&mut snapshots, &controls, &opts, &mut stop_rx).await;
                    terminal::restore();
                    match r {
                        Ok(()) => {}
                        Err(e) => {
                            eprintln!("dashboard: {e}; continuing with plain output");
                            let mut out = std::io::stdout();
                            app::run_plain(&mut snapshots, &opts, &mut stop_rx, &mut out).await;
                        }
                    }
                } else {
                    let mut out = std::io::stdout();
                    app::run_plain(&mut snapshots, &opts, &mut stop_rx, &mut out).await;
                }
            }),
            Err(e) => eprintln!("dashboard: {}", Error::Runtime(e)),
        }
        let _ = done_tx.send(());
    };
    let thread = std::thread::Builder::new()
        .name("ldb-tui".into())
        .spawn(body);
    let thread = match thread {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("dashboard: could not start the UI thread: {e}");
            None
        }
    };
    UiHandle {
        mode,
        stop: Some(stop_tx),
        done: Some(done_rx),
        thread,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refresh_rate_sets_the_frame_period_within_bounds() {
        let period = |hz: f64| {
            UiOptions {
                refresh_hz: hz,
                ..UiOptions::default()
            }
            .frame_period()
        };
        assert_eq!(period(1.0), Duration::from_secs(1));
        assert_eq!(period(4.0), Duration::from_millis(250));
        assert_eq!(period(0.05), Duration::from_secs(5), "floored at 0.2 Hz");
        assert_eq!(period(60.0), Duration::from_millis(100), "capped at 10 Hz");
        assert_eq!(period(f64::NAN), Duration::from_millis(100));
        assert_eq!(
            UiOptions::default().frame_period(),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn display_modes_parse() {
        assert_eq!(
            "screen".parse::<DisplayMode>().ok(),
            Some(DisplayMode::Screen)
        );
        assert_eq!(
            "LIVE".parse::<DisplayMode>().ok(),
            Some(DisplayMode::Screen)
        );
        assert_eq!(
            "plain".parse::<DisplayMode>().ok(),
            Some(DisplayMode::Plain)
        );
        assert!(matches!(
            "fancy".parse::<DisplayMode>(),
            Err(Error::UnknownMode(m)) if m == "fancy"
        ));
        assert_eq!(DisplayMode::Plain.to_string(), "plain");
    }

    #[tokio::test]
    async fn finish_returns_promptly_in_plain_mode() {
        let (tx, rx) = watch::channel(LiveSnapshot::default());
        let (ctl_tx, _ctl_rx) = mpsc::channel(4);
        let ui = spawn(DisplayMode::Plain, rx, ctl_tx, UiOptions::default());
        assert_eq!(ui.mode(), DisplayMode::Plain);
        tx.send_replace(LiveSnapshot::default());
        tokio::time::timeout(Duration::from_secs(5), ui.finish())
            .await
            .expect("the UI thread ends when asked");
    }
}
