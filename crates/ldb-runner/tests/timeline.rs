//! Cell timelines against the simulator's known truth (issue 37, item 4):
//! the client series adds up to the window's count and runs at the known
//! rate, the server points show the known running count, and GPU samples
//! land on the cell's axis.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{FLAT, SERIAL, cell, config, start, within};
use ldb_core::hardware::{GpuSample, HardwareSnapshot, HardwareSummary};
use ldb_runner::ctx::Hardware;

/// A monitor sampling every 0.1 s since it was made: sample `i` was taken
/// at `i × 0.1` s on its clock, two GPUs at 100 W and 150 W.
struct TenHz(Instant);

impl TenHz {
    fn now_index(&self) -> usize {
        (self.0.elapsed().as_secs_f64() * 10.0).floor() as usize
    }
}

impl Hardware for TenHz {
    fn mark(&self) -> usize {
        self.now_index() + 1
    }
    fn summary_since(&self, _mark: usize) -> HardwareSummary {
        HardwareSummary::default()
    }
    fn summary_between(&self, _a: usize, _b: usize) -> HardwareSummary {
        HardwareSummary::default()
    }
    fn samples_between(&self, a: usize, b: usize) -> Vec<HardwareSnapshot> {
        let gpu = |w: f64| GpuSample {
            power_w: Some(w),
            util_pct: Some(90.0),
            ..GpuSample::default()
        };
        (a..b.min(self.now_index() + 1))
            .map(|i| HardwareSnapshot {
                t_s: i as f64 * 0.1,
                gpus: vec![gpu(100.0), gpu(150.0)],
                ..HardwareSnapshot::default()
            })
            .collect()
    }
    fn elapsed_s(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_adds_up_to_the_cell_and_runs_at_the_known_rate() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let c = 4u32;
    let (live, _rx) = ldb_runner::live::Live::new();
    let hooks = ldb_runner::run::RunHooks {
        live,
        controls: Arc::default(),
        hardware: Some(Arc::new(TenHz(Instant::now()))),
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let mut cfg = config(&sim, &[c], &[0], 4.0);
    // Gauges every second inside the window (the default reads every 10 s).
    cfg.timing.metrics_interval = 1.0;
    let out = ldb_runner::run::run(cfg, hooks).await.expect("run");
    let r = cell(&out.doc, c, 0);
    let t = r
        .ext
        .timeline
        .as_ref()
        .expect("a sustained cell has a timeline");

    // The window's bins are the window's count, token for token.
    assert_eq!(t.window_tokens(), r.client_output_tokens);
    assert!(r.client_output_tokens > 0);
    let len = t.window_end_s - t.window_start_s;
    assert!(
        (len - r.measurement_seconds).abs() < 2e-3,
        "{len} vs {}",
        r.measurement_seconds
    );
    let rate = t.window_tokens() as f64 / r.measurement_seconds;
    assert!((rate - r.aggregate_tps.unwrap()).abs() < 1e-6 * rate);
    // FLAT: every stream gets one token per step of 10 ms + 0.2 ms per sequence.
    let truth = f64::from(c) / (0.010 + 0.0002 * f64::from(c));
    let ramp = t.client_ramp_bins as usize;
    let whole = len.floor() as usize;
    for (k, &n) in t.client_tokens[ramp..ramp + whole].iter().enumerate() {
        assert!(
            within(n as f64, truth, 0.12),
            "window second {k}: {n} vs {truth:.0}"
        );
    }
    assert_eq!(
        t.client_tokens.len(),
        ramp + len.ceil() as usize,
        "one entry per started second"
    );
    assert!(t.window_start_s >= 0.0 && f64::from(t.client_ramp_bins) >= t.window_start_s);

    // Server points: the simulator runs all C streams once ready.
    let s = t.server.as_ref().expect("the simulator has /metrics");
    let inside: Vec<usize> = (0..s.t_s.len())
        .filter(|&i| s.t_s[i] >= t.window_start_s)
        .collect();
    assert!(inside.len() >= 4, "window scrapes at {:?}", s.t_s);
    assert!(
        s.t_s.len() > inside.len(),
        "ramp-up scrapes too: {:?}",
        s.t_s
    );
    for i in inside {
        assert_eq!(s.running[i], Some(f64::from(c)), "scrape at {} s", s.t_s[i]);
        assert_eq!(s.waiting[i], Some(0.0));
    }
    assert!(s.t_s.windows(2).all(|w| w[0] < w[1]), "{:?}", s.t_s);

    // GPU samples: every 0.1 s from the launch to the window's end.
    let g = t.gpu.as_ref().expect("samples");
    assert!(g.power_w.iter().all(|p| *p == Some(250.0)));
    assert!(
        g.t_s
            .iter()
            .all(|&x| (-0.05..=t.window_end_s + 0.05).contains(&x))
    );
    let expected = t.window_end_s * 10.0;
    assert!(
        (g.t_s.len() as f64 - expected).abs() <= 3.0,
        "{} samples over {:.2} s",
        g.t_s.len(),
        t.window_end_s
    );
    sim.shutdown().await;
}
