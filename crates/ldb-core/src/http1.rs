//! An HTTP/1.1 response, sans I/O: feed the bytes read from a socket, get
//! the head once it is whole, then the body's bytes without its framing.
//!
//! This is the lean stream reader's decoder (plain `http://` servers). The
//! status line and header fields are parsed by `httparse`: it is small,
//! fast, well fuzzed and zero-copy, so nothing here re-implements the
//! header grammar. What no crate offers in a form the hot path can use is
//! the body side as a push decoder that hands out borrowed slices of the
//! caller's read buffer and keeps a few integers of state, so the chunked
//! (`Transfer-Encoding: chunked`), `Content-Length` and read-until-close
//! framings are written by hand below. Nothing here allocates per read; the
//! head alone is buffered (bounded by [`MAX_HEAD_BYTES`]).

use std::fmt;

/// The largest answer head taken (64 KiB). Real engines send a few hundred
/// bytes; a head that grows past this is a broken or hostile server.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The most header fields taken in one head.
pub const MAX_HEADERS: usize = 100;

/// The longest chunk-size line (size plus extensions) or trailer section.
const MAX_CHUNK_LINE: usize = 4 * 1024;

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Http1Error {
    /// The head grew past [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`] fields.
    HeadTooLarge,
    /// The head is not an HTTP/1.x response head.
    BadHead(String),
    /// The body's framing is broken (a bad chunk size, a missing CRLF).
    BadBody(&'static str),
    /// The connection ended before the response did.
    Eof(&'static str),
}

impl fmt::Display for Http1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Http1Error::HeadTooLarge => write!(
                f,
                "the answer's header is larger than the client accepts (over {} KiB or {MAX_HEADERS} fields)",
                MAX_HEAD_BYTES / 1024
            ),
            Http1Error::BadHead(why) => write!(f, "not an HTTP/1.1 answer head ({why})"),
            Http1Error::BadBody(why) => write!(f, "broken body framing: {why}"),
            Http1Error::Eof(what) => write!(f, "connection closed {what}"),
        }
    }
}

