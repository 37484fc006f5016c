//! The sampler end to end against fake `nvidia-smi` programs (selected by
//! configuration, never through the test process's `PATH`).

use ldb_core::hardware::summary::Throttle;
use ldb_telemetry::gpu::NvmlSource;
use ldb_telemetry::{
    BackendChoice, HardwareMonitor, MonitorConfig, MonitorHandle, tokens_per_joule,
};
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn config(fake: &str, backend: BackendChoice) -> MonitorConfig {
    let mut cfg = MonitorConfig::from_flags(0.1, false, 8);
    cfg.gpu.backend = backend;
    cfg.gpu.nvidia_smi = fixture(&format!("bin/{fake}"));
    cfg.gpu.nvml_lib = Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1"));
    cfg.gpu.query_timeout = Duration::from_millis(500);
    cfg.gpu.dmon_timeout = Duration::from_millis(500);
    cfg.hwmon_root = fixture("hwmon");
    cfg
}

fn wait_for_samples(hw: &MonitorHandle, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while hw.summary().samples < n && Instant::now() < deadline {
        sleep(Duration::from_millis(20));
    }
}

#[test]
fn fake_nvidia_smi_end_to_end() {
    let hw = HardwareMonitor::start(config("nvidia-smi", BackendChoice::NvidiaSmi));
    assert_eq!(hw.backend(), "nvidia-smi");
    assert_eq!(hw.warning(), None);
    wait_for_samples(&hw, 2);
    let mark = hw.mark();
    sleep(Duration::from_millis(450));
    let cell = hw.summary_since(mark);
    wait_for_samples(&hw, 4);
    let run = hw.summary();
    hw.stop();
    assert!(!hw.is_running());

    assert!(run.samples >= 4, "{run:?}");
    assert_eq!(run.gpu_count, 4);
    assert_eq!(run.gpu_util_avg_pct, Some(49.5));
    assert_eq!(run.gpu_util_max_pct, Some(99.0));
    assert_eq!(run.power_total_avg_w, Some(619.0));
    assert_eq!(run.pcie_rx_avg_mb_s, Some(2535.0));
    assert_eq!(run.pcie_tx_max_mb_s, Some(2322.0));
    assert_eq!(run.vram_used_max_pct, Some(48.42));
    assert_eq!(run.sm_clock_avg_mhz, Some(2411.25));
    assert_eq!(run.cpu_temp_max_c, Some(67.5));
    assert_eq!(run.throttle, Throttle::Power);
    // Constant power: energy is power × span.
    let e = run.energy_joules.unwrap_or(0.0);
    assert!(
        (e - 619.0 * run.duration_seconds).abs() < 1.0,
        "{e} vs {}",
        run.duration_seconds
    );

    // The cell's energy covers its whole window, not just the sample span.
    let window = cell.energy_window_seconds.unwrap_or(0.0);
    assert!((0.44..5.0).contains(&window), "{window}");
    let e = cell.energy_joules.unwrap_or(0.0);
    assert!((e / window - 619.0).abs() < 0.5, "{e} J over {window} s");
    let tpj = tokens_per_joule(619.0, &cell).unwrap_or(0.0);
    assert!((tpj * window - 1.0).abs() < 0.01, "{tpj}");
    assert_eq!(hw.latest().map(|s| s.gpus.len()), Some(4));
    assert_eq!(hw.live().map(|l| l.gpus.len()), Some(4));
    assert_eq!(hw.gpu_limit(), 8);
    // An index that was never marked: energy over the snapshots' span only.
    let all = hw.summary_since(0);
    assert_eq!(all.samples, run.samples);
    assert_eq!(all.energy_window_seconds, Some(run.duration_seconds));
}

#[test]
fn summary_between_two_marks() {
    let hw = HardwareMonitor::start(config("nvidia-smi", BackendChoice::NvidiaSmi));
    wait_for_samples(&hw, 1);
    let a = hw.mark();
    sleep(Duration::from_millis(350));
    let b = hw.mark();
    sleep(Duration::from_millis(250));
    let s = hw.summary_between(a, b);
    hw.stop();
    assert!(s.samples >= 1, "{s:?}");
    let w = s.energy_window_seconds.unwrap_or(0.0);
    assert!((0.34..3.0).contains(&w), "{w}");
    assert!(hw.summary_between(b, a).is_empty());
}

