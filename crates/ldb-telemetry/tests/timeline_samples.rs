//! The samples a cell's timeline takes between two marks, from the fake
//! `nvidia-smi` (four GPUs: 619 W together, utilisation 99, 0, 50 and 49 %),
//! put on the cell's axis by `ldb_core::timeline::build`.

use ldb_core::timeline::{TimelineCounter, build};
use ldb_telemetry::{BackendChoice, HardwareMonitor, MonitorConfig};
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

#[test]
fn samples_between_marks_become_the_timelines_gpu_points() {
    let mut cfg = MonitorConfig::from_flags(0.1, false, 8);
    cfg.gpu.backend = BackendChoice::NvidiaSmi;
    cfg.gpu.nvidia_smi = fixture("bin/nvidia-smi");
    cfg.gpu.nvml_lib = Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1"));
    cfg.gpu.query_timeout = Duration::from_millis(500);
    cfg.gpu.dmon_timeout = Duration::from_millis(500);
    cfg.hwmon_root = fixture("hwmon");
    let hw = HardwareMonitor::start(cfg);
    let deadline = Instant::now() + Duration::from_secs(20);
    while hw.summary().samples < 1 && Instant::now() < deadline {
        sleep(Duration::from_millis(20));
    }
    let (a, t_a) = (hw.mark(), hw.elapsed_s());
    sleep(Duration::from_millis(450));
    let (b, t_b) = (hw.mark(), hw.elapsed_s());
    let samples = hw.samples_between(a, b);
    hw.stop();
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|s| (t_a..=t_b).contains(&s.t_s)));

    // The cell launched at monitor time t_a; its run clock is the monitor's
    // plus 1000 s.
    let counter = TimelineCounter::default();
    counter.start_at(t_a + 1000.0);
    let counts = counter.counts().expect("started");
    let t = build(&counts, (t_a + 1000.1, t_b + 1000.0), &[], &samples, 1000.0);
    let g = t.gpu.expect("GPU points");
    assert_eq!(g.t_s.len(), samples.len());
    assert!(
        g.t_s.iter().all(|&x| (0.0..=t_b - t_a + 0.01).contains(&x)),
        "{:?}",
        g.t_s
    );
    assert!(
        g.power_w.iter().all(|p| *p == Some(619.0)),
        "{:?}",
        g.power_w
    );
    assert!(
        g.util_pct.iter().all(|u| *u == Some(49.5)),
        "{:?}",
        g.util_pct
    );
    assert!(g.pcie_rx_mb_s.iter().all(|r| r.is_some_and(|r| r > 0.0)));
}
