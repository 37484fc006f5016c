//! Bench helper for `bench/fabric-vs-mbw.sh`: the native CPU fabric's local
//! copy bandwidth with one thread on a given buffer size (to set beside
//! Debian's `mbw -t0` on the same size), and pointer-chase latency of a
//! working set far above the last-level cache against one that fits in L2.
//!
//! Usage: fabric_bench SIZE_MIB ITERS

use ldb_fabric::cpu::kernels;
use ldb_fabric::cpu::measure::{PairJob, pair_bandwidth};

fn main() {
    let mut args = std::env::args().skip(1);
    let size_mib: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(256);
    let iters: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let cpus = vec![0usize];
    let job = PairJob {
        cpu_cpus: cpus.clone(),
        mem_cpus: cpus,
        bytes: size_mib << 20,
        threads: 1,
        warmup: 1,
        iters,
    };
    match pair_bandwidth(&job) {
        Ok(bw) => println!(
            "ldb-fabric 1 thread, {size_mib} MiB: read {:.2} GB/s, write {:.2} GB/s, copy {:.2} GB/s",
            bw.read, bw.write, bw.copy
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    for (label, bytes) in [
        ("256 KiB (fits in L2)", 256usize << 10),
        ("512 MiB (far above LLC)", 512 << 20),
    ] {
        let ring = kernels::chase_ring(bytes, 1);
        let reads = 5_000_000;
        // best of three laps: other load on the machine only makes one slower
        let best = (0..3)
            .map(|_| kernels::chase(&ring, reads).as_secs_f64() * 1e9 / reads as f64)
            .fold(f64::INFINITY, f64::min);
        println!("ldb-fabric latency {label}: {best:.2} ns per dependent read");
    }
}
