//! GPU-machine probe for `scripts/gpu-fabric-check.sh`: the built-in P2P
//! back end run with the given settings, its result object printed as one
//! JSON line (what `--p2pmark` embeds). A small binary that carries to a
//! GPU machine more easily than the whole tool.
//!
//! Usage: p2p_probe [SIZE_MIB] [ITERS] [MAX_GPUS] [ALLREDUCE_SIZES]
//! (defaults: the reference's 64, 20, 0 = all, `full`)

use ldb_fabric::P2pSettings;
use ldb_fabric::gpu::{CudaDriver, run_p2p};
use ldb_fabric::settings::allreduce_sizes;

fn main() {
    let mut args = std::env::args().skip(1);
    let d = P2pSettings::default();
    let mut s = P2pSettings {
        size_mb: args
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or(d.size_mb),
        iters: args.next().and_then(|a| a.parse().ok()).unwrap_or(d.iters),
        max_gpus: args
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or(d.max_gpus),
        timeout_s: 240.0,
        ..d
    };
    if let Some(sizes) = args.next() {
        match allreduce_sizes(&sizes) {
            Ok(a) => s.allreduce_sizes = a,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
    let v = run_p2p(&s, &CudaDriver::new(&s));
    println!("{v}");
}
