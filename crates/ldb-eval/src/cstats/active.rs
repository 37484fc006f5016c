//! The "Active Streams" part of the completion-stats live view: what each
//! request in flight has done so far. The runner samples its in-flight
//! requests a few times a second and sends an [`ActiveSet`]; the numbers
//! are estimates for watching a run, never results (the run records hold
//! the measured values).

/// Rows an [`ActiveSet`] carries at most; the view shows fewer.
pub const ACTIVE_ROWS_MAX: usize = 64;

/// Characters of the latest text line shown.
pub const LATEST_CHARS: usize = 90;

/// Where an in-flight request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStatus {
    /// Sent; no response head yet.
    Connecting,
    /// The server answered 200; no token yet (queued or in prefill).
    WaitingFirst,
    /// Exactly one chunk with text so far.
    FirstToken,
    /// Two or more chunks with text.
    Streaming,
}

impl StreamStatus {
    /// The status column's word.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamStatus::Connecting => "connecting",
            StreamStatus::WaitingFirst => "waiting TTFT",
            StreamStatus::FirstToken => "first token",
            StreamStatus::Streaming => "streaming",
        }
    }
}

/// One request in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveStream {
    /// Run index.
    pub run_index: usize,
    /// Dataset item, when the task has ids.
    pub item_id: Option<String>,
    /// Where it is.
    pub status: StreamStatus,
    /// Seconds since it was sent.
    pub elapsed: f64,
    /// Seconds since its first token (0 before it).
    pub since_first: f64,
    /// Chunks with text received.
    pub chunks: u64,
    /// Characters of text received.
    pub chars: u64,
    /// The last non-empty line of its text, at most [`LATEST_CHARS`].
    pub latest: String,
}

impl ActiveStream {
    /// Estimated tokens so far: chunks, or characters / 4 when a server
    /// packs several tokens into one chunk.
    pub fn tokens(&self) -> u64 {
        self.chunks.max(self.chars / 4)
    }

    /// Estimated generation rate since the first token (0 before two chunks).
    pub fn rate(&self) -> f64 {
        if self.since_first > 0.0 && self.chunks >= 2 {
            self.tokens() as f64 / self.since_first
        } else {
            0.0
        }
    }
}

/// The requests in flight at one instant: totals over all of them and the
/// oldest few as rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActiveSet {
    /// Requests in flight.
    pub total: usize,
    /// Sum of their estimated tokens.
    pub tokens: u64,
    /// Sum of their estimated rates.
    pub rate: f64,
    /// The oldest (lowest run index) at most [`ACTIVE_ROWS_MAX`].
    pub rows: Vec<ActiveStream>,
}

impl ActiveSet {
    /// The set of `streams`, in any order.
    pub fn new(mut streams: Vec<ActiveStream>) -> ActiveSet {
        streams.sort_by_key(|s| s.run_index);
        let total = streams.len();
        let tokens = streams.iter().map(ActiveStream::tokens).sum();
        let rate = streams.iter().map(ActiveStream::rate).sum();
        streams.truncate(ACTIVE_ROWS_MAX);
        ActiveSet {
            total,
            tokens,
            rate,
            rows: streams,
        }
    }
}

/// The last non-empty line of `text`, trimmed, its last `max` characters
/// (only the text's tail is looked at, so a long answer costs nothing).
pub fn latest_line(text: &str, max: usize) -> String {
    let mut cut = text.len().saturating_sub(8 * max + 64);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let line = text[cut..]
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    let n = line.chars().count();
    line.chars().skip(n.saturating_sub(max)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(i: usize, chunks: u64, chars: u64, since_first: f64) -> ActiveStream {
        ActiveStream {
            run_index: i,
            item_id: None,
            status: StreamStatus::Streaming,
            elapsed: since_first + 1.0,
            since_first,
            chunks,
            chars,
            latest: String::new(),
        }
    }

    #[test]
    fn tokens_and_rates_are_estimated_from_chunks_or_characters() {
        assert_eq!(s(0, 10, 20, 2.0).tokens(), 10);
        assert_eq!(s(0, 10, 400, 2.0).tokens(), 100, "packed chunks");
        assert_eq!(s(0, 10, 20, 2.0).rate(), 5.0);
        assert_eq!(s(0, 1, 4, 2.0).rate(), 0.0, "one chunk has no rate");
        let set = ActiveSet::new((0..100).rev().map(|i| s(i, 10, 0, 1.0)).collect());
        assert_eq!((set.total, set.tokens, set.rate), (100, 1000, 1000.0));
        assert_eq!(set.rows.len(), ACTIVE_ROWS_MAX);
        assert_eq!(set.rows[0].run_index, 0, "oldest first");
    }

    #[test]
    fn latest_line_is_the_tail_of_the_last_non_empty_line() {
        assert_eq!(latest_line("first\nsecond line \n\n", 90), "second line");
        assert_eq!(latest_line("", 90), "");
        assert_eq!(latest_line("abcdef", 3), "def");
        let long = format!("{}\nlast 漢字", "x".repeat(10_000));
        assert_eq!(latest_line(&long, 90), "last 漢字");
    }
}
