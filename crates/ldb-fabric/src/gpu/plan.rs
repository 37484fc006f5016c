//! The pure parts of the native GPU measurement: the pointer-chase chain
//! (its size, its random single cycle, its layout in device memory), the
//! start points that keep successive chases apart, launch sizes, and the
//! arithmetic from event milliseconds and timer nanoseconds to GB/s and µs.
//! No CUDA here, so all of it is tested on any machine.

use rand::{Rng, SeedableRng};

/// Bytes between chain slots: one slot per 128-byte line (the reference's
/// stride), so no two slots share a cache line or a 32-byte sector.
pub const CHAIN_STRIDE_BYTES: usize = 128;
/// The same stride in 8-byte words (what the kernel indexes).
pub const CHAIN_STRIDE_WORDS: usize = CHAIN_STRIDE_BYTES / 8;
/// The chain is at least this large …
pub const CHAIN_MIN_BYTES: usize = 256 << 20;
/// … and at least this many times the owner's L2 cache, so that a read
/// almost never finds its line in the owner's L2 (at most 1 in 8 once the
/// cache is full of chain lines).
pub const CHAIN_L2_MULTIPLE: usize = 8;
/// Untimed dependent reads before the timed ones (TLB and clock warm-up).
pub const CHASE_WARM_READS: u64 = 1000;
/// Device memory left free beyond what a measurement allocates.
pub const MEMORY_MARGIN_BYTES: usize = 256 << 20;
/// fp16 value every allreduce input holds (bytes 0x3c 0x3c): 1.05859375,
/// so the sum over n ≤ 8 GPUs is exact in fp16 and can be checked.
pub const ALLREDUCE_FILL_BYTE: u8 = 0x3c;
/// Threads per block of the one-shot sum.
pub const SUM_BLOCK_THREADS: u64 = 256;
/// How long a GPU waits at the allreduce barrier for a peer before it
/// gives up and the measurement fails, ns: far above any step (a peer is
/// at most one sum behind), short enough that a peer that never comes
/// costs seconds, once.
pub const BARRIER_TIMEOUT_NS: u64 = 10_000_000_000;

/// Chain size for an owner with `l2_bytes` of L2 and `free_bytes` of free
/// memory: max(256 MiB, 8 × L2), at most a quarter of the free memory, in
/// whole slots, at least two slots. `None` when not even 256 MiB fits in a
/// quarter of the free memory.
pub fn chain_bytes(l2_bytes: usize, free_bytes: usize) -> Option<usize> {
    let want = CHAIN_MIN_BYTES.max(l2_bytes.saturating_mul(CHAIN_L2_MULTIPLE));
    let cap = free_bytes / 4;
    let bytes = want.min(cap);
    (bytes >= CHAIN_MIN_BYTES.min(want)).then_some(bytes / CHAIN_STRIDE_BYTES * CHAIN_STRIDE_BYTES)
}

/// A random single cycle through `slots` slots (Sattolo's algorithm,
/// seeded): `next[k]` is the slot read after slot `k`. One cycle means a
/// chase from any slot visits every slot before it repeats.
pub fn chain_cycle(slots: usize, seed: u64) -> Vec<u32> {
    let slots = slots.max(2);
    let mut order: Vec<u32> = (0..slots).map(|s| s as u32).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for i in (1..slots).rev() {
        let j = rng.random_range(0..i);
        order.swap(i, j);
    }
    let mut next = vec![0u32; slots];
    for w in 0..slots {
        next[order[w] as usize] = order[(w + 1) % slots];
    }
    next
}

/// The device words of slots `first..first + out.len() / stride` of the
/// chain: slot k's first word holds the word index of slot `next[k]`, the
/// rest of its line is zero. `out` covers whole slots.
pub fn fill_chain_words(next: &[u32], first: usize, out: &mut [u64]) {
    out.fill(0);
    for (i, line) in out.chunks_exact_mut(CHAIN_STRIDE_WORDS).enumerate() {
        if let Some(&to) = next.get(first + i) {
            line[0] = u64::from(to) * CHAIN_STRIDE_WORDS as u64;
        }
    }
}

