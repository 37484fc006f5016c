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

use crate::chunk::{Channel, ChunkInfo};
use crate::failure::RequestError;
use crate::gaps::TokenGaps;
use crate::result::RequestSample;

mod reads;
use reads::{Counted, Pending, Split};

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

/// One parsed chunk as the accounting sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkEvent {
    /// Arrival time (run clock).
    pub t: f64,
    /// The chunk has choices, so it belongs to the token stream; the final
    /// usage-only chunk (`choices: []`) does not.
    pub in_stream: bool,
    /// Channel of the chunk's text (`None` for an empty delta).
    pub channel: Channel,
    /// Cumulative completion tokens, when the chunk carries usage.
    pub completion_tokens: Option<u64>,
    /// Usage was present but implausible (negative, fractional, huge).
    pub usage_invalid: bool,
    /// Prompt tokens, when the chunk carries usage.
    pub prompt_tokens: Option<u64>,
    /// Cumulative reasoning tokens from usage details, when reported.
    pub reasoning_tokens: Option<u64>,
}

impl ChunkEvent {
    /// The accounting view of a parsed chunk that arrived at `t`.
    pub fn from_chunk(t: f64, c: &ChunkInfo<'_>) -> Self {
        ChunkEvent {
            t,
            in_stream: c.has_choices,
            channel: c.channel,
            completion_tokens: c.completion_tokens,
            usage_invalid: c.usage_invalid,
            prompt_tokens: c.prompt_tokens,
            reasoning_tokens: c.reasoning_tokens,
        }
    }
}

/// Why a request's usage was not trusted (its tokens are then counted by chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UsageAnomaly {
    /// `completion_tokens` decreased.
    WentBackwards,
    /// A count that is negative, fractional or absurdly large.
    Invalid,
}

/// How many counted reads a request keeps for a window end learned late.
/// A follower shard is told of an `--duration auto` close 0.3 s ahead of
/// it; 32 reads cover a message that much late at 100 reads a second.
const TAIL_CAP: usize = 32;

/// What taking back the tokens after a late window end did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LateEnd {
    /// Tokens taken back.
    pub tokens: u64,
    /// The token gaps taken back (to take out of the cell's histogram).
    pub gaps: Vec<TokenGaps>,
    /// False when reads after the end may have left the kept tail already:
    /// then the count still holds some of them.
    pub exact: bool,
}

/// How many not-yet-placed chunks a request keeps while the window start is
/// unknown. The start is published microseconds after it is taken, so only
/// the last few chunks can fall after it; older ones are dropped.
const PENDING_CAP: usize = 16;

/// Running state of one request.
///
/// Token counting: with usage on the stream's chunks (continuous usage), a
/// chunk's tokens are its increase of `completion_tokens`, timed at its
/// arrival, whatever text it carries: a token that ends inside a multi-byte
/// character arrives on a chunk with an empty delta. Without usage, each
/// chunk with text (or a tool call) is one token. The first usage value
/// replaces the running one-per-chunk estimate, so usage that starts mid-stream
/// is not counted twice. Usage on the final chunk without choices is not timed
/// (those tokens arrived earlier). Usage that goes backwards or is implausible
/// is dropped for the rest of the request, which is then counted by chunks.
///
/// Serialisable so a shard can hand its requests to the leader, which
/// assembles the cell from every shard's tracks as if one process had
/// measured them (`docs/shards.md`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RequestTrack {
    start: f64,
    first: Option<f64>,
    first_content: Option<f64>,
    #[serde(default)]
    first_tool_call: Option<f64>,
    second: Option<f64>,
    last: Option<f64>,
    chunks: u64,
    usage_tokens: Option<u64>,
    usage_stream_chunks: u32,
    anomaly: Option<UsageAnomaly>,
    prompt_tokens: Option<u64>,
    reasoning_usage: Option<u64>,
    reasoning_tokens: u64,
    #[serde(default)]
    tool_call_tokens: u64,
    mixed_chunks: u64,
    last_channel: Channel,
    finish_reason: Option<String>,
    /// Tokens that arrived inside the window.
    pub window_tokens: u64,
    /// Of `window_tokens`, those on the reasoning channel.
    pub window_reasoning_tokens: u64,
    /// Of `window_tokens`, those on the tool-call channel.
    #[serde(default)]
    pub window_tool_call_tokens: u64,
    /// Chunks with text that arrived inside the window.
    pub window_chunks: u64,
    /// Arrival of the last token inside the window.
    pub last_window_t: Option<f64>,
    // Token gaps: the tokens of the current read (one arrival time) and the
    // time of the previous read that brought tokens.
    read_t: f64,
    read_tokens: u64,
    prev_read_t: Option<f64>,
    window_gap_sum: f64,
    window_gap_tokens: u64,
    pending: Vec<Pending>,
    /// The latest reads counted in the window, newest last (not sent to the
    /// leader: a follower applies a late end before it hands its tracks over).
    #[serde(skip)]
    tail: Vec<Counted>,
    /// The latest arrival among counted reads that left the full tail.
    #[serde(skip)]
    tail_floor: Option<f64>,
    completed: bool,
    error: Option<RequestError>,
}

