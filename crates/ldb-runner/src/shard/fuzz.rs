//! Seeded fuzz loops over what a stranger or a tampering peer controls: the
//! frame decoder (plain and sealed) and the handshake's decisions (reading
//! a join, checking either side's proof). Nothing may panic; a changed
//! sealed frame never opens; no guessed proof verifies. The full runs
//! (1,000,000 inputs each) are manual:
//! `cargo test --release -p ldb-runner --lib shard::fuzz -- --ignored`;
//! CI runs a slice of a few thousand.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::auth::{self, Binding, Side};
use super::join::as_join;
use super::seal::Seal;
use super::wire::decode;

const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// Valid messages to start mutations from.
fn seeds() -> Vec<Vec<u8>> {
    let msgs = [
        serde_json::json!({"type": "join", "version": "shard-protocol-2/1", "shards": 3,
            "index": 1, "flags_digest": "ab", "nonce": auth::nonce()}),
        serde_json::json!({"type": "cell_start", "cell": 1, "concurrency": 4, "body": "{}",
            "idle_timeout_s": 30.0}),
        serde_json::json!({"type": "window", "cell": 1, "start": 1.7e9, "end": 1.7e9 + 4.0}),
        serde_json::json!({"type": "status", "cell": 2, "producing": 3, "tokens": 9,
            "window_tokens": 4}),
        serde_json::json!({"type": "rate_start", "cell": 1, "t0": 1.7e9, "limit": 1.7e9 + 9.0,
            "requests": [[0, 0.0], [1, 0.5]], "bodies": ["{}"], "body_of": [0, 0],
            "max_in_flight": 2, "idle_timeout_s": null}),
        serde_json::json!({"type": "pong", "seq": 4, "clock": 1.7e9}),
    ];
    msgs.iter().map(|m| m.to_string().into_bytes()).collect()
}

/// One input: random bytes, or a seed with a few bytes changed, cut or added.
fn input(rng: &mut SmallRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.random_bool(0.2) {
        let n = rng.random_range(0..200);
        return (0..n).map(|_| rng.random()).collect();
    }
    let mut v = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..v.len().max(1));
        match rng.random_range(0..4) {
            0 if !v.is_empty() => v[at] = rng.random(),
            1 if !v.is_empty() => v.truncate(at),
            2 => v.insert(
                at.min(v.len()),
                *b"0123456789e-.\"{}[]:,\x1b\n"
                    .get(rng.random_range(0..22))
                    .unwrap_or(&b'9'),
            ),
            _ => v.extend_from_slice(b"9e300"),
        }
    }
    v
}

fn frame_decoder(n: u64, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let seeds = seeds();
    for _ in 0..n {
        let x = input(&mut rng, &seeds);
        let _ = decode(None, &x);
        // The same bytes sealed, then one byte changed: never opens.
        let mut tx = Seal::new([9; 32]);
        let mut sealed = tx.seal(&x);
        let _ = decode(Some(&mut Seal::new([9; 32])), &sealed);
        let at = rng.random_range(0..sealed.len());
        sealed[at] ^= rng.random_range(1..=255u8);
        assert!(
            decode(Some(&mut Seal::new([9; 32])), &sealed).is_err(),
            "a changed sealed frame opened"
        );
        let _ = decode(Some(&mut Seal::new([9; 32])), &x);
    }
}

fn handshake(n: u64, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let seeds = seeds();
    let leader_nonce = auth::nonce();
    for _ in 0..n {
        let x = input(&mut rng, &seeds);
        let Ok(m) = decode(None, &x) else { continue };
        let Ok(j) = as_join(m) else { continue };
        let b = Binding {
            follower_nonce: &j.nonce,
            leader_nonce: &leader_nonce,
            index: j.index,
            flags_digest: &j.flags_digest,
        };
        // A guessed proof, and the leader's own proof reflected back.
        let guess: String = (0..64)
            .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
            .collect();
        assert!(!auth::verify(SECRET, Side::Follower, &b, &guess));
        let reflected = auth::proof(SECRET, Side::Leader, &b);
        assert!(!auth::verify(SECRET, Side::Follower, &b, &reflected));
    }
}

#[test]
fn fuzz_slice_for_ci() {
    frame_decoder(3_000, 1);
    handshake(3_000, 2);
}

#[test]
#[ignore = "manual: a million inputs each (docs/shards.md)"]
fn fuzz_frame_decoder_a_million() {
    frame_decoder(1_000_000, 11);
}

#[test]
#[ignore = "manual: a million inputs each (docs/shards.md)"]
fn fuzz_handshake_a_million() {
    handshake(1_000_000, 12);
}
