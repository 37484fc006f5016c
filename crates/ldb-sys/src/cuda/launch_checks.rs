//! What must hold before a kernel follows an address or an index: pure
//! functions of sizes, counts and addresses, so that they are tested here
//! without a device. A kernel that read past a buffer would not fail
//! cleanly: it would read or write whatever lies there (another buffer,
//! another process's memory on a shared GPU), so each launcher in
//! [`super::kernels`] calls its check first and every table or chain it
//! follows was checked when it was built ([`super::kernel_buffers`]).

use super::kernels::{MAX_GPUS, TABLE_WORDS};

/// Bytes of one barrier flag (a `u32` per GPU in each flag array).
pub const FLAG_BYTES: usize = 4;

/// Bytes of one pack the one-shot sum reads and writes (8 fp16 values).
pub const PACK_BYTES: usize = 16;

/// The `table` the barrier and the one-shot sum follow: input buffer `j`'s
/// address at word `j`, flag array `j`'s at word `MAX_GPUS + j`, for the
/// `n` GPUs given as `(address, bytes)`. Refused: no GPU or more than
/// [`MAX_GPUS`], different counts, a null address, a flag array with no
/// slot for every GPU (the barrier writes slot `rank` of each).
pub fn table_words(
    inputs: &[(u64, usize)],
    flags: &[(u64, usize)],
) -> Result<[u64; TABLE_WORDS], String> {
    let n = inputs.len();
    if n == 0 || n > MAX_GPUS || flags.len() != n {
        return Err(format!(
            "peer table: {n} inputs and {} flag arrays (1 to {MAX_GPUS} GPUs, one of each)",
            flags.len()
        ));
    }
    if let Some(j) = inputs.iter().chain(flags).position(|&(a, _)| a == 0) {
        return Err(format!("peer table: address {j} is null"));
    }
    if let Some(j) = flags.iter().position(|&(_, b)| b < n * FLAG_BYTES) {
        return Err(format!(
            "peer table: flag array {j} has {} bytes, fewer than {} for {n} GPUs",
            flags[j].1,
            n * FLAG_BYTES
        ));
    }
    let mut words = [0u64; TABLE_WORDS];
    for (j, (&(input, _), &(flag, _))) in inputs.iter().zip(flags).enumerate() {
        words[j] = input;
        words[MAX_GPUS + j] = flag;
    }
    Ok(words)
}

/// The barrier: `n` GPUs of a table built for `table_n`, this GPU's `rank`,
/// and a failure flag (one `int`) of `failed_bytes`.
pub fn check_barrier(
    table_n: usize,
    n: usize,
    rank: usize,
    failed_bytes: usize,
) -> Result<(), String> {
    if n == 0 || n > table_n || rank >= n || failed_bytes < 4 {
        return Err(format!(
            "ldb_barrier: rank {rank} of {n} GPUs over a table of {table_n}, \
             failure flag {failed_bytes} bytes: out of range"
        ));
    }
    Ok(())
}

/// The one-shot sum: `n` inputs of a table built for `table_n` GPUs whose
/// smallest input holds `input_bytes`, `packs` 16-byte packs read from each
/// and written to an output of `out_bytes`, on `grid` blocks.
pub fn check_sum(
    table_n: usize,
    input_bytes: usize,
    n: usize,
    packs: u64,
    out_bytes: usize,
    grid: u32,
) -> Result<(), String> {
    let need = usize::try_from(packs)
        .ok()
        .and_then(|p| p.checked_mul(PACK_BYTES));
    let fits = need.is_some_and(|b| b <= input_bytes && b <= out_bytes);
    if n == 0 || n > table_n || !fits || grid == 0 {
        return Err(format!(
            "ldb_oneshot_sum: {packs} packs from {n} of {table_n} inputs of {input_bytes} bytes \
             into {out_bytes} bytes on {grid} blocks: out of range"
        ));
    }
    Ok(())
}

/// The chase: the chain has `chain_words` words (each a word index below
/// that, checked as it was written), the walk starts at word `start`, and
/// the output takes two words.
pub fn check_chase(chain_words: u64, start: u64, out_bytes: usize) -> Result<(), String> {
    if start >= chain_words || out_bytes < 16 {
        return Err(format!(
            "ldb_chase: start {start} in a chain of {chain_words} words, output of {out_bytes} \
             bytes: out of range"
        ));
    }
    Ok(())
}

/// Words written into a chain of `chain_words` words: every one must be an
/// index inside it, since the kernel follows each (`at = chain[at]`).
pub fn check_chain_words(words: &[u64], chain_words: u64) -> Result<(), String> {
    match words.iter().position(|&w| w >= chain_words) {
        None => Ok(()),
        Some(i) => Err(format!(
            "pointer-chase chain: word {i} points at {}, outside the chain of {chain_words} words",
            words[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_holds_each_gpus_input_and_flags_and_refuses_what_a_kernel_could_not_follow() {
        let w = table_words(&[(0x1000, 64), (0x2000, 64)], &[(0x3000, 32), (0x4000, 32)]).unwrap();
        assert_eq!(
            (w[0], w[1], w[MAX_GPUS], w[MAX_GPUS + 1]),
            (0x1000, 0x2000, 0x3000, 0x4000)
        );
        assert!(w[2..MAX_GPUS].iter().all(|&x| x == 0));
        // no GPU, too many, uneven counts
        assert!(table_words(&[], &[]).is_err());
        let nine = vec![(0x1000, 64); MAX_GPUS + 1];
        assert!(table_words(&nine, &nine).is_err());
        assert!(table_words(&[(0x1000, 64)], &[]).is_err());
        // a null address; a flag array without a slot per GPU
        assert!(table_words(&[(0, 64)], &[(0x3000, 32)]).is_err());
        assert!(table_words(&[(0x1000, 64), (0x2000, 64)], &[(0x3000, 4), (0x4000, 32)]).is_err());
    }

    #[test]
    fn barrier_and_sum_stay_inside_their_table_and_buffers() {
        assert!(check_barrier(4, 4, 3, 4).is_ok());
        assert!(check_barrier(4, 4, 4, 4).is_err()); // rank past the group
        assert!(check_barrier(2, 4, 0, 4).is_err()); // more GPUs than the table
        assert!(check_barrier(4, 4, 0, 2).is_err()); // flag smaller than an int
        assert!(check_sum(4, 1 << 20, 4, (1 << 20) / 16, 1 << 20, 8).is_ok());
        assert!(check_sum(4, 1 << 20, 4, (1 << 20) / 16 + 1, 2 << 20, 8).is_err()); // input short
        assert!(check_sum(4, 2 << 20, 4, (1 << 20) / 16 + 1, 1 << 20, 8).is_err()); // output short
        assert!(check_sum(4, 1 << 20, 5, 1, 1 << 20, 8).is_err());
        assert!(check_sum(4, 1 << 20, 4, 1, 1 << 20, 0).is_err());
        assert!(check_sum(4, usize::MAX, 4, u64::MAX, usize::MAX, 1).is_err()); // overflow
    }

    #[test]
    fn a_chase_starts_and_stays_inside_its_chain() {
        assert!(check_chase(1024, 1023, 16).is_ok());
        assert!(check_chase(1024, 1024, 16).is_err());
        assert!(check_chase(1024, 0, 8).is_err());
        assert!(check_chain_words(&[1, 2, 0], 3).is_ok());
        let e = check_chain_words(&[1, 3, 0], 3).unwrap_err();
        assert!(e.contains("word 1 points at 3"), "{e}");
    }
}
