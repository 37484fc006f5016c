//! Running the fabric diagnostics: before the benchmark (their blocks go
//! into the startup diagnostics, from which the runner copies them into the
//! result), or alone with `--…-only` (the fabric-only file, no server).
//! A diagnostic that fails, times out or is unavailable is a status in the
//! result, never the end of the benchmark.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use ldb_core::document::{FabricBlock, FabricStatus};
use ldb_fabric::settings::AllreduceSizes;
use ldb_fabric::topology::{Roots, Topology};
use ldb_fabric::{CpuFabricSettings, P2pSettings};
use ldb_report::export;
use ldb_report::fabric_only::{FabricOnlyDocument, FabricOnlyMetadata};
use serde_json::{Value, json};

use crate::error::{AppError, exit};
use crate::fabric_config::FabricPlan;

/// The two result blocks (`{"status": "not_run"}` for one not asked for).
#[derive(Debug, Clone)]
pub struct FabricBlocks {
    /// `p2pmark`.
    pub p2pmark: FabricBlock,
    /// `amd_fabric`.
    pub amd_fabric: FabricBlock,
}

/// The fabric flags validated, and the memory check done: exit 2 on either.
pub fn checked_plan(a: &crate::cli_fabric::FabricArgs) -> Result<FabricPlan, AppError> {
    let plan = crate::fabric_config::fabric_plan(a).map_err(AppError::Config)?;
    check_memory(&plan)?;
    Ok(plan)
}

/// The diagnostics asked for, run before the dashboard takes the screen;
/// their blocks join the startup diagnostics (the runner copies them into
/// the result). The dashboard's startup line, when any ran.
pub async fn before_bench(
    plan: &FabricPlan,
    diagnostics: &mut Option<ldb_core::document::StartupDiagnostics>,
) -> Option<String> {
    if !plan.any() {
        return None;
    }
    let (p, width) = (plan.clone(), crate::app::terminal_width());
    let blocks = tokio::task::spawn_blocking(move || run(&p, width, &mut std::io::stdout().lock()))
        .await
        .ok()?;
    let d = diagnostics.get_or_insert_with(Default::default);
    d.p2pmark = Some(blocks.p2pmark.clone());
    d.amd_fabric = Some(blocks.amd_fabric.clone());
    startup_line(&blocks)
}

/// Refuse, before anything is allocated, a CPU fabric run whose buffers do
/// not fit in the memory available now.
fn check_memory(plan: &FabricPlan) -> Result<(), AppError> {
    let Some(cpu) = plan.cpu.as_ref().filter(|c| c.bin.is_none()) else {
        return Ok(());
    };
    let nodes = Topology::read(&Roots::default()).nodes.len();
    let max = usize::try_from(cpu.max_nodes).unwrap_or(usize::MAX);
    let nodes = if max == 0 { nodes } else { nodes.min(max) };
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| ldb_fabric::cpu::available_memory(&m));
    ldb_fabric::cpu::check_memory(cpu, nodes, avail).map_err(AppError::Config)
}

/// The flags a reference-compatible CPU fabric helper takes.
fn cpu_helper_args(s: &CpuFabricSettings) -> Vec<String> {
    let mut a: Vec<String> = [
        ("--size-mb", s.size_mb),
        ("--latency-mb", s.latency_mb),
        ("--iters", s.iters),
        ("--warmup", s.warmup),
        ("--threads", s.threads),
        ("--latency-iters", s.latency_iters),
    ]
    .iter()
    .flat_map(|(f, v)| [f.to_string(), v.to_string()])
    .collect();
    if s.max_nodes > 0 {
        a.extend(["--max-nodes".into(), s.max_nodes.to_string()]);
    }
    a
}

/// The flags a reference-compatible P2P helper takes.
fn p2p_helper_args(s: &P2pSettings) -> Vec<String> {
    let mut a = vec!["--mode".to_string(), s.mode.clone()];
    for (f, v) in [
        ("--size-mb", s.size_mb),
        ("--iters", s.iters),
        ("--warmup", s.warmup),
        ("--latency-iters", s.latency_iters),
    ] {
        a.extend([f.to_string(), v.to_string()]);
    }
    if let AllreduceSizes::Mib(sizes) = &s.allreduce_sizes {
        let list: Vec<String> = sizes.iter().map(u64::to_string).collect();
        a.extend(["--allreduce-sizes-mb".into(), list.join(",")]);
    }
    if s.max_gpus > 0 {
        a.extend(["--max-gpus".into(), s.max_gpus.to_string()]);
    }
    a
}

