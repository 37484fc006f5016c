//! Property-based fuzzing of the lean reader's HTTP/1.1 response decoder
//! (`ldb_core::http1`): arbitrary bytes never panic, the result does not
//! depend on where the reads were cut, and well-formed chunked or
//! `Content-Length` bodies come back byte for byte.

use ldb_core::http1::{BodyDecoder, Framing, HeadReader, Http1Error};
use proptest::prelude::*;

/// Everything one decode yields: the head (status, framing, close), the
/// body bytes, whether the body ended, and the first error as text.
#[derive(Debug, PartialEq)]
struct Decoded {
    head: Option<(u16, Framing, bool)>,
    body: Vec<u8>,
    done: bool,
    error: Option<Http1Error>,
}

/// Decode `wire` read in pieces cut at `cuts` (positions modulo the length),
/// then the end of the connection.
fn decode(wire: &[u8], cuts: &[usize]) -> Decoded {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| if wire.is_empty() { 0 } else { c % wire.len() })
        .collect();
    at.push(0);
    at.push(wire.len());
    at.sort_unstable();
    at.dedup();
    let mut out = Decoded {
        head: None,
        body: Vec::new(),
        done: false,
        error: None,
    };
    let mut reader = HeadReader::new();
    let mut dec: Option<BodyDecoder> = None;
    for w in at.windows(2) {
        let mut piece = &wire[w[0]..w[1]];
        if dec.is_none() {
            match reader.feed(piece) {
                Ok(None) => continue,
                Ok(Some((h, used))) => {
                    out.head = Some((h.status, h.framing, h.close));
                    dec = Some(BodyDecoder::new(h.framing));
                    piece = &piece[used..];
                }
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            }
        }
        let Some(d) = dec.as_mut() else { continue };
        if d.is_done() {
            break;
        }
        if let Err(e) = d.feed(piece, |b| out.body.extend_from_slice(b)) {
            out.error = Some(e);
            return out;
        }
    }
    if let Some(d) = dec.as_mut() {
        if let Err(e) = d.finish() {
            out.error = Some(e);
        }
        out.done = d.is_done();
    }
    out
}

fn chunked(parts: &[Vec<u8>], ext: bool) -> Vec<u8> {
    let mut v =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for p in parts.iter().filter(|p| !p.is_empty()) {
        let ext = if ext { ";name=value" } else { "" };
        v.extend_from_slice(format!("{:X}{ext}\r\n", p.len()).as_bytes());
        v.extend_from_slice(p);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

proptest! {
    #[test]
    fn any_bytes_never_panic_and_cuts_do_not_matter(
        wire in proptest::collection::vec(any::<u8>(), 0..2048),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = decode(&wire, &[]);
        prop_assert_eq!(decode(&wire, &cuts), whole);
    }

    #[test]
    fn a_valid_head_with_hostile_body_bytes_is_split_invariant(
        framing in prop_oneof![Just("transfer-encoding: chunked"), Just("content-length: 40"), Just("connection: close")],
        body in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'\r'), Just(b'\n'), Just(b'0'), Just(b'a')], 0..512),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut wire = format!("HTTP/1.1 200 OK\r\n{framing}\r\n\r\n").into_bytes();
        wire.extend_from_slice(&body);
        let whole = decode(&wire, &[]);
        prop_assert!(whole.head.is_some());
        prop_assert_eq!(decode(&wire, &cuts), whole);
    }

    #[test]
    fn chunked_bodies_come_back_whole(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
        ext in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..32),
    ) {
        let wire = chunked(&parts, ext);
        let d = decode(&wire, &cuts);
        prop_assert_eq!(d.error, None);
        prop_assert!(d.done);
        prop_assert_eq!(d.body, parts.concat());
    }

    #[test]
    fn content_length_bodies_come_back_whole(
        body in proptest::collection::vec(any::<u8>(), 0..2000),
        cuts in proptest::collection::vec(any::<usize>(), 0..32),
    ) {
        let mut wire = format!("HTTP/1.1 503 Busy\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        let d = decode(&wire, &cuts);
        prop_assert_eq!(d.head.map(|h| h.0), Some(503));
        prop_assert_eq!(d.error, None);
        prop_assert!(d.done);
        prop_assert_eq!(d.body, body);
    }

    #[test]
    fn a_chunked_body_cut_short_is_an_error(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..100), 1..10),
        keep in any::<usize>(),
    ) {
        let wire = chunked(&parts, false);
        let head_len = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
        let cut = head_len + keep % (wire.len() - head_len);
        let d = decode(&wire[..cut], &[]);
        prop_assert!(!d.done);
        prop_assert!(matches!(d.error, Some(Http1Error::Eof(_))), "{:?}", d.error);
    }
}
