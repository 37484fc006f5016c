//! Per-request accounting and the measurement window.
//!
//! The window is the wall interval `[start, end]` (readiness → window close).
//! A token counts when its arrival time lies inside it. With continuous usage,
//! each chunk's `completion_tokens` delta is the token count of that chunk, so
//! the count is exact; without it, content chunks are counted and converted
//! with a measured tokens-per-chunk ratio (labelled as such).
//!
//! The aggregate rate divides by the whole wall window (`end − start`), so idle
//! time at the end of the window counts like idle time anywhere else. The
//! reference divided by the time of the last token instead, which inflated
//! windows whose last request finished early.
//!
//! Memory per request is constant: no per-token storage.

use crate::result::RequestSample;

/// Window bounds as currently known (seconds on the run clock).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowBounds {
    /// Window start, once readiness is declared.
    pub start: Option<f64>,
    /// Window end, once the window closes.
    pub end: Option<f64>,
}

impl WindowBounds {
    /// True when `t` lies inside the (started) window.
    pub fn contains(&self, t: f64) -> bool {
        match self.start {
            Some(s) => t >= s && self.end.is_none_or(|e| t <= e),
            None => false,
        }
    }
}

/// Running state of one request.
#[derive(Debug, Clone, Default)]
pub struct RequestTrack {
    start: f64,
    first: Option<f64>,
    second: Option<f64>,
    last: Option<f64>,
    chunks: u64,
    usage_tokens: Option<u64>,
    usage_on_content: bool,
    prompt_tokens: Option<u64>,
    /// Tokens that arrived inside the window.
    pub window_tokens: u64,
    /// Content chunks that arrived inside the window.
    pub window_chunks: u64,
    /// Arrival of the last token inside the window.
    pub last_window_t: Option<f64>,
    // A chunk that arrived while the window start was unknown; counted later
    // if the start turns out to precede it (closes a race with the monitor).
    pending: Option<(f64, u64)>,
    completed: bool,
    error: Option<String>,
}

impl RequestTrack {
    /// A request sent at `start`.
    pub fn new(start: f64) -> Self {
        RequestTrack {
            start,
            ..Self::default()
        }
    }

    /// Request start time.
    pub fn start(&self) -> f64 {
        self.start
    }

    /// True once the first content chunk arrived.
    pub fn has_first_token(&self) -> bool {
        self.first.is_some()
    }

    /// Output tokens so far (usage when reported, else chunks).
    pub fn output_tokens(&self) -> u64 {
        self.usage_tokens.unwrap_or(self.chunks)
    }

    /// Record one chunk arriving at `t`. `completion_tokens` is the cumulative
    /// usage if the chunk carries it. Returns the number of new tokens it brought.
    pub fn on_chunk(
        &mut self,
        t: f64,
        has_tokens: bool,
        completion_tokens: Option<u64>,
        prompt_tokens: Option<u64>,
        window: WindowBounds,
    ) -> u64 {
        if prompt_tokens.is_some() {
            self.prompt_tokens = prompt_tokens;
        }
        let mut new_tokens = 0;
        if let Some(ct) = completion_tokens {
            let prev = self.usage_tokens.unwrap_or(0);
            new_tokens = ct.saturating_sub(prev);
            self.usage_tokens = Some(ct.max(prev));
            if has_tokens {
                self.usage_on_content = true;
            }
        }
        if has_tokens {
            self.chunks += 1;
            if self.first.is_none() {
                self.first = Some(t);
            } else if self.second.is_none() {
                self.second = Some(t);
            }
            self.last = Some(t);
            if completion_tokens.is_none() && self.usage_tokens.is_none() {
                new_tokens = 1;
            }
        }
        // Usage that arrives on a non-content chunk (final usage chunk) is not
        // timed: its tokens were generated earlier. Only content-borne usage counts.
        let timed = if has_tokens { new_tokens } else { 0 };
        self.account(t, timed, u64::from(has_tokens), window);
        new_tokens
    }

    fn account(&mut self, t: f64, tokens: u64, chunks: u64, window: WindowBounds) {
        if let Some((pt, ptok)) = self.pending.take() {
            if window.start.is_some() && window.contains(pt) {
                self.count(pt, ptok, 1);
            } else if window.start.is_none() {
                self.pending = Some((pt, ptok));
            }
        }
        if chunks == 0 && tokens == 0 {
            return;
        }
        if window.start.is_none() {
            // Keep only the latest: earlier ones are long before any start.
            self.pending = Some((t, tokens));
        } else if window.contains(t) {
            self.count(t, tokens, chunks);
        }
    }

    fn count(&mut self, t: f64, tokens: u64, chunks: u64) {
        self.window_tokens += tokens;
        self.window_chunks += chunks;
        if tokens > 0 {
            self.last_window_t = Some(self.last_window_t.map_or(t, |l: f64| l.max(t)));
        }
    }

    /// Apply a window start that became known after the last chunk.
    pub fn settle(&mut self, window: WindowBounds) {
        self.account(f64::NEG_INFINITY, 0, 0, window);
    }

