//! Every frame after the join is sealed: `seq (8 bytes, big-endian) ‖
//! payload ‖ HMAC-SHA-256(key, seq ‖ payload)`, with one key per direction
//! of one session (`auth::session_keys`) and the sequence counting up from
//! 0 in each direction. A changed byte fails the MAC; a frame played again,
//! left out or moved carries a sequence other than the one expected; a
//! frame of another session or the other direction fails the MAC. Frames
//! are authenticated, not encrypted (why: `docs/security.md`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes a seal adds to a payload.
pub(crate) const OVERHEAD: usize = 8 + 32;

/// Why a sealed frame was refused (a class, never the frame's bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SealError {
    /// Shorter than a sequence and a MAC.
    Short,
    /// The MAC does not match (changed, or not of this session and direction).
    Forged,
    /// A valid frame, out of its place (played again, reordered, or one lost).
    OutOfOrder,
}

impl std::fmt::Display for SealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SealError::Short => "a sealed frame too short to carry its MAC",
            SealError::Forged => "a frame whose MAC does not match (tampered or forged)",
            SealError::OutOfOrder => "a frame out of sequence (replayed or reordered)",
        })
    }
}

/// One direction's state: its key and the next sequence number.
pub(crate) struct Seal {
    key: [u8; 32],
    seq: u64,
}

impl Seal {
    pub(crate) fn new(key: [u8; 32]) -> Seal {
        Seal { key, seq: 0 }
    }

    /// The frame to send for `payload` (the sequence moves on).
    pub(crate) fn seal(&mut self, payload: &[u8]) -> Vec<u8> {
        let seq = self.seq.to_be_bytes();
        self.seq += 1;
        let mut out = Vec::with_capacity(payload.len() + OVERHEAD);
        out.extend_from_slice(&seq);
        out.extend_from_slice(payload);
        let tag = self.mac(&seq, payload).finalize().into_bytes();
        out.extend_from_slice(&tag);
        out
    }

    /// The payload of a received frame, if it is the next one of this
    /// direction and unchanged (the sequence moves on only then).
    pub(crate) fn open<'a>(&mut self, frame: &'a [u8]) -> Result<&'a [u8], SealError> {
        if frame.len() < OVERHEAD {
            return Err(SealError::Short);
        }
        let (seq, rest) = frame.split_at(8);
        let (payload, tag) = rest.split_at(rest.len() - 32);
        self.mac(seq, payload)
            .verify_slice(tag)
            .map_err(|_| SealError::Forged)?;
        let mut n = [0u8; 8];
        n.copy_from_slice(seq);
        if u64::from_be_bytes(n) != self.seq {
            return Err(SealError::OutOfOrder);
        }
        self.seq += 1;
        Ok(payload)
    }

    fn mac(&self, seq: &[u8], payload: &[u8]) -> HmacSha256 {
        #[allow(clippy::expect_used, reason = "HMAC accepts keys of every length")]
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(seq);
        m.update(payload);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Seal, Seal) {
        (Seal::new([7; 32]), Seal::new([7; 32]))
    }

    #[test]
    fn frames_open_in_order() {
        let (mut tx, mut rx) = pair();
        for p in [&b"one"[..], b"", b"three"] {
            let f = tx.seal(p);
            assert_eq!(rx.open(&f), Ok(p));
        }
    }

    #[test]
    fn a_changed_byte_anywhere_is_refused() {
        let (mut tx, _) = pair();
        let f = tx.seal(br#"{"type":"cell_start","concurrency":4}"#);
        for i in 0..f.len() {
            let mut bad = f.clone();
            bad[i] ^= 0x01;
            let (_, mut rx) = pair();
            assert!(rx.open(&bad).is_err(), "byte {i}");
        }
        let (_, mut rx) = pair();
        assert_eq!(rx.open(&f[..f.len() - 1]), Err(SealError::Forged));
        assert_eq!(rx.open(&f[..10]), Err(SealError::Short));
    }

    #[test]
    fn replayed_reordered_or_dropped_frames_are_refused() {
        let (mut tx, mut rx) = pair();
        let (a, b, c) = (tx.seal(b"a"), tx.seal(b"b"), tx.seal(b"c"));
        assert_eq!(rx.open(&a), Ok(&b"a"[..]));
        assert_eq!(rx.open(&a), Err(SealError::OutOfOrder), "replay");
        assert_eq!(rx.open(&c), Err(SealError::OutOfOrder), "reorder / drop");
        assert_eq!(rx.open(&b), Ok(&b"b"[..]), "a refusal does not move on");
    }

    #[test]
    fn another_key_or_direction_is_refused() {
        let mut tx = Seal::new([1; 32]);
        let mut rx = Seal::new([2; 32]);
        assert_eq!(rx.open(&tx.seal(b"x")), Err(SealError::Forged));
    }
}