#[test]
fn older_driver_without_throttle_field_or_dmon() {
    let hw = HardwareMonitor::start(config("nvidia-smi-old", BackendChoice::NvidiaSmi));
    assert_eq!(hw.backend(), "nvidia-smi");
    wait_for_samples(&hw, 2);
    hw.stop();
    let s = hw.summary();
    assert_eq!(s.power_total_avg_w, Some(619.0));
    assert_eq!(s.throttle, Throttle::Unknown);
    assert_eq!(s.pcie_rx_avg_mb_s, None);
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert!(v["pcie_rx_avg_mb_s"].is_null());
}

#[test]
fn na_fields_do_not_break_sampling() {
    let hw = HardwareMonitor::start(config("nvidia-smi-na", BackendChoice::NvidiaSmi));
    wait_for_samples(&hw, 2);
    hw.stop();
    let s = hw.summary();
    assert_eq!(s.gpu_count, 8);
    assert_eq!(s.power_total_avg_w, Some(3097.17));
    // Power cap and thermal slowdown in every snapshot: ties go to thermal.
    assert_eq!(s.throttle, Throttle::Thermal);
}

#[test]
fn hanging_nvidia_smi_is_bounded_and_reported() {
    let t = Instant::now();
    let hw = HardwareMonitor::start(config("nvidia-smi-hang", BackendChoice::NvidiaSmi));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(hw.backend(), "none");
    let w = hw.warning().unwrap_or_default();
    assert!(w.contains("timed out"), "{w}");
    // CPU is still sampled; GPU summaries are empty.
    let deadline = Instant::now() + Duration::from_secs(5);
    while hw.latest().is_none() && Instant::now() < deadline {
        sleep(Duration::from_millis(20));
    }
    let latest = hw.latest();
    assert!(
        latest
            .as_ref()
            .is_some_and(|s| s.gpus.is_empty() && s.cpu.temps_c.contains_key("CPU0"))
    );
    assert!(hw.summary().is_empty());
    assert_eq!(
        serde_json::to_string(&hw.summary()).ok().as_deref(),
        Some("{}")
    );
    hw.stop();
}

#[test]
fn garbage_output_turns_telemetry_off_with_a_reason() {
    let hw = HardwareMonitor::start(config("nvidia-smi-garbage", BackendChoice::NvidiaSmi));
    assert_eq!(hw.backend(), "none");
    assert!(
        hw.warning()
            .unwrap_or_default()
            .contains("no usable GPU rows")
    );
    hw.stop();
}

#[test]
fn missing_nvidia_smi_and_nvml_gives_one_warning() {
    let hw = HardwareMonitor::start(config("does-not-exist", BackendChoice::Auto));
    assert_eq!(hw.backend(), "none");
    let w = hw.warning().unwrap_or_default();
    assert!(w.starts_with("GPU telemetry off: NVML unavailable"), "{w}");
    assert!(w.contains("nvidia-smi unavailable"), "{w}");
    hw.stop();
}

#[test]
fn nvml_absent_falls_back_to_nvidia_smi() {
    let hw = HardwareMonitor::start(config("nvidia-smi", BackendChoice::Auto));
    assert_eq!(hw.backend(), "nvidia-smi");
    assert_eq!(hw.warning(), None);
    hw.stop();
}

#[test]
fn nvml_with_a_bad_library_path_fails_gracefully() {
    let err = NvmlSource::open(Some(Path::new("/nonexistent/libnvidia-ml.so.1")));
    assert!(err.is_err());
    // The default lookup either works (GPU host) or fails cleanly.
    let _ = NvmlSource::open(None);
}

#[test]
fn disabled_monitor_is_idle() {
    for cfg in [
        MonitorConfig::from_flags(0.0, false, 8),
        MonitorConfig::from_flags(2.0, true, 0),
    ] {
        let hw = HardwareMonitor::start(cfg);
        assert_eq!(hw.backend(), "none");
        assert!(!hw.is_running());
        assert!(hw.latest().is_none());
        assert!(hw.summary_since(hw.mark()).is_empty());
        assert_eq!(hw.warning(), None);
        assert!(hw.gpu_limit() >= 1);
        hw.stop();
    }
}

#[test]
fn dropping_the_last_handle_stops_the_thread() {
    let hw = HardwareMonitor::start(config("nvidia-smi", BackendChoice::NvidiaSmi));
    let clone = hw.clone();
    drop(hw);
    assert!(clone.is_running());
    let t = Instant::now();
    drop(clone);
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn handle_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<MonitorHandle>();
}
