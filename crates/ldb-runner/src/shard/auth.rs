//! Who may take part in a run: both ends prove the shared secret without
//! sending it (HMAC-SHA-256 over both fresh nonces, the joiner's index and
//! flag digest, and a label naming the side, so a proof cannot be reflected
//! or replayed), then derive one key per direction for the frames that
//! follow (HKDF-SHA-256, `shard/seal.rs`). The reasoning is in
//! `docs/security.md`, "Coordinator port (shards)".

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Which side a proof or a key belongs to (part of what is MACed, so the
/// leader's proof is never a valid follower proof and the reverse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Leader,
    Follower,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Leader => "ldb-shard-2 leader",
            Side::Follower => "ldb-shard-2 follower",
        }
    }
}

/// What both proofs of one handshake are bound to.
#[derive(Debug, Clone)]
pub(crate) struct Binding<'a> {
    /// The follower's nonce (hex, from its join).
    pub follower_nonce: &'a str,
    /// The leader's nonce (hex, from its challenge).
    pub leader_nonce: &'a str,
    /// The joiner's `--shard-index`.
    pub index: u32,
    /// The joiner's flag digest.
    pub flags_digest: &'a str,
}

/// A fresh nonce: 32 random bytes, hex.
pub(crate) fn nonce() -> String {
    let bytes: [u8; 32] = rand::random();
    hex(&bytes)
}