impl std::error::Error for Http1Error {}

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length: n`.
    Length(u64),
    /// Neither: the body runs until the server closes the connection.
    UntilClose,
}

/// What the head says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// How the body is delimited.
    pub framing: Framing,
    /// The connection cannot carry another request after this one
    /// (`Connection: close`, HTTP/1.0 without keep-alive, a body read until close).
    pub close: bool,
    /// The `Location` field of a redirect, if any (cut at 300 bytes).
    pub location: Option<String>,
}

/// Collects the head of one response across reads.
#[derive(Debug, Default)]
pub struct HeadReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for the end of the head.
    scanned: usize,
}

impl HeadReader {
    /// A reader with an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `bytes`. When the head is complete, returns it with how many of
    /// `bytes` it used (the rest is body). Informational answers (`1xx`)
    /// are skipped.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<(Head, usize)>, Http1Error> {
        let mut used = 0;
        loop {
            let rest = &bytes[used..];
            let before = self.buf.len();
            let room = MAX_HEAD_BYTES.saturating_sub(before);
            // Only as much as can still belong to a head is copied.
            let take = rest.len().min(room + 1);
            self.buf.extend_from_slice(&rest[..take]);
            let Some(end) = head_end(&self.buf, self.scanned) else {
                if self.buf.len() > MAX_HEAD_BYTES {
                    return Err(Http1Error::HeadTooLarge);
                }
                self.scanned = self.buf.len().saturating_sub(3);
                return Ok(None);
            };
            if end > MAX_HEAD_BYTES {
                return Err(Http1Error::HeadTooLarge);
            }
            let head = parse_head(&self.buf[..end])?;
            used += end - before;
            self.buf.clear();
            self.scanned = 0;
            match head {
                Some(h) => {
                    self.buf = Vec::new();
                    return Ok(Some((h, used)));
                }
                // A 1xx answer: the real one follows.
                None if used < bytes.len() => {}
                None => return Ok(None),
            }
        }
    }

    /// Bytes held for an incomplete head.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// The end of the head (just past its blank line), searching from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr::memchr(b'\n', &buf[at..]) {
        let nl = at + i;
        match buf.get(nl + 1) {
            Some(b'\n') => return Some(nl + 2),
            Some(b'\r') if buf.get(nl + 2) == Some(&b'\n') => return Some(nl + 3),
            _ => at = nl + 1,
        }
    }
    None
}

/// Parse a whole head; `None` for an informational (1xx) answer.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, Http1Error> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(Http1Error::BadHead("incomplete".into()));
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Http1Error::HeadTooLarge),
        Err(e) => return Err(Http1Error::BadHead(e.to_string())),
    }
    let status = resp.code.unwrap_or(0);
    if (100..200).contains(&status) && status != 101 {
        return Ok(None);
    }
    let http10 = resp.version == Some(0);
    let mut chunked = false;
    let mut length: Option<u64> = None;
    let mut close = http10;
    let mut location = None;
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding decides; only `chunked` is framing we read.
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default();
            chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| Http1Error::BadHead("invalid content-length".into()))?;
            if length.is_some_and(|l| l != v) {
                return Err(Http1Error::BadHead("conflicting content-length".into()));
            }
            length = Some(v);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|b| *b == b',') {
                let t = token.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if http10 && t.eq_ignore_ascii_case(b"keep-alive") {
                    close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("location") {
            let v = String::from_utf8_lossy(h.value);
            location = Some(v.chars().take(300).collect());
        }
    }
    // No body for these, whatever the fields say.
    let framing = if status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        close = true;
        Framing::UntilClose
    };
    Ok(Some(Head {
        status,
        framing,
        close,
        location,
    }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a chunk-size line: the size so far, whether a digit was seen,
    /// whether extensions began, the line's length so far.
    Size {
        size: u64,
        digits: bool,
        ext: bool,
        len: usize,
    },
    /// After the `\r` of a size line.
    SizeLf {
        size: u64,
    },
    /// Inside a chunk's data (or a `Content-Length` body): bytes left.
    Data {
        left: u64,
        chunked: bool,
    },
    /// After a chunk's data: its CRLF.
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines until a blank one. `line` is the
    /// current line's length, `total` the section's.
    Trailer {
        line: usize,
        total: usize,
        cr: bool,
    },
    /// Until the connection closes.
    UntilClose,
    Done,
    Failed,
}

/// Removes the framing of a response body, one read at a time.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
}

impl BodyDecoder {
    /// A decoder for a body framed as `framing`.
    pub fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Chunked => State::Size {
                size: 0,
                digits: false,
                ext: false,
                len: 0,
            },
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Data {
                left: n,
                chunked: false,
            },
            Framing::UntilClose => State::UntilClose,
        };
        BodyDecoder { state }
    }

    /// Take `bytes`, calling `on_data` with each run of body bytes. Returns
    /// how many of `bytes` belong to this body (all of them unless it ended
    /// inside them).
    pub fn feed(
        &mut self,
        bytes: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<usize, Http1Error> {
        let mut at = 0;
        while at < bytes.len() {
            match self.state {
                State::Done => return Ok(at),
                State::Failed => return Err(Http1Error::BadBody("read after an error")),
                State::UntilClose => {
                    on_data(&bytes[at..]);
                    return Ok(bytes.len());
                }
                State::Data { left, chunked } => {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len() - at);
                    on_data(&bytes[at..at + n]);
                    at += n;
                    let left = left - n as u64;
                    self.state = match (left, chunked) {
                        (0, true) => State::DataCr,
                        (0, false) => State::Done,
                        _ => State::Data { left, chunked },
                    };
                }
                _ => {
                    let b = bytes[at];
                    at += 1;
                    if let Err(e) = self.step(b) {
                        self.state = State::Failed;
                        return Err(e);
                    }
                }
            }
        }
        Ok(at)
    }

    /// One byte of chunk framing.
    fn step(&mut self, b: u8) -> Result<(), Http1Error> {
        self.state = match self.state {
            State::Size {
                size,
                digits,
                ext,
                len,
            } => {
                if len >= MAX_CHUNK_LINE {
                    return Err(Http1Error::BadBody("chunk-size line too long"));
                }
                let len = len + 1;
                match b {
                    b'\r' if digits => State::SizeLf { size },
                    b'\n' if digits => self.after_size(size),
                    _ if ext => State::Size {
                        size,
                        digits,
                        ext,
                        len,
                    },
                    b';' | b' ' | b'\t' if digits => State::Size {
                        size,
                        digits,
                        ext: true,
                        len,
                    },
                    _ => {
                        let d = (b as char)
                            .to_digit(16)
                            .ok_or(Http1Error::BadBody("invalid chunk size"))?;
                        // 2^52 bytes: far past any real chunk, and no overflow.
                        if size >= 1 << 48 {
                            return Err(Http1Error::BadBody("chunk size too large"));
                        }
                        State::Size {
                            size: size * 16 + u64::from(d),
                            digits: true,
                            ext,
                            len,
                        }
                    }
                }
            }
            State::SizeLf { size } => match b {
                b'\n' => self.after_size(size),
                _ => return Err(Http1Error::BadBody("no LF after the chunk size")),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                // A bare LF is taken, as most readers do.
                b'\n' => Self::next_size(),
                _ => return Err(Http1Error::BadBody("no CRLF after chunk data")),
            },
            State::DataLf => match b {
                b'\n' => Self::next_size(),
                _ => return Err(Http1Error::BadBody("no CRLF after chunk data")),
            },
            State::Trailer { line, total, cr } => {
                if total >= MAX_CHUNK_LINE {
                    return Err(Http1Error::BadBody("trailer section too long"));
                }
                match b {
                    b'\n' if line == 0 => State::Done,
                    b'\n' => State::Trailer {
                        line: 0,
                        total: total + 1,
                        cr: false,
                    },
                    b'\r' if !cr => State::Trailer {
                        line,
                        total: total + 1,
                        cr: true,
                    },
                    _ => State::Trailer {
                        line: line + 1,
                        total: total + 1,
                        cr: false,
                    },
                }
            }
            s @ (State::Data { .. } | State::UntilClose | State::Done | State::Failed) => s,
        };
        Ok(())
    }

    fn next_size() -> State {
        State::Size {
            size: 0,
            digits: false,
            ext: false,
            len: 0,
        }
    }

    fn after_size(&self, size: u64) -> State {
        if size == 0 {
            State::Trailer {
                line: 0,
                total: 0,
                cr: false,
            }
        } else {
            State::Data {
                left: size,
                chunked: true,
            }
        }
    }

    /// The whole body has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The connection ended: fine for a body read until close, an error
    /// for any other body not yet complete.
    pub fn finish(&mut self) -> Result<(), Http1Error> {
        match self.state {
            State::Done => Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                Ok(())
            }
            State::Data { chunked: false, .. } => Err(Http1Error::Eof(
                "before the end of the answer (Content-Length)",
            )),
            State::Size { .. } | State::SizeLf { .. } => {
                Err(Http1Error::Eof("inside a chunk-size line"))
            }
            State::Data { .. } | State::DataCr | State::DataLf => {
                Err(Http1Error::Eof("inside a chunk"))
            }
            State::Trailer { .. } => Err(Http1Error::Eof("inside the trailer")),
            State::Failed => Err(Http1Error::BadBody("read after an error")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8]) -> Result<Option<(Head, usize)>, Http1Error> {
        HeadReader::new().feed(bytes)
    }

    fn body(framing: Framing, bytes: &[u8]) -> (Vec<u8>, Result<usize, Http1Error>, bool) {
        let mut d = BodyDecoder::new(framing);
        let mut out = Vec::new();
        let r = d.feed(bytes, |p| out.extend_from_slice(p));
        (out, r, d.is_done())
    }

    #[test]
    fn a_chunked_sse_head_and_its_body() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nx-t: 1\r\n\r\n";
        let (h, used) = head(wire).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Chunked);
        assert!(!h.close);
        let (out, r, done) = body(h.framing, &wire[used..]);
        assert_eq!(out, b"helloabc");
        assert_eq!(r.unwrap(), wire.len() - used);
        assert!(done);
    }

    #[test]
    fn head_fields_decide_framing_and_reuse() {
        let (h, _) = head(b"HTTP/1.1 500 X\r\ncontent-length: 4\r\nconnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.framing, h.close), (Framing::Length(4), true));
        let (h, _) = head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let (h, _) =
            head(b"HTTP/1.1 302 Found\r\nLocation: https://x/y\r\ncontent-length: 0\r\n\r\n")
                .unwrap()
                .unwrap();
        assert_eq!(h.location.as_deref(), Some("https://x/y"));
        // An informational answer is skipped.
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let (h, used) = head(wire).unwrap().unwrap();
        assert_eq!((h.status, used), (204, wire.len()));
        assert!(head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
        assert!(head(b"garbage\r\n\r\n").is_err());
    }

    #[test]
    fn an_endless_head_stops_at_the_cap() {
        let mut r = HeadReader::new();
        let line = b"x-junk: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n".repeat(100);
        assert!(r.feed(b"HTTP/1.1 200 OK\r\n").unwrap().is_none());
        let mut failed = None;
        for _ in 0..1000 {
            match r.feed(&line) {
                Ok(None) => assert!(r.buffered() <= MAX_HEAD_BYTES + line.len()),
                Ok(Some(_)) => panic!("no head expected"),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        assert_eq!(failed, Some(Http1Error::HeadTooLarge));
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "a: b\r\n".repeat(150));
        assert_eq!(head(many.as_bytes()), Err(Http1Error::HeadTooLarge));
    }

    #[test]
    fn eof_inside_a_body_is_an_error_except_until_close() {
        let mut d = BodyDecoder::new(Framing::Chunked);
        d.feed(b"5\r\nhel", |_| {}).unwrap();
        assert!(d.finish().is_err());
        let mut d = BodyDecoder::new(Framing::UntilClose);
        d.feed(b"anything", |_| {}).unwrap();
        assert!(d.finish().is_ok());
        let mut d = BodyDecoder::new(Framing::Length(10));
        d.feed(b"12345", |_| {}).unwrap();
        assert!(d.finish().is_err());
    }

    #[test]
    fn bad_framing_is_an_error_and_bytes_past_the_end_are_left() {
        assert!(body(Framing::Chunked, b"zz\r\n").1.is_err());
        assert!(body(Framing::Chunked, b"2\r\nabX").1.is_err());
        assert!(body(Framing::Chunked, b"\r\n").1.is_err());
        let (out, r, done) = body(Framing::Length(3), b"abcdef");
        assert_eq!(
            (out.as_slice(), r.unwrap(), done),
            (b"abc".as_slice(), 3, true)
        );
        let (_, r, done) = body(Framing::Chunked, b"0\r\n\r\nHTTP");
        assert_eq!((r.unwrap(), done), (5, true));
        let long = format!("1{}\r\n", "0".repeat(20));
        assert!(body(Framing::Chunked, long.as_bytes()).1.is_err());
    }
}
