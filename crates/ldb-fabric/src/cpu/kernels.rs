//! The measuring loops, kept small so that what is timed is plain to see.
//!
//! - read: one 8-byte load per 64-byte cache line over the whole buffer;
//!   the hardware still moves whole lines, so bytes = buffer size. The sum
//!   goes through `black_box` so the loads cannot be removed.
//! - write: `fill`, i.e. the C library's memset: full cache-line stores.
//! - copy: `copy_from_slice`, i.e. memcpy from the measured buffer into a
//!   buffer local to the reading thread; bytes = bytes copied (not read +
//!   written).
//! - latency: a dependent pointer chase. Each 64-byte slot holds the index
//!   of the next slot; the order is one random cycle through all slots
//!   (Sattolo's algorithm), so every load waits for the one before it and
//!   the hardware prefetcher, which follows strides, cannot guess the next
//!   line. Time per read = elapsed / reads.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::SeedableRng;

/// u64 words per 64-byte cache line.
pub const LINE_WORDS: usize = 8;

/// Read every cache line of `buf` once.
pub fn read_pass(buf: &[u64]) -> u64 {
    let mut sum = 0u64;
    for line in buf.chunks(LINE_WORDS) {
        sum = sum.wrapping_add(line[0]);
    }
    black_box(sum)
}

/// Store to every byte of `buf`.
pub fn write_pass(buf: &mut [u64], value: u64) {
    buf.fill(value);
    black_box(buf);
}

/// Copy `src` into `dst` (same length).
pub fn copy_pass(dst: &mut [u64], src: &[u64]) {
    dst.copy_from_slice(src);
    black_box(dst);
}

/// A pointer-chase ring over `bytes` (rounded down to whole lines, at least
/// two): slot `i` (word `i * 8`) holds the word index of the next slot.
/// The caller's thread touches it first, so it lives on that thread's node.
pub fn chase_ring(bytes: usize, seed: u64) -> Vec<u64> {
    let slots = (bytes / (LINE_WORDS * 8)).max(2);
    let mut order: Vec<usize> = (0..slots).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    // Sattolo: a uniformly random permutation that is a single cycle, so
    // the chase visits every slot before repeating.
    for i in (1..slots).rev() {
        let j = rng.random_range(0..i);
        order.swap(i, j);
    }
    let mut ring = vec![0u64; slots * LINE_WORDS];
    for w in 0..slots {
        let (from, to) = (order[w], order[(w + 1) % slots]);
        ring[from * LINE_WORDS] = (to * LINE_WORDS) as u64;
    }
    ring
}

/// Follow the ring for `reads` dependent loads; the time they took.
pub fn chase(ring: &[u64], reads: u64) -> Duration {
    let mut at = 0usize;
    let start = Instant::now();
    for _ in 0..reads {
        // an index out of range cannot happen (every entry is a slot start);
        // `get` keeps a corrupted ring from panicking
        at = ring.get(at).copied().unwrap_or(0) as usize;
    }
    let t = start.elapsed();
    black_box(at);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_one_cycle_through_every_slot() {
        let ring = chase_ring(64 * 1000, 7);
        let mut seen = vec![false; 1000];
        let mut at = 0usize;
        for _ in 0..1000 {
            let slot = at / LINE_WORDS;
            assert!(!seen[slot], "slot {slot} visited twice");
            seen[slot] = true;
            at = ring[at] as usize;
        }
        assert_eq!(at, 0, "back at the start after every slot");
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn kernels_touch_what_they_say() {
        let mut a = vec![1u64; 64];
        assert_eq!(read_pass(&a), 8);
        write_pass(&mut a, 3);
        assert!(a.iter().all(|&x| x == 3));
        let mut b = vec![0u64; 64];
        copy_pass(&mut b, &a);
        assert_eq!(a, b);
    }
}