/// True for a nonce as [`nonce`] makes them (64 hex digits).
pub(crate) fn is_nonce(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The proof `side` sends: HMAC-SHA-256 keyed with the secret.
pub(crate) fn proof(secret: &str, side: Side, b: &Binding<'_>) -> String {
    hex(&mac(secret, side, b).finalize().into_bytes())
}

/// True when `proof_hex` is `side`'s right proof (compared in constant time).
pub(crate) fn verify(secret: &str, side: Side, b: &Binding<'_>, proof_hex: &str) -> bool {
    let Some(bytes) = unhex(proof_hex) else {
        return false;
    };
    mac(secret, side, b).verify_slice(&bytes).is_ok()
}

fn mac(secret: &str, side: Side, b: &Binding<'_>) -> HmacSha256 {
    #[allow(clippy::expect_used, reason = "HMAC accepts keys of every length")]
    let mut m = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    let index = b.index.to_string();
    for part in [
        side.label(),
        b.follower_nonce,
        b.leader_nonce,
        &index,
        b.flags_digest,
    ] {
        m.update(part.as_bytes());
        m.update(&[0]);
    }
    m
}

/// The two frame keys of one session: (leader → follower, follower → leader).
/// HKDF-SHA-256 with the secret as input keying material, both nonces as
/// salt (fresh per connection, so no two sessions share a key) and the
/// direction and index as info.
pub(crate) fn session_keys(secret: &str, b: &Binding<'_>) -> ([u8; 32], [u8; 32]) {
    let salt = format!("{}{}", b.follower_nonce, b.leader_nonce);
    let hk = Hkdf::<Sha256>::new(Some(salt.as_bytes()), secret.as_bytes());
    let key = |dir: &str| {
        let mut k = [0u8; 32];
        let info = format!("ldb-shard-2 frames {dir} {}", b.index);
        #[allow(clippy::expect_used, reason = "32 bytes is far below HKDF's 8160")]
        hk.expand(info.as_bytes(), &mut k)
            .expect("HKDF expands 32 bytes");
        k
    };
    (key("leader->follower"), key("follower->leader"))
}

/// Bits a secret must carry at least.
pub const MIN_SECRET_BITS: f64 = 128.0;

/// Why `secret` is too weak for a coordinator port (None: strong enough).
/// Its strength is estimated as length × log2(alphabet), the alphabet being
/// the character classes it uses (hex digits alone count 16), and a secret
/// of few distinct characters is refused whatever its length.
pub fn secret_weakness(secret: &str) -> Option<String> {
    let chars: Vec<char> = secret.chars().collect();
    let distinct = chars
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let bits = chars.len() as f64 * alphabet(&chars).log2();
    (bits < MIN_SECRET_BITS || distinct < 8).then(|| {
        format!(
            "the shard secret is too weak (about {bits:.0} bits, {distinct} distinct characters; \
             at least {MIN_SECRET_BITS:.0} bits): generate one with `openssl rand -hex 32`"
        )
    })
}

fn alphabet(chars: &[char]) -> f64 {
    if chars.iter().all(char::is_ascii_hexdigit) {
        return 16.0;
    }
    let has = |f: fn(&char) -> bool| chars.iter().any(f);
    let mut n = 0.0;
    if has(char::is_ascii_lowercase) {
        n += 26.0;
    }
    if has(char::is_ascii_uppercase) {
        n += 26.0;
    }
    if has(char::is_ascii_digit) {
        n += 10.0;
    }
    if has(|c| !c.is_ascii_alphanumeric()) {
        n += 33.0;
    }
    n
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

    const S: &str = "0123456789abcdef0123456789abcdef";

    fn binding<'a>(f: &'a str, l: &'a str, index: u32, d: &'a str) -> Binding<'a> {
        Binding {
            follower_nonce: f,
            leader_nonce: l,
            index,
            flags_digest: d,
        }
    }

    #[test]
    fn the_right_secret_verifies_and_nothing_else_does() {
        let (f, l, other) = (nonce(), nonce(), nonce());
        let b = binding(&f, &l, 2, "abc");
        let p = proof(S, Side::Follower, &b);
        assert!(verify(S, Side::Follower, &b, &p));
        assert!(!verify("other", Side::Follower, &b, &p), "wrong secret");
        let swapped = binding(&f, &other, 2, "abc");
        assert!(!verify(S, Side::Follower, &swapped, &p), "other challenge");
        let swapped = binding(&other, &l, 2, "abc");
        assert!(
            !verify(S, Side::Follower, &swapped, &p),
            "other joiner nonce"
        );
        assert!(!verify(S, Side::Follower, &binding(&f, &l, 3, "abc"), &p));
        assert!(!verify(S, Side::Follower, &binding(&f, &l, 2, "abd"), &p));
        assert!(!verify(S, Side::Follower, &b, "zz"), "not hex");
    }

    #[test]
    fn a_leader_proof_is_never_a_follower_proof() {
        let (f, l) = (nonce(), nonce());
        let b = binding(&f, &l, 1, "d");
        let p = proof(S, Side::Leader, &b);
        assert!(verify(S, Side::Leader, &b, &p));
        assert!(!verify(S, Side::Follower, &b, &p), "reflected");
    }

    #[test]
    fn session_keys_differ_by_direction_and_by_session() {
        let (f, l) = (nonce(), nonce());
        let (a, b) = session_keys(S, &binding(&f, &l, 1, "d"));
        assert_ne!(a, b);
        let l2 = nonce();
        let (a2, _) = session_keys(S, &binding(&f, &l2, 1, "d"));
        assert_ne!(a, a2);
        assert_eq!(session_keys(S, &binding(&f, &l, 1, "d")).0, a);
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
    fn hkdf_matches_rfc_5869_case_1() {
        let ikm = [0x0bu8; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0u8; 42];
        Hkdf::<Sha256>::new(Some(&salt), &ikm)
            .expand(&info, &mut okm)
            .expect("expand");
        assert_eq!(
            hex(&okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        );
    }

    #[test]
    fn weak_secrets_are_refused_with_how_to_make_one() {
        for weak in [
            "",
            "right",
            "test-secret",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            let why = secret_weakness(weak).expect(weak);
            assert!(why.contains("openssl rand -hex 32"), "{why}");
        }
        assert!(secret_weakness(S).is_none(), "32 hex digits: 128 bits");
        assert!(secret_weakness(&S[..31]).is_some(), "124 bits");
        assert!(secret_weakness("Correct-Horse-Battery-Staple-42!").is_none());
    }

    #[test]
    fn the_digest_follows_the_flags() {
        let a = flags_digest(&serde_json::json!({"duration": 4}));
        assert_eq!(a.len(), 64);
        assert_ne!(a, flags_digest(&serde_json::json!({"duration": 5})));
    }
}