impl RequestTrack {
    /// A request sent at `start`.
    pub fn new(start: f64) -> Self {
        RequestTrack {
            start,
            ..Self::default()
        }
    }

    /// Move every time of the request by `dt` seconds: a shard's tracks
    /// put on the leader's clock (the window counts are not touched: they
    /// were made against the same window mapped to the shard's clock).
    pub fn shift_times(&mut self, dt: f64) {
        self.start += dt;
        self.read_t += dt;
        for t in [
            &mut self.first,
            &mut self.first_content,
            &mut self.first_tool_call,
            &mut self.second,
            &mut self.last,
            &mut self.last_window_t,
            &mut self.prev_read_t,
        ]
        .into_iter()
        .flatten()
        {
            *t += dt;
        }
        for p in &mut self.pending {
            p.t += dt;
        }
    }

    /// Request start time.
    pub fn start(&self) -> f64 {
        self.start
    }

    /// Run-clock time of the second chunk with output, if one came. Two
    /// chunks taken from one socket read share that read's time, so this
    /// may equal the first token's time; it is `None` only when no second
    /// output chunk arrived at all.
    pub fn second_token_at(&self) -> Option<f64> {
        self.second
    }

    /// A channel's chunk-counted tokens `n` on the scale of the usage total
    /// `out`: with usage only at the end, a chunk counts one token however
    /// many it carried (speculative decoding sends several), so the channel
    /// keeps its share of the chunks (the cell's `chunk_share` rule). With
    /// continuous usage, or none, `n` is already in tokens.
    fn by_final_usage(&self, n: u64, out: u64) -> u64 {
        if self.has_continuous_usage() || !self.has_usage() || self.chunks == 0 {
            return n;
        }
        ((n as f64 * out as f64 / self.chunks as f64).round() as u64).min(out)
    }

    /// True once the first token arrived.
    pub fn has_first_token(&self) -> bool {
        self.first.is_some()
    }

    /// Output tokens so far (usage when reported and sane, else chunks).
    pub fn output_tokens(&self) -> u64 {
        match (self.anomaly, self.usage_tokens) {
            (None, Some(u)) => u,
            _ => self.chunks,
        }
    }

    /// Record one chunk. Returns the new tokens it brought and, when it
    /// started a new read, the gaps of the previous read (inside the window).
    pub fn on_chunk(&mut self, ev: ChunkEvent, window: WindowBounds) -> ChunkEffect {
        if ev.prompt_tokens.is_some() {
            self.prompt_tokens = ev.prompt_tokens;
        }
        if ev.reasoning_tokens.is_some() {
            self.reasoning_usage = ev.reasoning_tokens;
        }
        let has_text = ev.channel != Channel::None;
        let new_tokens = self.count_tokens(&ev, has_text);
        let timed = if ev.in_stream { new_tokens } else { 0 };
        let mut effect = ChunkEffect {
            new_tokens,
            gaps: None,
        };
        if has_text || timed > 0 {
            if self.first.is_none() {
                self.first = Some(ev.t);
            } else if self.second.is_none() {
                self.second = Some(ev.t);
            }
            self.last = Some(ev.t);
        }
        if matches!(ev.channel, Channel::Content | Channel::Mixed) && self.first_content.is_none() {
            self.first_content = Some(ev.t);
        }
        if ev.channel == Channel::ToolCall && self.first_tool_call.is_none() {
            self.first_tool_call = Some(ev.t);
        }
        if has_text {
            self.chunks += 1;
            if ev.channel == Channel::Mixed {
                self.mixed_chunks += 1;
            } else {
                self.last_channel = ev.channel;
            }
        }
        // Tokens of an empty delta belong to the text they are part of: the
        // channel that was streaming.
        let on = |c: Channel| match ev.channel {
            x if x == c => timed,
            Channel::None if self.last_channel == c => timed,
            _ => 0,
        };
        let split = Split {
            reasoning: on(Channel::Reasoning),
            tool: on(Channel::ToolCall),
        };
        self.reasoning_tokens += split.reasoning;
        self.tool_call_tokens += split.tool;
        if timed > 0 {
            if ev.t != self.read_t {
                effect.gaps = self.flush_read(window);
                self.read_t = ev.t;
            }
            self.read_tokens += timed;
        }
        self.account(ev.t, timed, split, u64::from(has_text), window);
        effect
    }

