//! The fabric flags validated into settings: each bound violated is one
//! line naming the flag (exit 2), before anything is measured or sent.

use ldb_fabric::settings::{allreduce_sizes, at_least, helper_path, p2p_mode, positive_seconds};
use ldb_fabric::{CpuFabricSettings, P2pSettings};

use crate::cli_fabric::FabricArgs;

/// What the fabric flags ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct FabricPlan {
    /// `--p2pmark` (or `--p2pmark-only`).
    pub p2p: Option<P2pSettings>,
    /// `--amd-fabric` (or `--amd-fabric-only`).
    pub cpu: Option<CpuFabricSettings>,
    /// An `--…-only` flag: measure and stop, no server.
    pub only: bool,
}

impl FabricPlan {
    /// Is any diagnostic asked for?
    pub fn any(&self) -> bool {
        self.p2p.is_some() || self.cpu.is_some()
    }

    /// The fabric-only file's `metadata.mode`.
    pub fn only_mode(&self) -> &'static str {
        match (self.p2p.is_some(), self.cpu.is_some()) {
            (true, true) => "p2pmark_amd_fabric_only",
            (true, false) => "p2pmark_only",
            _ => "amd_fabric_only",
        }
    }
}

/// Validate every fabric flag (also those of a diagnostic not asked for,
/// as the reference's parser does).
pub fn fabric_plan(a: &FabricArgs) -> Result<FabricPlan, String> {
    let p2p = P2pSettings {
        mode: p2p_mode(&a.p2pmark_mode)?,
        size_mb: at_least("--p2pmark-size-mb", a.p2pmark_size_mb, 1)?,
        iters: at_least("--p2pmark-iters", a.p2pmark_iters, 1)?,
        warmup: at_least("--p2pmark-warmup", a.p2pmark_warmup, 0)?,
        latency_iters: at_least("--p2pmark-latency-iters", a.p2pmark_latency_iters, 1)?,
        max_gpus: at_least("--p2pmark-max-gpus", a.p2pmark_max_gpus, 0)?,
        allreduce_sizes: allreduce_sizes(&a.p2pmark_allreduce_sizes_mb)?,
        timeout_s: positive_seconds("--p2pmark-timeout", a.p2pmark_timeout)?,
        bin: helper_path(&a.p2pmark_bin),
        detail: a.p2pmark_detail,
    };
    let cpu = CpuFabricSettings {
        size_mb: at_least("--amd-fabric-size-mb", a.amd_fabric_size_mb, 1)?,
        latency_mb: at_least("--amd-fabric-latency-mb", a.amd_fabric_latency_mb, 1)?,
        iters: at_least("--amd-fabric-iters", a.amd_fabric_iters, 1)?,
        warmup: at_least("--amd-fabric-warmup", a.amd_fabric_warmup, 0)?,
        threads: at_least("--amd-fabric-threads", a.amd_fabric_threads, 0)?,
        latency_iters: at_least("--amd-fabric-latency-iters", a.amd_fabric_latency_iters, 1)?,
        max_nodes: at_least("--amd-fabric-max-nodes", a.amd_fabric_max_nodes, 0)?,
        timeout_s: positive_seconds("--amd-fabric-timeout", a.amd_fabric_timeout)?,
        bin: helper_path(&a.amd_fabric_bin),
        detail: a.amd_fabric_detail,
    };
    Ok(FabricPlan {
        p2p: (a.p2pmark || a.p2pmark_only).then_some(p2p),
        cpu: (a.amd_fabric || a.amd_fabric_only).then_some(cpu),
        only: a.p2pmark_only || a.amd_fabric_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<FabricPlan, String> {
        let cli = crate::cli::Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        fabric_plan(&cli.bench.fabric)
    }

    #[test]
    fn defaults_are_the_references() {
        let p = plan(&["--p2pmark", "--amd-fabric"]).expect("valid");
        assert_eq!(p.p2p, Some(P2pSettings::default()));
        assert_eq!(p.cpu, Some(CpuFabricSettings::default()));
        assert!(!p.only);
        assert!(!plan(&[]).expect("valid").any());
    }

    #[test]
    fn only_implies_the_diagnostic_and_names_the_mode() {
        let p = plan(&["--amd-fabric-only", "--amd-fabric-size-mb", "8"]).expect("valid");
        assert_eq!(p.cpu.as_ref().map(|c| c.size_mb), Some(8));
        assert!(p.only && p.p2p.is_none());
        assert_eq!(p.only_mode(), "amd_fabric_only");
        let p = plan(&["--p2pmark-only", "--amd-fabric"]).expect("valid");
        assert_eq!(p.only_mode(), "p2pmark_amd_fabric_only");
    }

    #[test]
    fn out_of_bounds_values_are_one_line_naming_the_flag() {
        for (flag, v) in [
            ("--p2pmark-size-mb", "0"),
            ("--p2pmark-iters", "0"),
            ("--p2pmark-warmup", "-1"),
            ("--p2pmark-latency-iters", "0"),
            ("--p2pmark-max-gpus", "-2"),
            ("--p2pmark-timeout", "0"),
            ("--p2pmark-mode", "fast"),
            ("--p2pmark-allreduce-sizes-mb", "1,0"),
            ("--amd-fabric-size-mb", "0"),
            ("--amd-fabric-latency-mb", "0"),
            ("--amd-fabric-iters", "0"),
            ("--amd-fabric-warmup", "-1"),
            ("--amd-fabric-threads", "-1"),
            ("--amd-fabric-latency-iters", "0"),
            ("--amd-fabric-max-nodes", "-1"),
            ("--amd-fabric-timeout", "-5"),
        ] {
            let e = plan(&[flag, v]).expect_err(flag);
            assert!(e.starts_with(&format!("invalid {flag}")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
