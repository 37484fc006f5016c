//! The two status rows at the bottom of the terminal.
//!
//! A scroll region keeps the streamed text in the rows above, so the status
//! rows stay put while the text scrolls: row 1 is live (this iteration),
//! row 2 the totals so far. Only on a terminal, and never with `--no-overlay`.

use std::io::Write;
use std::time::{Duration, Instant};

/// Redraws of the live row at most this often.
const MIN_REDRAW: Duration = Duration::from_millis(100);

/// The rows, when shown.
pub struct Overlay {
    rows: u16,
    last_draw: Option<Instant>,
    live: String,
    stats: String,
}

impl Overlay {
    /// Reserve the bottom two rows of a terminal of `rows` rows (none when it
    /// is too small to hold them and some text).
    pub fn start(rows: u16) -> Option<Overlay> {
        if rows < 6 {
            return None;
        }
        let o = Overlay {
            rows,
            last_draw: None,
            live: String::new(),
            stats: String::new(),
        };
        let mut out = std::io::stdout().lock();
        // Make room, then confine scrolling to the rows above the overlay and
        // put the cursor at the bottom of that region.
        let _ = write!(out, "\n\n\x1b[1;{}r\x1b[{};1H", rows - 2, rows - 2);
        let _ = out.flush();
        Some(o)
    }

    /// Set the live row; drawn when the last redraw is old enough or `force`.
    pub fn live(&mut self, text: String, force: bool) {
        self.live = text;
        let due = self.last_draw.is_none_or(|t| t.elapsed() >= MIN_REDRAW);
        if force || due {
            self.draw();
        }
    }

    /// Set the totals row and redraw.
    pub fn stats(&mut self, text: String) {
        self.stats = text;
        self.draw();
    }

    fn draw(&mut self) {
        self.last_draw = Some(Instant::now());
        let mut out = std::io::stdout().lock();
        // Save the cursor, draw both rows (cleared first), restore it.
        let _ = write!(
            out,
            "\x1b7\x1b[{};1H\x1b[2K\x1b[1;36m{}\x1b[0m\x1b[{};1H\x1b[2K\x1b[2m{}\x1b[0m\x1b8",
            self.rows - 1,
            self.live,
            self.rows,
            self.stats
        );
        let _ = out.flush();
    }

    /// Give the whole screen back: no scroll region, rows cleared, cursor
    /// below the text.
    pub fn finish(&mut self) {
        let mut out = std::io::stdout().lock();
        let _ = write!(
            out,
            "\x1b7\x1b[r\x1b[{};1H\x1b[2K\x1b[{};1H\x1b[2K\x1b8",
            self.rows - 1,
            self.rows
        );
        let _ = out.flush();
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        self.finish();
    }
}