    fn count_tokens(&mut self, ev: &ChunkEvent, has_text: bool) -> u64 {
        if ev.usage_invalid && self.anomaly.is_none() {
            self.anomaly = Some(UsageAnomaly::Invalid);
        }
        let by_chunk = u64::from(has_text);
        if self.anomaly.is_some() {
            return by_chunk;
        }
        let Some(ct) = ev.completion_tokens else {
            // Between usage reports (or without any): one token per text chunk,
            // replaced by the next usage value.
            return if self.usage_tokens.is_none() {
                by_chunk
            } else {
                0
            };
        };
        if ev.in_stream {
            self.usage_stream_chunks += 1;
        }
        let prev = match self.usage_tokens {
            Some(u) if ct < u => {
                self.anomaly = Some(UsageAnomaly::WentBackwards);
                return by_chunk;
            }
            Some(u) => u,
            // The first usage replaces the chunk estimate so far.
            None => self.chunks,
        };
        self.usage_tokens = Some(ct);
        ct.saturating_sub(prev)
    }

    /// Close the current read: its tokens share the gap since the previous one.
    fn flush_read(&mut self, window: WindowBounds) -> Option<TokenGaps> {
        let tokens = std::mem::take(&mut self.read_tokens);
        if tokens == 0 {
            return None;
        }
        let t = self.read_t;
        let prev = self.prev_read_t.replace(t)?;
        if !(window.contains(prev) && window.contains(t)) || t <= prev {
            return None;
        }
        let gaps = TokenGaps {
            each: (t - prev) / tokens as f64,
            count: tokens,
        };
        self.window_gap_sum += t - prev;
        self.window_gap_tokens += tokens;
        if let Some(c) = self.tail.iter_mut().rev().find(|c| c.t == t) {
            c.gaps = Some(gaps);
        }
        Some(gaps)
    }

    fn account(&mut self, t: f64, tokens: u64, split: Split, chunks: u64, window: WindowBounds) {
        if window.start.is_some() && !self.pending.is_empty() {
            for p in std::mem::take(&mut self.pending) {
                if window.contains(p.t) {
                    self.count(p.t, p.tokens, p.split, p.chunks);
                }
            }
        }
        if chunks == 0 && tokens == 0 {
            return;
        }
        if window.start.is_none() {
            if self.pending.len() == PENDING_CAP {
                self.pending.remove(0);
            }
            self.pending.push(Pending {
                t,
                tokens,
                split,
                chunks,
            });
        } else if window.contains(t) {
            self.count(t, tokens, split, chunks);
        }
    }

    fn count(&mut self, t: f64, tokens: u64, split: Split, chunks: u64) {
        self.window_tokens += tokens;
        self.window_reasoning_tokens += split.reasoning;
        self.window_tool_call_tokens += split.tool;
        self.window_chunks += chunks;
        if tokens > 0 {
            self.last_window_t = Some(self.last_window_t.map_or(t, |l: f64| l.max(t)));
        }
        if self.tail.len() == TAIL_CAP {
            let old = self.tail.remove(0);
            self.tail_floor = Some(self.tail_floor.map_or(old.t, |f| f.max(old.t)));
        }
        self.tail.push(Counted {
            t,
            tokens,
            split,
            chunks,
            gaps: None,
        });
    }