fn timeout(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// The CPU fabric block: the helper when one is named (the topology is
/// read either way), else the native measurement.
fn run_cpu(s: &CpuFabricSettings, out: &mut impl Write) -> Value {
    let _ = writeln!(
        out,
        "AMD fabric: {} MiB bw, threads={}, iters={}, lat={} MiB/{} reads",
        s.size_mb,
        if s.threads == 0 {
            "auto".to_string()
        } else {
            s.threads.to_string()
        },
        s.iters,
        s.latency_mb,
        s.latency_iters
    );
    let Some(bin) = &s.bin else {
        let _ = writeln!(out, "Running CPU/NUMA fabric diagnostic (built in)");
        let _ = out.flush();
        let v = ldb_fabric::cpu::run_native(s, &Roots::default());
        for note in v["notes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "note: {}", note.as_str().unwrap_or_default());
        }
        return v;
    };
    let suggestion = ldb_fabric::helper::missing_binary_suggestion("--amd-fabric-bin");
    let run = ldb_fabric::helper::HelperRun {
        bin,
        args: cpu_helper_args(s),
        timeout: timeout(s.timeout_s),
        suggestion: &suggestion,
        what: "amd_fabric",
    };
    announce_helper(out, "AMD fabric", &run, s.detail, "--amd-fabric-detail");
    let mut v = ldb_fabric::helper::run_helper(&run);
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "topology".into(),
            Topology::read(&Roots::default()).to_json(),
        );
    }
    v
}

fn announce_helper(
    out: &mut impl Write,
    what: &str,
    run: &ldb_fabric::helper::HelperRun<'_>,
    detail: bool,
    flag: &str,
) {
    if detail {
        let mut cmd = vec![run.bin.display().to_string()];
        cmd.extend(run.args.iter().cloned());
        let _ = writeln!(out, "Running {what} diagnostic: {}", cmd.join(" "));
    } else {
        let _ = writeln!(
            out,
            "Running {what} diagnostic: {} (full command in JSON; use {flag} to print it)",
            run.bin.display()
        );
    }
    let _ = out.flush();
}

/// The P2P block: the helper when one is named, else the built-in back end.
fn run_p2p(s: &P2pSettings, out: &mut impl Write) -> Value {
    let sweep = match &s.allreduce_sizes {
        AllreduceSizes::Full => "256 B..1 MiB default sweep".to_string(),
        AllreduceSizes::Mib(m) => {
            let l: Vec<String> = m.iter().map(|x| format!("{x} MiB")).collect();
            l.join(",")
        }
    };
    let _ = writeln!(
        out,
        "P2P config: mode={}; P2P/topology buffer={} MiB; latency iters={}; allreduce={sweep}",
        s.mode, s.size_mb, s.latency_iters
    );
    let Some(bin) = &s.bin else {
        return ldb_fabric::gpu::run_p2p(s, &ldb_fabric::gpu::CudaDriver::new(s));
    };
    let suggestion = ldb_fabric::helper::missing_binary_suggestion("--p2pmark-bin");
    let run = ldb_fabric::helper::HelperRun {
        bin,
        args: p2p_helper_args(s),
        timeout: timeout(s.timeout_s),
        suggestion: &suggestion,
        what: "p2pmark",
    };
    announce_helper(out, "P2P", &run, s.detail, "--p2pmark-detail");
    let mut v = ldb_fabric::helper::run_helper(&run);
    if let Some(o) = v.as_object_mut() {
        o.insert("mode".into(), json!(s.mode));
    }
    v
}

/// Run what the plan asks for, printing the console lines and reports to
/// `out`. Blocking (the measurement is CPU-bound).
pub fn run(plan: &FabricPlan, width: u16, out: &mut impl Write) -> FabricBlocks {
    // ldb-fabric writes JSON; the result model reads it typed here, once
    let p2pmark = plan
        .p2p
        .as_ref()
        .map_or_else(FabricBlock::default, |s| run_p2p(s, out).into());
    let amd_fabric = plan
        .cpu
        .as_ref()
        .map_or_else(FabricBlock::default, |s| run_cpu(s, out).into());
    let opts = ldb_report::text::fabric::FabricTextOptions {
        width,
        p2p_detail: plan.p2p.as_ref().is_some_and(|s| s.detail),
        cpu_detail: plan.cpu.as_ref().is_some_and(|s| s.detail),
    };
    let _ = write!(
        out,
        "{}",
        ldb_report::text::fabric::render(&p2pmark, &amd_fabric, &opts)
    );
    FabricBlocks {
        p2pmark,
        amd_fabric,
    }
}

