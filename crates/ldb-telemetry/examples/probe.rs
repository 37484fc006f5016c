//! Reads the hardware once through every path and prints what it found:
//! NVML directly, the `nvidia-smi` fallback, the monitor (a few samples and
//! a summary), and the startup diagnostics. Exits 0 even when nothing works,
//! so its output is the result.
//!
//! ```text
//! cargo run --release -p ldb-telemetry --example probe -- [seconds]
//! ```

use ldb_telemetry::gpu::{BackendChoice, GpuConfig, GpuSource, NvmlSource, SmiSource};
use ldb_telemetry::{HardwareMonitor, MonitorConfig, collect_startup_diagnostics};
use serde_json::json;
use std::time::{Duration, Instant};

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(6.0);
    println!("== NVML");
    let t = Instant::now();
    match NvmlSource::open(None) {
        Ok(mut s) => {
            println!(
                "init ok in {:.0} ms, {} GPU(s)",
                t.elapsed().as_secs_f64() * 1e3,
                s.count()
            );
            for inv in s.inventory() {
                println!("inventory: {}", json!(inv));
            }
            let t = Instant::now();
            match s.sample() {
                Ok(gpus) => {
                    println!("sample took {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
                    for g in gpus {
                        println!("sample: {}", json!(g));
                    }
                }
                Err(e) => println!("sample failed: {e}"),
            }
        }
        Err(e) => println!("unavailable: {e}"),
    }

    println!("== nvidia-smi");
    let cfg = GpuConfig {
        backend: BackendChoice::NvidiaSmi,
        ..GpuConfig::default()
    };
    match SmiSource::open(&cfg) {
        Ok(mut s) => {
            let t = Instant::now();
            match s.sample() {
                Ok(gpus) => {
                    println!(
                        "sample (query + dmon) took {:.0} ms",
                        t.elapsed().as_secs_f64() * 1e3
                    );
                    for g in gpus {
                        println!("sample: {}", json!(g));
                    }
                }
                Err(e) => println!("sample failed: {e}"),
            }
        }
        Err(e) => println!("unavailable: {e}"),
    }
    let (src, warning) = GpuSource::open(&GpuConfig::default());
    println!("auto backend: {} warning: {:?}", src.name(), warning);
    drop(src);

    println!("== monitor ({seconds} s at 0.5 s)");
    let hw = HardwareMonitor::start(MonitorConfig::from_flags(0.5, false, 8));
    println!("backend: {} warning: {:?}", hw.backend(), hw.warning());
    let mark = hw.mark();
    std::thread::sleep(Duration::from_secs_f64(seconds.clamp(0.5, 120.0)));
    let cell = hw.summary_since(mark);
    hw.stop();
    println!("latest: {}", json!(hw.latest()));
    println!(
        "summary_since(mark): {}",
        serde_json::to_string_pretty(&cell).unwrap_or_default()
    );
    println!("summary(): {}", json!(hw.summary()));

    println!("== startup diagnostics");
    let d = collect_startup_diagnostics(
        &[("probe".to_string(), json!(true))],
        "http://127.0.0.1:8000",
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&d.to_json()).unwrap_or_default()
    );
    println!("p2p: {}", d.nvidia_p2p_override.summary_line());
}
