//! One (CPU node, memory node) pair measured: memory placed on the memory
//! node by first touch (the allocating threads are pinned to that node's
//! CPUs, and Linux's default policy puts a page where it is first written),
//! then read, written and copied by threads pinned to the CPU node's CPUs.
//! GB/s = bytes × passes / slowest thread's time / 1e9: the pair is as fast
//! as its last thread to finish.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::kernels::{self, LINE_WORDS};

/// Bandwidths of one pair, GB/s.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PairBandwidth {
    /// Read.
    pub read: f64,
    /// Write.
    pub write: f64,
    /// Copy from the memory node into a local buffer.
    pub copy: f64,
}

/// What one pair's run needs.
#[derive(Debug, Clone)]
pub struct PairJob {
    /// CPUs of the CPU node (threads are pinned to all of them).
    pub cpu_cpus: Vec<usize>,
    /// CPUs of the memory node (the first touch runs there).
    pub mem_cpus: Vec<usize>,
    /// Total bytes measured (split evenly among the threads).
    pub bytes: usize,
    /// Threads.
    pub threads: usize,
    /// Untimed passes.
    pub warmup: u64,
    /// Timed passes.
    pub iters: u64,
}

/// Allocate `chunks` buffers of `words` each, first touched by threads
/// pinned to `cpus`.
fn placed_buffers(cpus: &[usize], chunks: usize, words: usize) -> std::io::Result<Vec<Vec<u64>>> {
    let cpus = cpus.to_vec();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..chunks)
            .map(|_| {
                let cpus = cpus.clone();
                s.spawn(move || -> std::io::Result<Vec<u64>> {
                    ldb_sys::pin_current_thread(&cpus)?;
                    // vec! of zeros may come from untouched zero pages;
                    // writing every word is the first touch that places it
                    let mut b = vec![0u64; words];
                    kernels::write_pass(&mut b, 1);
                    Ok(b)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
            })
            .collect()
    })
}

/// Which loop a timed run performs.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Write,
    Copy,
}

/// Run `kind` on every buffer from a thread pinned to `cpus`, all threads
/// released together by a barrier; the slowest thread's timed span.
fn timed(
    kind: Kind,
    cpus: &[usize],
    bufs: &mut [Vec<u64>],
    warmup: u64,
    iters: u64,
) -> std::io::Result<Duration> {
    let barrier = Arc::new(Barrier::new(bufs.len()));
    std::thread::scope(|s| {
        let handles: Vec<_> = bufs
            .iter_mut()
            .map(|buf| {
                let barrier = barrier.clone();
                let cpus = cpus.to_vec();
                s.spawn(move || -> std::io::Result<Duration> {
                    ldb_sys::pin_current_thread(&cpus)?;
                    // the copy target is touched here, on the CPU node
                    let mut local = match kind {
                        Kind::Copy => vec![0u64; buf.len()],
                        _ => Vec::new(),
                    };
                    kernels::write_pass(&mut local, 2);
                    let mut pass = |buf: &mut Vec<u64>| match kind {
                        Kind::Read => {
                            kernels::read_pass(buf);
                        }
                        Kind::Write => kernels::write_pass(buf, 3),
                        Kind::Copy => kernels::copy_pass(&mut local, buf),
                    };
                    for _ in 0..warmup {
                        pass(buf);
                    }
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        pass(buf);
                    }
                    Ok(start.elapsed())
                })
            })
            .collect();
        let mut slowest = Duration::ZERO;
        for h in handles {
            let t = h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))?;
            slowest = slowest.max(t);
        }
        Ok(slowest)
    })
}

fn gbps(bytes: usize, iters: u64, t: Duration) -> f64 {
    let secs = t.as_secs_f64().max(1e-9);
    bytes as f64 * iters as f64 / secs / 1e9
}

/// Words per thread for `bytes` over `threads`, whole cache lines, ≥ 1 line.
fn words_per_thread(bytes: usize, threads: usize) -> usize {
    let lines = (bytes / 64 / threads.max(1)).max(1);
    lines * LINE_WORDS
}

/// Read, write and copy bandwidth of one pair.
pub fn pair_bandwidth(job: &PairJob) -> std::io::Result<PairBandwidth> {
    let threads = job.threads.max(1);
    let words = words_per_thread(job.bytes, threads);
    let bytes = words * 8 * threads;
    let mut bufs = placed_buffers(&job.mem_cpus, threads, words)?;
    let mut one = |k| timed(k, &job.cpu_cpus, &mut bufs, job.warmup, job.iters);
    let (r, w, c) = (one(Kind::Read)?, one(Kind::Write)?, one(Kind::Copy)?);
    Ok(PairBandwidth {
        read: gbps(bytes, job.iters, r),
        write: gbps(bytes, job.iters, w),
        copy: gbps(bytes, job.iters, c),
    })
}

/// Dependent-load latency of one pair, µs per read: the ring is built by a
/// thread pinned to the memory node and chased by one pinned to the CPU
/// node.
pub fn pair_latency(
    cpu_cpus: &[usize],
    mem_cpus: &[usize],
    bytes: usize,
    reads: u64,
) -> std::io::Result<f64> {
    let mem = mem_cpus.to_vec();
    let ring = std::thread::spawn(move || -> std::io::Result<Vec<u64>> {
        ldb_sys::pin_current_thread(&mem)?;
        Ok(kernels::chase_ring(bytes, 0x5eed))
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))?;
    let cpus = cpu_cpus.to_vec();
    std::thread::spawn(move || -> std::io::Result<f64> {
        ldb_sys::pin_current_thread(&cpus)?;
        // one untimed lap (bounded) brings the ring into the TLB and caches
        // as far as they hold it; the timed reads follow
        kernels::chase(&ring, (ring.len() / LINE_WORDS) as u64);
        let t = kernels::chase(&ring, reads.max(1));
        Ok(t.as_secs_f64() * 1e6 / reads.max(1) as f64)
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
}

/// Nodes A and B each read (write, copy) the other's memory at the same
/// time; GB/s = both directions' bytes / the slower direction's time.
pub fn bidirectional(a: &PairJob, b: &PairJob) -> std::io::Result<PairBandwidth> {
    let run = |k: Kind| -> std::io::Result<f64> {
        let (wa, wb) = (
            words_per_thread(a.bytes, a.threads),
            words_per_thread(b.bytes, b.threads),
        );
        let mut ba = placed_buffers(&a.mem_cpus, a.threads.max(1), wa)?;
        let mut bb = placed_buffers(&b.mem_cpus, b.threads.max(1), wb)?;
        let (ta, tb) = std::thread::scope(|s| {
            let ha = s.spawn(|| timed(k, &a.cpu_cpus, &mut ba, a.warmup, a.iters));
            let hb = s.spawn(|| timed(k, &b.cpu_cpus, &mut bb, b.warmup, b.iters));
            (ha.join(), hb.join())
        });
        let err = || std::io::Error::other("thread panicked");
        let t = ta.map_err(|_| err())??.max(tb.map_err(|_| err())??);
        let bytes = wa * 8 * a.threads.max(1) + wb * 8 * b.threads.max(1);
        Ok(gbps(bytes, a.iters, t))
    };
    Ok(PairBandwidth {
        read: run(Kind::Read)?,
        write: run(Kind::Write)?,
        copy: run(Kind::Copy)?,
    })
}
