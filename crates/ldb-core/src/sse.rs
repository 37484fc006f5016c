//! Server-sent events, sans I/O: feed body bytes, get `data` payloads out.
//!
//! Written by hand (no crate) because it sits on the per-token hot path: one
//! buffer per stream, no allocation per event, and payloads are handed out as
//! borrowed slices. Comment lines (`:` keep-alives), `event:`/`id:` fields and
//! blank lines are skipped; each `data:` line is delivered as one payload, which
//! is how every OpenAI-compatible server frames its chunks.

/// Incremental SSE line splitter for one response body.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    pos: usize,
}

impl SseDecoder {
    /// A decoder with an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append body bytes and call `on_data` with each complete `data:` payload.
    pub fn feed(&mut self, bytes: &[u8], mut on_data: impl FnMut(&[u8])) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
        while let Some(nl) = memchr::memchr(b'\n', &self.buf[self.pos..]) {
            let end = self.pos + nl;
            let mut line = &self.buf[self.pos..end];
            self.pos = end + 1;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if let Some(payload) = data_payload(line) {
                on_data(payload);
            }
        }
        if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Deliver a final unterminated line, if the body ended without a newline.
    pub fn finish(&mut self, mut on_data: impl FnMut(&[u8])) {
        let line = &self.buf[self.pos..];
        if let Some(payload) = data_payload(line) {
            on_data(payload);
        }
        self.buf.clear();
        self.pos = 0;
    }

    /// Bytes held for an incomplete line (bounded by the longest line).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }
}

fn data_payload(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"data:")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, |p| out.push(String::from_utf8_lossy(p).into_owned()));
        }
        d.finish(|p| out.push(String::from_utf8_lossy(p).into_owned()));
        out
    }

    #[test]
    fn splits_events_across_arbitrary_boundaries() {
        let body = b"data: {\"a\":1}\n\n: ping\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let whole = collect(&[body]);
        assert_eq!(whole, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        for split in 1..body.len() {
            let (a, b) = body.split_at(split);
            assert_eq!(collect(&[a, b]), whole, "split at {split}");
        }
    }

    #[test]
    fn unterminated_last_line_is_delivered_on_finish() {
        assert_eq!(collect(&[b"data: [DONE]"]), vec!["[DONE]"]);
    }

    #[test]
    fn buffer_stays_bounded_over_a_long_stream() {
        let mut d = SseDecoder::new();
        let mut n = 0;
        for _ in 0..100_000 {
            d.feed(b"data: {\"x\":1}\n\n", |_| n += 1);
        }
        assert_eq!(n, 100_000);
        assert_eq!(d.buffered(), 0);
        assert!(d.buf.capacity() < 256 * 1024);
    }
}