    /// Take back what was counted after `end`: a window end learned after
    /// it passed (a follower shard told late of an `--duration auto` close)
    /// counted the reads that arrived meanwhile, and a token counts by its
    /// arrival time, not by when the end became known. Call once the
    /// stream ended.
    pub fn drop_after(&mut self, end: f64) -> LateEnd {
        let mut late = LateEnd {
            exact: self.tail_floor.is_none_or(|f| f <= end),
            ..LateEnd::default()
        };
        while let Some(c) = self.tail.pop_if(|c| c.t > end) {
            self.window_tokens = self.window_tokens.saturating_sub(c.tokens);
            self.window_reasoning_tokens = self
                .window_reasoning_tokens
                .saturating_sub(c.split.reasoning);
            self.window_tool_call_tokens =
                self.window_tool_call_tokens.saturating_sub(c.split.tool);
            self.window_chunks = self.window_chunks.saturating_sub(c.chunks);
            late.tokens += c.tokens;
            if let Some(g) = c.gaps {
                self.window_gap_sum = (self.window_gap_sum - g.each * g.count as f64).max(0.0);
                self.window_gap_tokens = self.window_gap_tokens.saturating_sub(g.count);
                late.gaps.push(g);
            }
        }
        if self.last_window_t.is_some_and(|l| l > end) {
            self.last_window_t = self
                .tail
                .iter()
                .filter(|c| c.tokens > 0)
                .map(|c| c.t)
                .chain(self.tail_floor.filter(|&f| f <= end))
                .reduce(f64::max);
        }
        late
    }

    /// Apply a window start that became known after the last chunk, and
    /// close the last read. Call once when the stream ended.
    pub fn settle(&mut self, window: WindowBounds) -> Option<TokenGaps> {
        self.account(f64::NEG_INFINITY, 0, Split::default(), 0, window);
        self.flush_read(window)
    }

    /// The stream reached its natural end.
    pub fn mark_completed(&mut self) {
        self.completed = true;
    }

    /// The server's finish reason, once a choice carried one.
    pub fn set_finish_reason(&mut self, reason: &str) {
        self.finish_reason = Some(reason.to_string());
    }

    /// The server's finish reason, if any.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// The request failed with `reason`.
    pub fn mark_error(&mut self, reason: RequestError) {
        self.error = Some(reason);
    }

    /// Failure reason, if any.
    pub fn error(&self) -> Option<&RequestError> {
        self.error.as_ref()
    }

    /// True when usage arrived on at least two chunks of the stream (per-chunk
    /// token counts known). One usage value on the last text chunk is not
    /// continuous usage.
    pub fn has_continuous_usage(&self) -> bool {
        self.anomaly.is_none() && self.usage_stream_chunks >= 2
    }

    /// True when usable usage was reported.
    pub fn has_usage(&self) -> bool {
        self.anomaly.is_none() && self.usage_tokens.is_some()
    }

    /// Why the request's usage was dropped, if it was.
    pub fn usage_anomaly(&self) -> Option<UsageAnomaly> {
        self.anomaly
    }

    /// Chunks that carried reasoning and content in one delta.
    pub fn mixed_chunks(&self) -> u64 {
        self.mixed_chunks
    }

    /// Chunks with text received.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The sample for statistics; times are made relative to `origin`.
    pub fn to_sample(&self, origin: f64, window: WindowBounds) -> RequestSample {
        let out = self.output_tokens();
        let reasoning = self
            .reasoning_usage
            .unwrap_or_else(|| self.by_final_usage(self.reasoning_tokens, out));
        let (first, last) = (self.first, self.last);
        let ttft = first.map_or(0.0, |f| f - self.start);
        // Not measured (fewer than two token chunks) is `None`; two chunks
        // of one read give a true 0.
        let tts = match (first, self.second) {
            (Some(f), Some(s)) => Some((s - f).max(0.0)),
            _ => None,
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
        let started_in_window = window.start.is_some() && first.is_some_and(|f| window.contains(f));
        let in_window = self.window_tokens > 0 || started_in_window;
        let window_itl = if self.window_gap_tokens > 0 {
            self.window_gap_sum / self.window_gap_tokens as f64
        } else {
            0.0
        };
        RequestSample {
            ttft,
            ttfo: self.first_content.map_or(0.0, |f| f - self.start),
            ttftc: self.first_tool_call.map(|f| f - self.start),
            time_to_second_token: tts,
            latency,
            inter_token_latency_avg: itl,
            window_inter_token_latency_avg: window_itl,
            chunk_inter_token_latency_avg: chunk_itl,
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: out,
            reasoning_tokens: reasoning,
            tool_call_tokens: self
                .by_final_usage(self.tool_call_tokens, out)
                .min(out.saturating_sub(reasoning)),
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
            first_token_in_window: started_in_window,
            itl_source: if self.has_usage() { "usage" } else { "chunks" }.into(),
            finish_reason: self.finish_reason.clone().unwrap_or_default(),
            error: self
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_default(),
        }
    }
}

/// What one chunk changed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkEffect {
    /// Output tokens the chunk brought (timed or not).
    pub new_tokens: u64,
    /// Gaps of the read before this chunk's, when that read closed inside the window.
    pub gaps: Option<TokenGaps>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_track_sent_as_json_and_shifted_gives_the_same_sample_on_the_other_clock() {
        let w = win(10.0, Some(20.0));
        let mut t = RequestTrack::new(8.0);
        for (i, at) in [9.0, 11.0, 12.0, 21.0].into_iter().enumerate() {
            let ev = ChunkEvent {
                t: at,
                in_stream: true,
                channel: Channel::Content,
                completion_tokens: Some(i as u64 + 1),
                ..ChunkEvent::default()
            };
            t.on_chunk(ev, w);
        }
        t.settle(w);
        let json = serde_json::to_string(&t).expect("serialises");
        let mut moved: RequestTrack = serde_json::from_str(&json).expect("reads back");
        moved.shift_times(100.0);
        let w2 = win(110.0, Some(120.0));
        let (a, b) = (t.to_sample(10.0, w), moved.to_sample(110.0, w2));
        assert_eq!(moved.window_tokens, t.window_tokens);
        assert!((a.ttft - b.ttft).abs() < 1e-9 && (a.start_s - b.start_s).abs() < 1e-9);
        assert_eq!(a.in_window, b.in_window);
        assert_eq!(moved.last_window_t, t.last_window_t.map(|x| x + 100.0));
    }

