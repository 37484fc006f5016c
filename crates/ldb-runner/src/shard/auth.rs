//! Who may join a run: the shared secret proved without sending it (HMAC-SHA-256
//! of a fresh leader challenge, bound to the joiner's index and flag digest),
//! and the digest of the benchmark flags every shard must share.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// A fresh challenge: 32 random bytes, hex.
pub(crate) fn nonce() -> String {
    let bytes: [u8; 32] = rand::random();
    hex(&bytes)
}

/// The proof a joiner sends: HMAC-SHA-256 keyed with the secret over the
/// challenge, its index and its flag digest (so a proof cannot be replayed
/// for another index or other flags).
pub(crate) fn proof(secret: &str, nonce: &str, index: u32, flags_digest: &str) -> String {
    hex(&mac(secret, nonce, index, flags_digest)
        .finalize()
        .into_bytes())
}

/// True when `proof_hex` is the right proof (compared in constant time).
pub(crate) fn verify(
    secret: &str,
    nonce: &str,
    index: u32,
    flags_digest: &str,
    proof_hex: &str,
) -> bool {
    let Some(bytes) = unhex(proof_hex) else {
        return false;
    };
    mac(secret, nonce, index, flags_digest)
        .verify_slice(&bytes)
        .is_ok()
}

fn mac(secret: &str, nonce: &str, index: u32, flags_digest: &str) -> HmacSha256 {
    #[allow(clippy::expect_used, reason = "HMAC accepts keys of every length")]
    let mut m = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    for part in [nonce, &index.to_string(), flags_digest] {
        m.update(part.as_bytes());
        m.update(&[0]);
    }
    m
}

/// SHA-256 of the benchmark flags that must match across shards (their
/// canonical JSON, hex).
pub fn flags_digest(flags: &serde_json::Value) -> String {
    hex(&Sha256::digest(flags.to_string().as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_right_secret_verifies_and_nothing_else_does() {
        let n = nonce();
        let p = proof("s3cret", &n, 2, "abc");
        assert!(verify("s3cret", &n, 2, "abc", &p));
        assert!(!verify("other", &n, 2, "abc", &p), "wrong secret");
        assert!(!verify("s3cret", &nonce(), 2, "abc", &p), "other challenge");
        assert!(!verify("s3cret", &n, 3, "abc", &p), "other index");
        assert!(!verify("s3cret", &n, 2, "abd", &p), "other flags");
        assert!(!verify("s3cret", &n, 2, "abc", "zz"), "not hex");
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        // Key "Jefe", data "what do ya want for nothing?".
        let mut m = HmacSha256::new_from_slice(b"Jefe").expect("key");
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_digest_follows_the_flags() {
        let a = flags_digest(&serde_json::json!({"duration": 4}));
        assert_eq!(a.len(), 64);
        assert_ne!(a, flags_digest(&serde_json::json!({"duration": 5})));
    }
}