/// Where chase number `call`'s reader `index` starts (a word index): spread
/// over the chain by two large odd multipliers, so successive chases and
/// concurrent readers of the same chain walk different stretches of it
/// rather than finding the lines the last one left in the cache.
pub fn chase_start(call: u64, index: usize, slots: usize) -> u64 {
    let slots = slots.max(1) as u64;
    let slot = call
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((index as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        % slots;
    slot * CHAIN_STRIDE_WORDS as u64
}

/// GB/s of `iters` copies of `bytes` that took `ms` milliseconds (the
/// reference's bytes × iters / time / 1e9). Non-positive time: an error.
pub fn gbps(bytes: usize, iters: u64, ms: f64) -> Result<f64, String> {
    if ms.is_finite() && ms > 0.0 {
        Ok(bytes as f64 * iters as f64 / (ms * 1e-3) / 1e9)
    } else {
        Err(format!("the copies took no measurable time ({ms} ms)"))
    }
}

/// µs per dependent read: `ns` for `reads` reads.
pub fn us_per_read(ns: u64, reads: u64) -> Result<f64, String> {
    if reads == 0 || ns == 0 {
        return Err(format!(
            "the pointer chase took no measurable time ({ns} ns for {reads} reads)"
        ));
    }
    Ok(ns as f64 / reads as f64 / 1e3)
}

/// µs per operation: the slowest GPU's `ms` for `iters` operations.
pub fn us_per_op(ms_per_gpu: &[f64], iters: u64) -> Result<f64, String> {
    let worst = ms_per_gpu.iter().copied().fold(0.0, f64::max);
    if iters == 0 || !worst.is_finite() || worst <= 0.0 {
        return Err(format!(
            "the collective took no measurable time ({worst} ms)"
        ));
    }
    Ok(worst * 1e3 / iters as f64)
}

/// Blocks for the one-shot sum over `packs` 16-byte packs on a GPU with
/// `sms` multiprocessors: enough for one pack per thread, at most two
/// blocks per multiprocessor (the kernel strides over the rest).
pub fn sum_grid(packs: u64, sms: i32) -> u32 {
    let need = packs.div_ceil(SUM_BLOCK_THREADS).max(1);
    let cap = u64::try_from(sms.max(1)).unwrap_or(1) * 2;
    u32::try_from(need.min(cap)).unwrap_or(u32::MAX)
}

/// An fp16 value's bits as f64 (finite values; used to check allreduce
/// results, whose values are small normal numbers).
pub fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    match exp {
        0 => sign * frac / 1024.0 * 2f64.powi(-14),
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The value every output element of an allreduce over `n` GPUs must hold
/// (inputs all [`ALLREDUCE_FILL_BYTE`] bytes): n × 1.05859375.
pub fn allreduce_expected(n: usize) -> f64 {
    n as f64 * f16_to_f64(u16::from_le_bytes([ALLREDUCE_FILL_BYTE; 2]))
}

/// Check the first output word (four fp16 values) of an allreduce over `n`
/// GPUs.
pub fn check_allreduce_word(word: u64, n: usize) -> Result<(), String> {
    let want = allreduce_expected(n);
    for k in 0..4 {
        let got = f16_to_f64((word >> (16 * k)) as u16);
        if got != want {
            return Err(format!(
                "allreduce result is wrong: element {k} is {got}, expected {want}"
            ));
        }
    }
    Ok(())
}

/// Environment variables naming a library file to try before the usual
/// names (pip wheels put NVRTC and NCCL outside the loader's path); read,
/// and checked, where the libraries are loaded (`ldb_sys::user_library`).
pub use ldb_sys::user_library::{NCCL_ENV, NVRTC_ENV};

/// `bytes` as MiB, rounded, for messages.
pub fn mib(bytes: usize) -> usize {
    (bytes + (1 << 19)) >> 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_one_cycle_through_every_slot() {
        let next = chain_cycle(1000, 7);
        let mut seen = vec![false; 1000];
        let mut at = 0usize;
        for _ in 0..1000 {
            assert!(!seen[at], "slot {at} visited twice");
            seen[at] = true;
            at = next[at] as usize;
        }
        assert_eq!(at, 0, "back at the start after every slot");
        assert!(seen.iter().all(|&s| s));
        // deterministic for a seed, different for another
        assert_eq!(chain_cycle(64, 1), chain_cycle(64, 1));
        assert_ne!(chain_cycle(64, 1), chain_cycle(64, 2));
    }

    #[test]
    fn chain_words_point_at_the_next_slots_first_word() {
        let next = chain_cycle(8, 3);
        let mut words = vec![7u64; 8 * CHAIN_STRIDE_WORDS];
        fill_chain_words(&next, 0, &mut words);
        // following the words as the kernel does visits the slots in `next` order
        let mut at = 0usize;
        for _ in 0..8 {
            let to = words[at] as usize;
            assert_eq!(to % CHAIN_STRIDE_WORDS, 0);
            assert_eq!(
                to / CHAIN_STRIDE_WORDS,
                next[at / CHAIN_STRIDE_WORDS] as usize
            );
            at = to;
        }
        assert_eq!(at, 0);
        assert_eq!(
            words.iter().filter(|&&w| w != 0).count(),
            7,
            "only slot words are set"
        );
        // a chunk that starts at slot 4
        let mut chunk = vec![0u64; 2 * CHAIN_STRIDE_WORDS];
        fill_chain_words(&next, 4, &mut chunk);
        assert_eq!(chunk[0], u64::from(next[4]) * CHAIN_STRIDE_WORDS as u64);
        assert_eq!(
            chunk[CHAIN_STRIDE_WORDS],
            u64::from(next[5]) * CHAIN_STRIDE_WORDS as u64
        );
    }

    #[test]
    fn the_chain_outgrows_l2_and_fits_in_memory() {
        let gib = 1usize << 30;
        // 50 MiB L2 (H100): 8 × L2 = 400 MiB
        assert_eq!(chain_bytes(50 << 20, 80 * gib), Some(400 << 20));
        // small L2: the 256 MiB floor
        assert_eq!(chain_bytes(4 << 20, 80 * gib), Some(256 << 20));
        // a quarter of free memory caps it; below the floor: none
        assert_eq!(chain_bytes(50 << 20, 1200 << 20), Some(300 << 20));
        assert_eq!(chain_bytes(50 << 20, 512 << 20), None);
        assert_eq!(chain_bytes(0, 0), None);
    }

    #[test]
    fn chase_starts_are_slot_aligned_and_spread() {
        let slots = 1 << 20;
        let a: Vec<u64> = (0..16).map(|c| chase_start(c, 0, slots)).collect();
        for w in &a {
            assert_eq!(w % CHAIN_STRIDE_WORDS as u64, 0);
            assert!(*w < (slots * CHAIN_STRIDE_WORDS) as u64);
        }
        let mut d = a.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), a.len(), "distinct starts for distinct calls");
        assert_ne!(chase_start(3, 0, slots), chase_start(3, 1, slots));
        assert_eq!(chase_start(5, 2, 1), 0);
    }

    #[test]
    fn timing_arithmetic_gives_the_references_units() {
        // 64 MiB × 20 copies in 26.8435456 ms = 50 GB/s
        let g = gbps(64 << 20, 20, 26.843_545_6).expect("gbps");
        assert!((g - 50.0).abs() < 1e-9, "{g}");
        assert!(gbps(1, 1, 0.0).is_err());
        assert!(gbps(1, 1, f64::NAN).is_err());
        // 10 000 reads in 20 ms = 2 µs each
        assert_eq!(us_per_read(20_000_000, 10_000), Ok(2.0));
        assert!(us_per_read(0, 10).is_err());
        // the slowest of the GPUs decides: 2 ms for 20 ops = 100 µs
        assert_eq!(us_per_op(&[1.5, 2.0], 20), Ok(100.0));
        assert!(us_per_op(&[], 20).is_err());
    }

    #[test]
    fn launch_sizes_and_fp16_checks() {
        assert_eq!(sum_grid(16, 132), 1);
        assert_eq!(sum_grid(257, 132), 2);
        assert_eq!(sum_grid(1 << 22, 132), 264);
        assert_eq!(sum_grid(0, 0), 1);
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x3c3c), 1.058_593_75);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(allreduce_expected(2), 2.117_187_5);
        // four fp16 2.1171875 (0x403c) pass for two GPUs, not for three
        let w = 0x403c_403c_403c_403c_u64;
        assert!(check_allreduce_word(w, 2).is_ok());
        assert!(check_allreduce_word(w, 3).is_err());
        assert_eq!(mib(256 << 20), 256);
    }
}