    fn win(s: f64, e: Option<f64>) -> WindowBounds {
        WindowBounds {
            start: Some(s),
            end: e,
        }
    }

    /// A chunk with choices: text on `channel`, cumulative usage `usage`.
    fn ev(t: f64, channel: Channel, usage: Option<u64>) -> ChunkEvent {
        ChunkEvent {
            t,
            in_stream: true,
            channel,
            completion_tokens: usage,
            ..ChunkEvent::default()
        }
    }

    /// The final usage-only chunk (`choices: []`).
    fn final_usage(t: f64, usage: u64, prompt: u64) -> ChunkEvent {
        ChunkEvent {
            t,
            in_stream: false,
            completion_tokens: Some(usage),
            prompt_tokens: Some(prompt),
            ..ChunkEvent::default()
        }
    }

    const C: Channel = Channel::Content;
    const N: Channel = Channel::None;

    /// Reads every 0.1 s from 1.0 to 3.0 s (two chunks at 2.5 s), counted
    /// with the window `w` known at each; the track settled with it.
    fn reads_with(w: WindowBounds) -> (RequestTrack, Vec<TokenGaps>) {
        let mut r = RequestTrack::new(0.5);
        let mut gaps = Vec::new();
        for i in 10..=30 {
            let t = f64::from(i) / 10.0;
            for _ in 0..if i == 25 { 2 } else { 1 } {
                gaps.extend(r.on_chunk(ev(t, C, None), w).gaps);
            }
        }
        gaps.extend(r.settle(w));
        (r, gaps)
    }

    #[test]
    fn a_window_end_learned_late_drops_the_tokens_after_it_by_arrival() {
        // Truth: the end (2.05 s) known from the start.
        let (truth, truth_gaps) = reads_with(win(1.0, Some(2.05)));
        // A follower told of the end only after the stream ended: it
        // counted up to its old end (10 s), then takes back by time.
        let (mut late, mut late_gaps) = reads_with(win(1.0, Some(10.0)));
        assert_eq!(late.window_tokens, 22);
        let back = late.drop_after(2.05);
        assert!(back.exact);
        assert_eq!(back.tokens, 22 - truth.window_tokens);
        assert_eq!(late.window_tokens, truth.window_tokens);
        assert_eq!(late.window_chunks, truth.window_chunks);
        assert_eq!(late.last_window_t, truth.last_window_t);
        for g in &back.gaps {
            let at = late_gaps.iter().position(|x| x == g).expect("recorded");
            late_gaps.remove(at);
        }
        // (The same gaps, in another order: equal gaps are taken back by value.)
        let mut truth_gaps = truth_gaps;
        for g in [&mut late_gaps, &mut truth_gaps] {
            g.sort_by(|a, b| a.each.total_cmp(&b.each));
        }
        assert_eq!(late_gaps, truth_gaps, "the gaps inside the window only");
        let w = win(1.0, Some(2.05));
        let (a, b) = (truth.to_sample(0.0, w), late.to_sample(0.0, w));
        let itl = (
            a.window_inter_token_latency_avg,
            b.window_inter_token_latency_avg,
        );
        assert!((itl.0 - itl.1).abs() < 1e-12, "{itl:?}");
        // Nothing after the end: nothing to take back.
        assert_eq!(late.drop_after(2.05).tokens, 0);
    }

