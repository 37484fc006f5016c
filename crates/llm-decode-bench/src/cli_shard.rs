//! The shard flags (`--shards`, `--shard-index`, `--coordinator`, …):
//! several client processes measuring one server as one benchmark
//! (docs/shards.md). Checked and resolved in `shard.rs`.

use clap::Args;

/// Shard flags.
#[derive(Debug, Args, Clone, Default)]
#[command(
    next_help_heading = "Shards: one measurement from several client processes (docs/shards.md)"
)]
pub struct ShardArgs {
    /// Client processes that share the load (1: this process alone).
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// This process's index, 0 (the leader) to N−1 [default: $JOB_COMPLETION_INDEX, else $SLURM_PROCID].
    #[arg(long, value_name = "I")]
    pub shard_index: Option<u32>,
    /// The leader's address, HOST:PORT (port 29517 when left out) [default on Slurm: the job's first host].
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: Option<String>,
    /// Leader: the address to listen on, HOST:PORT or [V6]:PORT, when --coordinator's name is not this host's own address (a Service, a load balancer) [default: --coordinator].
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator_listen: Option<String>,
    /// The join secret every shard shares, at least 128 bits (`openssl rand -hex 32`; better: env LDB_SHARD_SECRET); never printed or saved.
    #[arg(
        long,
        env = "LDB_SHARD_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub shard_secret: Option<String>,
    /// When a follower is lost mid-cell: continue (split over the shards left) or stop the run.
    #[arg(long, value_name = "continue|stop", default_value = "continue")]
    pub on_shard_loss: String,
    /// Seconds to wait for every shard to join (leader) or for the leader (follower).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "S", default_value_t = 120.0)]
    pub shard_join_timeout: f64,
    /// Offline shard: run this shard's share of every cell on a fixed time grid from this Unix time (no coordinator).
    #[arg(long, value_parser = crate::cli_float::unix_time, value_name = "UNIX_TIME")]
    pub start_at: Option<f64>,
    /// Offline shard: seconds from the streams' start to the window (replaces readiness).
    #[arg(long, value_parser = crate::cli_float::number, value_name = "S", default_value_t = 10.0)]
    pub ramp_seconds: f64,
}
