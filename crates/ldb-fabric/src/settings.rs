//! The fabric flags, validated: the reference's defaults and bounds, each
//! violation one line naming the flag (pure; the binary maps it to exit 2).

use std::path::PathBuf;

/// `--p2pmark-mode` values.
pub const P2P_MODES: &[&str] = &["all", "bandwidth", "latency", "allreduce"];

/// The CPU/NUMA fabric run (`--amd-fabric*`).
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFabricSettings {
    /// Bandwidth buffer per (CPU node, memory node) pair, MiB.
    pub size_mb: u64,
    /// Pointer-chase working set, MiB.
    pub latency_mb: u64,
    /// Timed bandwidth passes.
    pub iters: u64,
    /// Untimed passes before them.
    pub warmup: u64,
    /// Threads per node; 0 = min(64, CPUs of the smallest node).
    pub threads: u64,
    /// Dependent reads per latency cell.
    pub latency_iters: u64,
    /// Nodes measured at most; 0 = all.
    pub max_nodes: u64,
    /// Limit for the whole run, seconds (helper: killed after it).
    pub timeout_s: f64,
    /// External helper to run instead of the native measurement.
    pub bin: Option<PathBuf>,
    /// Expanded console report.
    pub detail: bool,
}

impl Default for CpuFabricSettings {
    fn default() -> Self {
        CpuFabricSettings {
            size_mb: 512,
            latency_mb: 256,
            iters: 5,
            warmup: 1,
            threads: 0,
            latency_iters: 5_000_000,
            max_nodes: 0,
            timeout_s: 600.0,
            bin: None,
            detail: false,
        }
    }
}

/// `--p2pmark-allreduce-sizes-mb`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllreduceSizes {
    /// The reference's sweep, 256 B … 1 MiB.
    Full,
    /// Sizes in MiB, as given.
    Mib(Vec<u64>),
}

/// The GPU peer-to-peer run (`--p2pmark*`).
#[derive(Debug, Clone, PartialEq)]
pub struct P2pSettings {
    /// `all`, `bandwidth`, `latency` or `allreduce`.
    pub mode: String,
    /// Copy buffer, MiB.
    pub size_mb: u64,
    /// Timed iterations.
    pub iters: u64,
    /// Warmup iterations.
    pub warmup: u64,
    /// Dependent reads per latency kernel.
    pub latency_iters: u64,
    /// GPUs used at most (0 = all; the reference caps at 8).
    pub max_gpus: u64,
    /// Allreduce sweep.
    pub allreduce_sizes: AllreduceSizes,
    /// Limit, seconds.
    pub timeout_s: f64,
    /// External helper.
    pub bin: Option<PathBuf>,
    /// Expanded console report.
    pub detail: bool,
}

impl Default for P2pSettings {
    fn default() -> Self {
        P2pSettings {
            mode: "all".into(),
            size_mb: 64,
            iters: 20,
            warmup: 5,
            latency_iters: 10_000,
            max_gpus: 0,
            allreduce_sizes: AllreduceSizes::Full,
            timeout_s: 300.0,
            bin: None,
            detail: false,
        }
    }
}

/// A count flag as given (signed, so that `-1` gets our one-line answer).
pub fn at_least(flag: &str, v: i64, min: i64) -> Result<u64, String> {
    if v < min {
        return Err(format!("invalid {flag}: {v} (must be at least {min})"));
    }
    u64::try_from(v).map_err(|_| format!("invalid {flag}: {v}"))
}

/// A timeout flag: finite and above zero.
pub fn positive_seconds(flag: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "invalid {flag}: {v} (must be a number of seconds above 0)"
        ))
    }
}

/// `--p2pmark-mode`.
pub fn p2p_mode(v: &str) -> Result<String, String> {
    if P2P_MODES.contains(&v) {
        Ok(v.to_string())
    } else {
        Err(format!(
            "invalid --p2pmark-mode: {v:?} (use {})",
            P2P_MODES.join(", ")
        ))
    }
}

/// `--p2pmark-allreduce-sizes-mb`: `full`, or positive MiB integers
/// separated by commas (blanks around them allowed).
pub fn allreduce_sizes(v: &str) -> Result<AllreduceSizes, String> {
    let t = v.trim();
    if t.eq_ignore_ascii_case("full") {
        return Ok(AllreduceSizes::Full);
    }
    let bad = || {
        format!(
            "invalid --p2pmark-allreduce-sizes-mb: {v:?} (use full or positive MiB integers, e.g. 1,2,4)"
        )
    };
    let sizes = t
        .split(',')
        .map(|p| p.trim().parse::<u64>().ok().filter(|&n| n > 0))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(bad)?;
    Ok(AllreduceSizes::Mib(sizes))
}

/// An external helper path: empty means "none" (the reference's default).
pub fn helper_path(v: &str) -> Option<PathBuf> {
    (!v.trim().is_empty()).then(|| PathBuf::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_the_references_and_errors_are_one_line() {
        assert_eq!(at_least("--p2pmark-size-mb", 64, 1), Ok(64));
        let e = at_least("--p2pmark-size-mb", 0, 1).expect_err("0 MiB");
        assert_eq!(e, "invalid --p2pmark-size-mb: 0 (must be at least 1)");
        assert_eq!(at_least("--amd-fabric-warmup", 0, 0), Ok(0));
        assert!(at_least("--amd-fabric-warmup", -1, 0).is_err());
        assert!(positive_seconds("--p2pmark-timeout", 0.0).is_err());
        assert!(positive_seconds("--p2pmark-timeout", f64::NAN).is_err());
        assert_eq!(positive_seconds("--p2pmark-timeout", 1.5), Ok(1.5));
        assert!(p2p_mode("latency").is_ok());
        assert!(
            p2p_mode("fast")
                .expect_err("bad")
                .contains("all, bandwidth")
        );
    }

    #[test]
    fn allreduce_sizes_are_full_or_positive_integers() {
        assert_eq!(allreduce_sizes("full"), Ok(AllreduceSizes::Full));
        assert_eq!(
            allreduce_sizes("1, 2,64"),
            Ok(AllreduceSizes::Mib(vec![1, 2, 64]))
        );
        for bad in ["", "0", "1,,2", "1.5", "-4", "x"] {
            let e = allreduce_sizes(bad).expect_err(bad);
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(helper_path(" "), None);
        assert_eq!(helper_path("/x"), Some(PathBuf::from("/x")));
    }
}