    #[test]
    fn an_end_before_the_kept_reads_is_said_not_exact() {
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, None);
        for i in 1..=(TAIL_CAP as u32 + 8) {
            r.on_chunk(ev(f64::from(i), C, None), w);
        }
        let back = r.drop_after(2.0);
        assert!(
            !back.exact,
            "reads 3..8 left the tail before the end was known"
        );
        assert_eq!(back.tokens, TAIL_CAP as u64);
        assert!(r.drop_after(100.0).exact);
    }

    #[test]
    fn two_chunks_of_one_read_still_have_a_second_token() {
        let mut r = RequestTrack::new(0.0);
        let none = WindowBounds::default();
        assert_eq!(r.second_token_at(), None);
        r.on_chunk(ev(1.0, C, None), none);
        assert_eq!(r.second_token_at(), None, "one chunk: no second token");
        // the second event came in the same read: same timestamp, gap 0
        r.on_chunk(ev(1.0, C, None), none);
        assert_eq!(r.second_token_at(), Some(1.0));
        r.on_chunk(ev(2.0, C, None), none);
        assert_eq!(r.second_token_at(), Some(1.0), "only the second counts");
        let s = r.to_sample(0.0, none);
        assert_eq!(s.time_to_second_token, Some(0.0), "a true zero is kept");
    }

    #[test]
    fn one_chunk_leaves_time_to_second_token_unmeasured() {
        let none = WindowBounds::default();
        let mut r = RequestTrack::new(0.0);
        assert_eq!(r.to_sample(0.0, none).time_to_second_token, None);
        r.on_chunk(ev(1.0, C, None), none);
        assert_eq!(r.to_sample(0.0, none).time_to_second_token, None);
        r.on_chunk(ev(1.25, C, None), none);
        assert_eq!(r.to_sample(0.0, none).time_to_second_token, Some(0.25));
    }

    #[test]
    fn counts_only_tokens_inside_the_window() {
        let mut r = RequestTrack::new(0.0);
        let none = WindowBounds::default();
        let mut role = ev(0.5, N, Some(0));
        role.prompt_tokens = Some(78);
        r.on_chunk(role, none);
        r.on_chunk(ev(1.0, C, Some(3)), none);
        r.on_chunk(ev(2.0, C, Some(6)), win(1.5, None));
        r.on_chunk(ev(3.0, C, Some(9)), win(1.5, Some(2.5)));
        assert_eq!(r.window_tokens, 3);
        assert_eq!(r.last_window_t, Some(2.0));
        let s = r.to_sample(1.5, win(1.5, Some(2.5)));
        assert_eq!(s.output_tokens, 9);
        assert_eq!(s.ttft, 1.0);
        assert_eq!(s.ttfo, 1.0);
        assert_eq!(s.input_tokens, 78);
        assert!((s.inter_token_latency_avg - 2.0 / 8.0).abs() < 1e-12);
        assert_eq!(s.chunk_inter_token_latency_avg, 1.0);
        assert!(s.in_window);
        assert!(!s.first_token_in_window);
        assert!(!s.completed);
        assert_eq!(s.latency, 0.0);
        assert!(r.has_continuous_usage());
    }

    #[test]
    fn tokens_on_empty_delta_chunks_are_counted_and_timed() {
        // vLLM with continuous usage: a token that ends inside a multi-byte
        // character arrives on a chunk whose delta is "" while usage grows.
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, Some(10.0));
        r.on_chunk(ev(0.1, N, Some(0)), w); // role chunk
        r.on_chunk(ev(1.0, N, Some(1)), w); // first half of a character
        r.on_chunk(ev(1.1, C, Some(2)), w); // the character
        r.on_chunk(ev(1.2, N, Some(3)), w);
        r.on_chunk(ev(1.3, N, Some(4)), w);
        r.on_chunk(ev(1.4, C, Some(5)), w);
        r.on_chunk(final_usage(1.5, 5, 9), w);
        assert_eq!(r.window_tokens, 5);
        assert_eq!(r.output_tokens(), 5);
        assert_eq!(r.last_window_t, Some(1.4));
        let s = r.to_sample(0.0, w);
        assert_eq!(s.ttft, 1.0, "the first token is the empty-delta chunk");
        assert_eq!(s.ttfo, 1.1);
        assert!(r.has_continuous_usage());
    }

    #[test]
    fn first_usage_on_a_text_chunk_replaces_the_chunk_estimate() {
        // A proxy that puts cumulative usage on the last text chunk only.
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, Some(10.0));
        r.on_chunk(ev(1.0, C, None), w);
        r.on_chunk(ev(2.0, C, None), w);
        r.on_chunk(ev(3.0, C, Some(3)), w);
        assert_eq!(r.window_tokens, 3, "3 real tokens, not 2 chunks + 3");
        assert_eq!(r.output_tokens(), 3);
        assert!(
            !r.has_continuous_usage(),
            "one usage value is not continuous"
        );
        assert!(r.has_usage());
        // Usage starting mid-stream and then continuing.
        let mut q = RequestTrack::new(0.0);
        q.on_chunk(ev(1.0, C, None), w);
        q.on_chunk(ev(2.0, C, Some(4)), w);
        q.on_chunk(ev(3.0, C, Some(6)), w);
        assert_eq!(q.window_tokens, 6);
        assert!(q.has_continuous_usage());
    }

    #[test]
    fn final_usage_is_not_timed_and_chunks_count_without_usage() {
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, Some(10.0));
        r.on_chunk(ev(1.0, C, None), w);
        r.on_chunk(ev(2.0, C, None), w);
        assert_eq!(r.window_tokens, 2);
        r.on_chunk(final_usage(2.1, 5, 10), w);
        assert_eq!(r.window_tokens, 2);
        assert_eq!(r.window_chunks, 2);
        assert_eq!(r.output_tokens(), 5);
        assert!(!r.has_continuous_usage());
        r.mark_completed();
        let s = r.to_sample(0.0, w);
        assert_eq!(s.latency, 2.0);
        assert_eq!(s.e2e_output_tps_per_user, 2.5);
    }

    #[test]
    fn pending_chunks_are_counted_when_start_precedes_them() {
        let mut r = RequestTrack::new(0.0);
        r.on_chunk(ev(1.0, C, Some(2)), WindowBounds::default());
        // The monitor declared the window at 0.9 just after that chunk was read.
        r.settle(win(0.9, None));
        assert_eq!(r.window_tokens, 2);
        let mut q = RequestTrack::new(0.0);
        q.on_chunk(ev(1.0, C, Some(2)), WindowBounds::default());
        q.settle(win(1.1, None));
        assert_eq!(q.window_tokens, 0);
    }

    #[test]
    fn several_chunks_before_the_open_is_published_all_count() {
        // The window start (1.0) is taken, then chunks arrive before it is
        // published: all of them after 1.0 count, none overwrites another.
        let mut r = RequestTrack::new(0.0);
        let none = WindowBounds::default();
        r.on_chunk(ev(0.9, C, Some(2)), none);
        r.on_chunk(ev(1.01, C, Some(4)), none);
        r.on_chunk(ev(1.02, C, Some(6)), none);
        r.on_chunk(ev(1.03, C, Some(8)), none);
        r.on_chunk(ev(1.04, C, Some(9)), win(1.0, None));
        assert_eq!(r.window_tokens, 7);
    }

    #[test]
    fn tokens_read_together_share_the_gap_before_them() {
        let mut r = RequestTrack::new(0.0);
        let w = win(1.0, Some(10.0));
        let mut gaps = Vec::new();
        let mut feed = |r: &mut RequestTrack, e: ChunkEvent| {
            if let Some(g) = r.on_chunk(e, w).gaps {
                gaps.push(g);
            }
        };
        feed(&mut r, ev(0.5, C, Some(1))); // before the window: no gap
        feed(&mut r, ev(1.5, C, Some(2))); // gap straddles the start: none
        feed(&mut r, ev(1.6, C, Some(3)));
        feed(&mut r, ev(1.9, C, Some(4))); // one read of three chunks
        feed(&mut r, ev(1.9, C, Some(5)));
        feed(&mut r, ev(1.9, C, Some(6)));
        feed(&mut r, ev(2.0, C, Some(9))); // spec decoding: 3 tokens in one chunk
        if let Some(g) = r.settle(w) {
            gaps.push(g);
        }
        let want = [(0.1, 1), (0.1, 3), (0.1 / 3.0, 3)];
        assert_eq!(gaps.len(), want.len(), "{gaps:?}");
        for (g, (each, count)) in gaps.iter().zip(want) {
            assert!((g.each - each).abs() < 1e-9 && g.count == count, "{gaps:?}");
        }
        let s = r.to_sample(1.0, w);
        assert!((s.window_inter_token_latency_avg - 0.5 / 7.0).abs() < 1e-9);
    }

    #[test]
    fn usage_going_backwards_falls_back_to_chunks() {
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, None);
        r.on_chunk(ev(1.0, C, Some(5)), w);
        r.on_chunk(ev(2.0, C, Some(3)), w);
        r.on_chunk(ev(3.0, C, Some(900)), w);
        assert_eq!(r.usage_anomaly(), Some(UsageAnomaly::WentBackwards));
        assert_eq!(r.output_tokens(), 3);
        assert!(!r.has_usage() && !r.has_continuous_usage());
        let mut q = RequestTrack::new(0.0);
        let mut bad = ev(1.0, C, None);
        bad.usage_invalid = true;
        q.on_chunk(bad, w);
        q.on_chunk(ev(2.0, C, Some(50)), w);
        assert_eq!(q.usage_anomaly(), Some(UsageAnomaly::Invalid));
        assert_eq!(q.window_tokens, 2);
    }

    #[test]
    fn reasoning_and_content_channels() {
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, None);
        r.on_chunk(ev(1.0, Channel::Reasoning, Some(1)), w);
        r.on_chunk(ev(1.1, N, Some(2)), w); // part of a reasoning character
        r.on_chunk(ev(1.2, Channel::Reasoning, Some(3)), w);
        r.on_chunk(ev(2.0, C, Some(4)), w);
        r.on_chunk(ev(2.1, C, Some(6)), w);
        assert_eq!(r.window_tokens, 6);
        assert_eq!(r.window_reasoning_tokens, 3);
        let s = r.to_sample(0.0, w);
        assert_eq!(s.ttft, 1.0);
        assert_eq!(s.ttfo, 2.0);
        assert_eq!(s.reasoning_tokens, 3);
        r.on_chunk(ev(2.2, Channel::Mixed, Some(7)), w);
        assert_eq!(r.mixed_chunks(), 1);
    }

    #[test]
    fn tool_call_tokens_are_their_own_channel_and_time() {
        // a few answer tokens, then a call: the name, an empty-delta token
        // inside an argument character, then arguments
        let mut r = RequestTrack::new(0.0);
        let w = win(0.0, None);
        r.on_chunk(ev(1.0, C, Some(2)), w);
        r.on_chunk(ev(1.5, Channel::ToolCall, Some(4)), w);
        r.on_chunk(ev(1.6, N, Some(5)), w);
        r.on_chunk(ev(1.7, Channel::ToolCall, Some(9)), w);
        assert_eq!((r.window_tokens, r.window_tool_call_tokens), (9, 7));
        assert_eq!(r.window_reasoning_tokens, 0);
        let s = r.to_sample(0.0, w);
        assert_eq!((s.ttft, s.ttfo, s.ttftc), (1.0, 1.0, Some(1.5)));
        assert_eq!((s.output_tokens, s.tool_call_tokens), (9, 7));
        // a late window end takes the call's tokens back with the rest
        r.settle(w);
        r.drop_after(1.55);
        assert_eq!((r.window_tokens, r.window_tool_call_tokens), (4, 2));
        // without usage: one token per tool-call chunk
        let mut q = RequestTrack::new(0.0);
        q.on_chunk(ev(0.5, Channel::ToolCall, None), w);
        q.on_chunk(ev(0.6, Channel::ToolCall, None), w);
        let s = q.to_sample(0.0, w);
        assert_eq!((s.tool_call_tokens, s.ttfo, s.ttftc), (2, 0.0, Some(0.5)));
        // usage only at the end, 2 tokens a chunk (speculative decoding):
        // the call keeps its share of the chunks, on the usage's scale
        let mut m = RequestTrack::new(0.0);
        m.on_chunk(ev(0.5, C, None), w);
        m.on_chunk(ev(0.6, Channel::ToolCall, None), w);
        m.on_chunk(ev(0.7, Channel::ToolCall, None), w);
        m.on_chunk(ev(0.8, Channel::ToolCall, None), w);
        m.on_chunk(final_usage(0.9, 8, 20), w);
        assert!(!m.has_continuous_usage());
        let s = m.to_sample(0.0, w);
        assert_eq!((s.output_tokens, s.tool_call_tokens), (8, 6));
        // a request with no call has none, and its JSON carries no tool key
        let plain = RequestTrack::new(0.0).to_sample(0.0, w);
        let json = serde_json::to_string(&plain).expect("serialises");
        assert!(plain.ttftc.is_none() && !json.contains("tool") && !json.contains("ttftc"));
    }
}
