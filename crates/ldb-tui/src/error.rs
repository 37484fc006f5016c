//! The crate's error type.

use std::io;

/// What can go wrong while driving the terminal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Entering or leaving raw mode / the alternate screen failed.
    #[error("terminal setup failed: {0}")]
    Terminal(#[source] io::Error),
    /// Drawing a frame failed (the terminal went away).
    #[error("drawing the dashboard failed: {0}")]
    Draw(#[source] io::Error),
    /// The UI thread's runtime could not be built.
    #[error("could not start the UI runtime: {0}")]
    Runtime(#[source] io::Error),
    /// Screen mode was asked for but stdout is not a terminal.
    #[error("stdout is not a terminal")]
    NotATerminal,
    /// An unknown `--display-mode` word.
    #[error("unknown display mode `{0}` (expected screen, live or plain)")]
    UnknownMode(String),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