    /// The stream reached its natural end.
    pub fn mark_completed(&mut self) {
        self.completed = true;
    }

    /// The request failed with `reason`.
    pub fn mark_error(&mut self, reason: String) {
        self.error = Some(reason);
    }

    /// Failure reason, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// True when usage arrived on content chunks (per-chunk token counts known).
    pub fn has_continuous_usage(&self) -> bool {
        self.usage_on_content
    }

    /// True when any usage was reported.
    pub fn has_usage(&self) -> bool {
        self.usage_tokens.is_some()
    }

    /// Content chunks received.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The sample for statistics; times are made relative to `origin`.
    pub fn to_sample(&self, origin: f64, window: WindowBounds) -> RequestSample {
        let out = self.output_tokens();
        let (first, last) = (self.first, self.last);
        let ttft = first.map_or(0.0, |f| f - self.start);
        let tts = match (first, self.second) {
            (Some(f), Some(s)) => s - f,
            _ => 0.0,
        };
        let span = match (first, last) {
            (Some(f), Some(l)) if l > f => l - f,
            _ => 0.0,
        };
        let itl = if out >= 2 && span > 0.0 {
            span / (out - 1) as f64
        } else {
            0.0
        };
        let chunk_itl = if self.chunks >= 2 && span > 0.0 {
            span / (self.chunks - 1) as f64
        } else {
            0.0
        };
        let latency = match last {
            Some(l) if self.completed => l - self.start,
            _ => 0.0,
        };
        let in_window = self.window_tokens > 0
            || (window.start.is_some() && first.is_some_and(|f| window.contains(f)));
        RequestSample {
            ttft,
            time_to_second_token: tts,
            latency,
            inter_token_latency_avg: itl,
            chunk_inter_token_latency_avg: chunk_itl,
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: out,
            output_tps_per_user: if itl > 0.0 { 1.0 / itl } else { 0.0 },
            e2e_output_tps_per_user: if latency > 0.0 {
                out as f64 / latency
            } else {
                0.0
            },
            completed: self.completed,
            start_s: self.start - origin,
            first_token_s: first.map(|f| f - origin),
            end_s: last.map(|l| l - origin),
            in_window,
            itl_source: if self.usage_tokens.is_some() {
                "usage"
            } else {
                "chunks"
            }
            .into(),
            error: self.error.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(s: f64, e: Option<f64>) -> WindowBounds {
        WindowBounds {
            start: Some(s),
            end: e,
        }
    }

    #[test]
    fn counts_only_tokens_inside_the_window() {
        let mut r = RequestTrack::new(0.0);
        let none = WindowBounds::default();
        r.on_chunk(0.5, false, Some(0), Some(78), none); // role chunk
        r.on_chunk(1.0, true, Some(3), None, none);
        r.on_chunk(2.0, true, Some(6), None, win(1.5, None));
        r.on_chunk(3.0, true, Some(9), None, win(1.5, Some(2.5)));
        assert_eq!(r.window_tokens, 3);
        assert_eq!(r.last_window_t, Some(2.0));
        let s = r.to_sample(1.5, win(1.5, Some(2.5)));
        assert_eq!(s.output_tokens, 9);
        assert_eq!(s.ttft, 1.0);
        assert_eq!(s.input_tokens, 78);
        assert!((s.inter_token_latency_avg - 2.0 / 8.0).abs() < 1e-12);
        assert_eq!(s.chunk_inter_token_latency_avg, 1.0);
        assert!(s.in_window);
        assert!(!s.completed);
        assert_eq!(s.latency, 0.0);
        assert!(r.has_continuous_usage());
    }

    #[test]
    fn pending_chunk_is_counted_when_start_precedes_it() {
        let mut r = RequestTrack::new(0.0);
        r.on_chunk(1.0, true, Some(2), None, WindowBounds::default());
        // The monitor declared the window at 0.9 just after that chunk was read.
        r.settle(win(0.9, None));
        assert_eq!(r.window_tokens, 2);
        let mut q = RequestTrack::new(0.0);
        q.on_chunk(1.0, true, Some(2), None, WindowBounds::default());
        q.settle(win(1.1, None));
        assert_eq!(q.window_tokens, 0);
    }

    #[test]
    fn final_usage_is_not_timed_and_chunks_count_without_usage() {
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, Some(10.0));
        r.on_chunk(1.0, true, None, None, w);
        r.on_chunk(2.0, true, None, None, w);
        assert_eq!(r.window_tokens, 2);
        r.on_chunk(2.1, false, Some(5), Some(10), w);
        assert_eq!(r.window_tokens, 2);
        assert_eq!(r.window_chunks, 2);
        assert_eq!(r.output_tokens(), 5);
        assert!(!r.has_continuous_usage());
        r.mark_completed();
        let s = r.to_sample(0.0, w);
        assert_eq!(s.latency, 2.0);
        assert_eq!(s.e2e_output_tps_per_user, 2.5);
    }
}
