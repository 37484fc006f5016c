//! The fabric-diagnostic flags (`--p2pmark*`, `--amd-fabric*`): the
//! reference's 24 names and defaults. Counts are signed here so that a
//! negative value gets our one-line answer; bounds are checked in
//! `fabric_config.rs`.

use clap::Args;

/// Fabric diagnostic flags.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Fabric diagnostics (docs/fabric.md)")]
pub struct FabricArgs {
    /// Run the GPU peer-to-peer diagnostic before the benchmark and embed it in the result.
    #[arg(long)]
    pub p2pmark: bool,
    /// Run only the GPU peer-to-peer diagnostic (implies --p2pmark); nothing is sent to a server.
    #[arg(long)]
    pub p2pmark_only: bool,
    /// Expanded P2P console report; also prints the helper's full command.
    #[arg(long)]
    pub p2pmark_detail: bool,
    /// External P2P helper printing the reference's JSON line (empty: the built-in measurement).
    #[arg(long, default_value = "", value_name = "PATH")]
    pub p2pmark_bin: String,
    /// all, bandwidth, latency or allreduce.
    #[arg(long, default_value = "all", value_name = "MODE")]
    pub p2pmark_mode: String,
    /// Copy buffer, MiB (≥ 1).
    #[arg(
        long,
        default_value_t = 64,
        allow_hyphen_values = true,
        value_name = "MIB"
    )]
    pub p2pmark_size_mb: i64,
    /// Timed iterations (≥ 1).
    #[arg(
        long,
        default_value_t = 20,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub p2pmark_iters: i64,
    /// Warmup iterations (≥ 0).
    #[arg(
        long,
        default_value_t = 5,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub p2pmark_warmup: i64,
    /// Dependent reads per latency kernel (≥ 1).
    #[arg(
        long,
        default_value_t = 10_000,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub p2pmark_latency_iters: i64,
    /// GPUs used at most (0 = all; at most 8).
    #[arg(
        long,
        default_value_t = 0,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub p2pmark_max_gpus: i64,
    /// Allreduce sizes: full (256 B … 1 MiB sweep) or positive MiB integers, comma separated.
    #[arg(long, default_value = "full", value_name = "LIST")]
    pub p2pmark_allreduce_sizes_mb: String,
    /// P2P diagnostic time limit, seconds (> 0).
    #[arg(
        long,
        value_parser = crate::cli_float::number,
        default_value_t = 300.0,
        allow_hyphen_values = true,
        value_name = "SECONDS"
    )]
    pub p2pmark_timeout: f64,
    /// Measure the CPU/NUMA fabric (any Linux machine) before the benchmark and embed it.
    #[arg(long)]
    pub amd_fabric: bool,
    /// Measure only the CPU/NUMA fabric (implies --amd-fabric); nothing is sent to a server.
    #[arg(long)]
    pub amd_fabric_only: bool,
    /// Expanded CPU fabric console report; also prints the helper's full command.
    #[arg(long)]
    pub amd_fabric_detail: bool,
    /// External CPU fabric helper printing the reference's JSON line (empty: the built-in
    /// measurement).
    #[arg(long, default_value = "", value_name = "PATH")]
    pub amd_fabric_bin: String,
    /// Bandwidth buffer per node pair, MiB (≥ 1).
    #[arg(
        long,
        default_value_t = 512,
        allow_hyphen_values = true,
        value_name = "MIB"
    )]
    pub amd_fabric_size_mb: i64,
    /// Pointer-chase working set, MiB (≥ 1).
    #[arg(
        long,
        default_value_t = 256,
        allow_hyphen_values = true,
        value_name = "MIB"
    )]
    pub amd_fabric_latency_mb: i64,
    /// Timed bandwidth passes (≥ 1).
    #[arg(
        long,
        default_value_t = 5,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub amd_fabric_iters: i64,
    /// Warmup passes (≥ 0).
    #[arg(
        long,
        default_value_t = 1,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub amd_fabric_warmup: i64,
    /// Threads per node (0 = min(64, CPUs of the smallest node)).
    #[arg(
        long,
        default_value_t = 0,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub amd_fabric_threads: i64,
    /// Dependent reads per latency cell (≥ 1).
    #[arg(
        long,
        default_value_t = 5_000_000,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub amd_fabric_latency_iters: i64,
    /// NUMA nodes measured at most (0 = all; above the count: all, with a note).
    #[arg(
        long,
        default_value_t = 0,
        allow_hyphen_values = true,
        value_name = "N"
    )]
    pub amd_fabric_max_nodes: i64,
    /// CPU fabric time limit, seconds (> 0).
    #[arg(
        long,
        value_parser = crate::cli_float::number,
        default_value_t = 600.0,
        allow_hyphen_values = true,
        value_name = "SECONDS"
    )]
    pub amd_fabric_timeout: f64,
}

impl Default for FabricArgs {
    /// The same values as the flags' defaults (nothing asked for).
    fn default() -> Self {
        let p = ldb_fabric::P2pSettings::default();
        let c = ldb_fabric::CpuFabricSettings::default();
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        FabricArgs {
            p2pmark: false,
            p2pmark_only: false,
            p2pmark_detail: false,
            p2pmark_bin: String::new(),
            p2pmark_mode: p.mode,
            p2pmark_size_mb: i(p.size_mb),
            p2pmark_iters: i(p.iters),
            p2pmark_warmup: i(p.warmup),
            p2pmark_latency_iters: i(p.latency_iters),
            p2pmark_max_gpus: i(p.max_gpus),
            p2pmark_allreduce_sizes_mb: "full".into(),
            p2pmark_timeout: p.timeout_s,
            amd_fabric: false,
            amd_fabric_only: false,
            amd_fabric_detail: false,
            amd_fabric_bin: String::new(),
            amd_fabric_size_mb: i(c.size_mb),
            amd_fabric_latency_mb: i(c.latency_mb),
            amd_fabric_iters: i(c.iters),
            amd_fabric_warmup: i(c.warmup),
            amd_fabric_threads: i(c.threads),
            amd_fabric_latency_iters: i(c.latency_iters),
            amd_fabric_max_nodes: i(c.max_nodes),
            amd_fabric_timeout: c.timeout_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn default_equals_the_flags_defaults() {
        let cli = crate::cli::Cli::try_parse_from(["x"]).expect("parses");
        assert_eq!(
            format!("{:?}", cli.bench.fabric),
            format!("{:?}", FabricArgs::default())
        );
    }
}
