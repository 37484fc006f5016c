//! Server-sent events, sans I/O: feed body bytes, get `data` payloads out.
//!
//! Written by hand (no crate) because it sits on the per-token hot path: one
//! buffer per stream, no allocation per event, and payloads are handed out as
//! borrowed slices. Comment lines (`:` keep-alives), `event:`/`id:` fields and
//! blank lines are skipped; each `data:` line is delivered as one payload, which
//! is how every OpenAI-compatible server frames its chunks.

/// Incremental SSE line splitter for one response body.
///
/// Complete lines are handed out straight from the bytes passed to
/// [`feed`](Self::feed); only an unterminated last line is copied into the
/// buffer, so the buffer never holds more than one line and a read is not
/// copied as a whole.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived yet.
    buf: Vec<u8>,
    /// A line grew past [`MAX_LINE_BYTES`]: the body is not an event stream
    /// this client can read, and nothing more is taken from it.
    overflowed: bool,
}

/// The longest line taken (1 MiB). A token chunk is a few hundred bytes and
/// a final chunk with timings a few KB; a line without an end that grows past
/// this is a broken or hostile server, and the stream fails instead of the
/// client holding it all.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// A buffer that grew past this (one very long line) is released once that
/// line is done, so one huge event does not pin memory for the whole stream.
const KEEP_CAPACITY: usize = 16 * 1024;

impl SseDecoder {
    /// A decoder with an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append body bytes and call `on_data` with each complete `data:` payload.
    pub fn feed(&mut self, bytes: &[u8], mut on_data: impl FnMut(&[u8])) {
        if self.overflowed {
            return;
        }
        let mut rest = bytes;
        if !self.buf.is_empty() {
            // Finish the line begun in an earlier read.
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                self.keep(rest);
                return;
            };
            if self.buf.len() + nl > MAX_LINE_BYTES {
                self.overflow();
                return;
            }
            self.buf.extend_from_slice(&rest[..nl]);
            rest = &rest[nl + 1..];
            deliver(&self.buf, &mut on_data);
            self.buf.clear();
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            }
        }
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if nl > MAX_LINE_BYTES {
                self.overflow();
                return;
            }
            deliver(&rest[..nl], &mut on_data);
            rest = &rest[nl + 1..];
        }
        self.keep(rest);
    }

    /// Hold the start of an unfinished line, unless that makes it too long.
    fn keep(&mut self, part: &[u8]) {
        if self.buf.len() + part.len() > MAX_LINE_BYTES {
            self.overflow();
        } else {
            self.buf.extend_from_slice(part);
        }
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        self.buf = Vec::new();
    }

    /// A line longer than [`MAX_LINE_BYTES`] arrived; the decoder has
    /// stopped and the stream should be failed.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Deliver a final unterminated line, if the body ended without a newline.
    pub fn finish(&mut self, mut on_data: impl FnMut(&[u8])) {
        if self.overflowed {
            return;
        }
        deliver(&self.buf, &mut on_data);
        self.buf = Vec::new();
    }

    /// Bytes held for an incomplete line (bounded by the longest line).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// Hand out `line` (without its `\n`) if it is a `data:` line.
fn deliver(line: &[u8], on_data: &mut impl FnMut(&[u8])) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if let Some(payload) = data_payload(line) {
        on_data(payload);
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
    fn an_endless_line_stops_the_decoder_at_the_cap() {
        // 50 MB without a newline, in 64 KB reads: the decoder gives up at
        // 1 MiB instead of holding it all, and delivers nothing more.
        let mut d = SseDecoder::new();
        let piece = vec![b'x'; 64 * 1024];
        let mut n = 0;
        d.feed(b"data: {\"ok\":1}\n", |_| n += 1);
        for _ in 0..(50 * 1024 / 64) {
            d.feed(&piece, |_| n += 1);
            assert!(d.buffered() <= MAX_LINE_BYTES);
        }
        d.feed(b"\ndata: {\"late\":1}\n", |_| n += 1);
        d.finish(|_| n += 1);
        assert!(d.overflowed());
        assert_eq!(n, 1, "only the event before the endless line");
        // One long line inside a single read is caught too.
        let mut d = SseDecoder::new();
        let mut long = b"data: ".to_vec();
        long.extend(std::iter::repeat_n(b'y', MAX_LINE_BYTES + 1));
        long.push(b'\n');
        d.feed(&long, |_| n += 1);
        assert!(d.overflowed());
    }

    #[test]
    fn a_long_line_under_the_cap_is_delivered() {
        let mut line = b"data: ".to_vec();
        line.extend(std::iter::repeat_n(b'z', MAX_LINE_BYTES - 10));
        line.push(b'\n');
        let (a, b) = line.split_at(line.len() / 2);
        let out = collect(&[a, b]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), MAX_LINE_BYTES - 10);
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

    #[test]
    fn only_the_partial_line_is_buffered() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        // Every read ends inside a line, as under backlog.
        for _ in 0..10_000 {
            d.feed(b"data: {\"x\":1}\n\ndata: {\"y\"", |p| out.push(p.len()));
            d.feed(b":2}\n\ndata: {\"z", |p| out.push(p.len()));
            d.feed(b"\":3}\n\n", |p| out.push(p.len()));
        }
        assert_eq!(out.len(), 30_000);
        assert_eq!(d.buffered(), 0);
        assert!(d.buf.capacity() <= 64, "{}", d.buf.capacity());
        // One huge line is released once it is complete.
        let big = vec![b'x'; 1 << 19];
        d.feed(b"data: ", |_| {});
        d.feed(&big, |_| {});
        let mut n = 0;
        d.feed(b"\n", |p| n = p.len());
        assert_eq!(n, 1 << 19);
        assert!(d.buf.capacity() <= KEEP_CAPACITY);
    }
}