/// One line for the dashboard's event log: what each diagnostic gave.
pub fn startup_line(b: &FabricBlocks) -> Option<String> {
    let part = |name: &str, v: &FabricBlock| {
        let st = v.status.as_str();
        v.ran().then(|| {
            let why = v.reason.as_deref().or(v.error.as_deref());
            match why {
                Some(w) => format!("{name} {st} ({w})"),
                None => format!("{name} {st}"),
            }
        })
    };
    let parts: Vec<String> = [
        part("p2pmark", &b.p2pmark),
        part("amd_fabric", &b.amd_fabric),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| format!("startup fabric: {}", parts.join("; ")))
}

/// `--…-only`: measure, write the fabric-only file, print the report. Exit
/// 0 when every diagnostic asked for is `ok`, 4 otherwise (the file is
/// written either way).
pub async fn run_only(plan: FabricPlan, output: &Path, width: u16) -> Result<i32, AppError> {
    ldb_report::json::prepare_output(output).map_err(|e| AppError::Output(e.to_string()))?;
    let mode = plan.only_mode();
    let p = plan.clone();
    let blocks = tokio::task::spawn_blocking(move || run(&p, width, &mut std::io::stdout().lock()))
        .await
        .map_err(|e| AppError::Output(format!("the fabric diagnostic stopped: {e}")))?;
    let p2p_override = ldb_telemetry::diagnostics::check_p2p(
        Path::new(ldb_core::hardware::p2p::PARAMS_PATH),
        Path::new(ldb_core::hardware::p2p::MODPROBE_PATH),
    );
    let doc = FabricOnlyDocument {
        metadata: FabricOnlyMetadata {
            version: env!("CARGO_PKG_VERSION").into(),
            mode: mode.into(),
            timestamp: chrono::Local::now()
                .format("%Y-%m-%dT%H:%M:%S%.6f")
                .to_string(),
            tool: "llm-decode-bench".into(),
        },
        nvidia_p2p_override: Some(p2p_override),
        p2pmark: blocks.p2pmark.clone(),
        amd_fabric: blocks.amd_fabric.clone(),
    };
    export::write_atomic(&export::Json, &doc, output)
        .map_err(|e| AppError::Output(e.to_string()))?;
    let _ = writeln!(std::io::stdout(), "Results saved to {}", output.display());
    let asked = [
        (plan.p2p.is_some(), &blocks.p2pmark),
        (plan.cpu.is_some(), &blocks.amd_fabric),
    ];
    let all_ok = asked
        .iter()
        .filter(|(a, _)| *a)
        .all(|(_, b)| b.status == FabricStatus::Ok);
    Ok(if all_ok {
        exit::OK
    } else {
        exit::INVALID_CELLS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_flags_are_the_references() {
        let a = cpu_helper_args(&CpuFabricSettings {
            max_nodes: 2,
            ..Default::default()
        });
        assert_eq!(
            a.join(" "),
            "--size-mb 512 --latency-mb 256 --iters 5 --warmup 1 --threads 0 --latency-iters 5000000 --max-nodes 2"
        );
        let p = p2p_helper_args(&P2pSettings {
            allreduce_sizes: AllreduceSizes::Mib(vec![1, 4]),
            ..Default::default()
        });
        assert_eq!(
            p.join(" "),
            "--mode all --size-mb 64 --iters 20 --warmup 5 --latency-iters 10000 --allreduce-sizes-mb 1,4"
        );
    }

    #[test]
    fn the_startup_line_names_each_diagnostic_run() {
        let b = FabricBlocks {
            p2pmark: json!({"status": "unavailable", "reason": "no CUDA driver"}).into(),
            amd_fabric: json!({"status": "ok"}).into(),
        };
        assert_eq!(
            startup_line(&b).as_deref(),
            Some("startup fabric: p2pmark unavailable (no CUDA driver); amd_fabric ok")
        );
        let none = FabricBlocks {
            p2pmark: FabricBlock::default(),
            amd_fabric: FabricBlock::default(),
        };
        assert_eq!(startup_line(&none), None);
    }
}
