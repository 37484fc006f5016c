use super::*;
use crate::hardware::{CpuSample, GpuSample};

fn gpu(index: u32, util: f64, power: f64) -> GpuSample {
    GpuSample {
        index,
        util_pct: Some(util),
        mem_util_pct: Some(util / 2.0),
        vram_used_mb: Some(1000.0),
        vram_total_mb: Some(4000.0),
        power_w: Some(power),
        power_limit_w: Some(300.0),
        temp_c: Some(50.0 + f64::from(index)),
        sm_clock_mhz: Some(1800.0),
        mem_clock_mhz: Some(2600.0),
        pcie_rx_mb_s: Some(10.0),
        pcie_tx_mb_s: Some(20.0),
        pcie_gen: Some(4),
        pcie_width: Some(16),
        throttle_reasons: None,
    }
}

fn snap(t: f64, gpus: Vec<GpuSample>) -> HardwareSnapshot {
    let mut temps = std::collections::BTreeMap::new();
    temps.insert("CPU0".to_string(), 60.0 + t);
    HardwareSnapshot {
        t_s: t,
        gpus,
        cpu: CpuSample {
            util_pct: Some(10.0 * t),
            freq_mhz: Some(3000.0),
            temps_c: temps,
        },
    }
}

#[test]
fn empty_slice_serializes_as_empty_object() {
    let s = summarize(&[]);
    assert!(s.is_empty());
    assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some("{}"));
    // CPU-only snapshots do not count.
    let s = summarize(&[snap(0.0, vec![]), snap(2.0, vec![])]);
    assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some("{}"));
    let back: HardwareSummary = serde_json::from_str("{}").unwrap_or_else(|_| HardwareSummary {
        samples: 9,
        ..Default::default()
    });
    assert!(back.is_empty());
}

#[test]
fn averages_maxima_and_sums() {
    let samples = vec![
        snap(0.0, vec![gpu(0, 40.0, 100.0), gpu(1, 60.0, 200.0)]),
        snap(1.0, vec![]), // CPU-only, ignored
        snap(2.0, vec![gpu(0, 100.0, 300.0), gpu(1, 80.0, 300.0)]),
    ];
    let s = summarize(&samples);
    assert_eq!(s.samples, 2);
    assert_eq!(s.duration_seconds, 2.0);
    assert_eq!(s.gpu_count, 2);
    assert_eq!(s.gpu_util_avg_pct, Some(70.0)); // mean(50, 90)
    assert_eq!(s.gpu_util_max_pct, Some(100.0));
    assert_eq!(s.mem_util_avg_pct, Some(35.0));
    assert_eq!(s.temp_avg_c, Some(50.5));
    assert_eq!(s.temp_max_c, Some(51.0));
    assert_eq!(s.power_total_avg_w, Some(450.0)); // mean(300, 600)
    assert_eq!(s.power_total_max_w, Some(600.0));
    assert_eq!(s.power_limit_total_w, Some(600.0));
    assert_eq!(s.vram_used_avg_mb, Some(2000.0));
    assert_eq!(s.vram_total_mb, Some(8000.0));
    assert_eq!(s.vram_used_avg_pct, Some(25.0));
    assert_eq!(s.pcie_rx_avg_mb_s, Some(20.0));
    assert_eq!(s.pcie_tx_max_mb_s, Some(40.0));
    assert_eq!(s.cpu_util_avg_pct, Some(10.0)); // mean(0, 20)
    assert_eq!(s.cpu_temp_max_c, Some(62.0));
    assert_eq!(s.sm_clock_avg_mhz, Some(1800.0));
    assert_eq!(s.mem_clock_avg_mhz, Some(2600.0));
    // Trapezoid: (300 + 600) / 2 * 2 s.
    assert_eq!(s.energy_joules, Some(900.0));
    assert_eq!(s.energy_window_seconds, Some(2.0));
    assert_eq!(s.throttle, Throttle::Unknown);
}

#[test]
fn energy_over_a_wider_window_holds_the_edges_flat() {
    let samples = vec![
        snap(1.0, vec![gpu(0, 50.0, 100.0)]),
        snap(3.0, vec![gpu(0, 50.0, 300.0)]),
    ];
    // [0,1]: 100 W flat = 100 J; [1,3]: trapezoid 400 J; [3,4]: 300 J.
    let s = summarize_window(&samples, Some((0.0, 4.0)));
    assert_eq!(s.energy_joules, Some(800.0));
    assert_eq!(s.energy_window_seconds, Some(4.0));
    // A window inside the samples interpolates: [2,3] = (200+300)/2.
    let s = summarize_window(&samples, Some((2.0, 3.0)));
    assert_eq!(s.energy_joules, Some(250.0));
    // One sample and no window: no span, no energy.
    let s = summarize(&samples[..1]);
    assert_eq!(s.energy_joules, None);
    // One sample and a window: flat.
    let s = summarize_window(&samples[..1], Some((0.0, 10.0)));
    assert_eq!(s.energy_joules, Some(1000.0));
    assert_eq!(tokens_per_joule(500.0, &s), Some(0.5));
    assert_eq!(tokens_per_joule(500.0, &HardwareSummary::default()), None);
}

#[test]
fn unknown_power_gives_null_energy_and_null_keys() {
    let mut g = gpu(0, 50.0, 0.0);
    g.power_w = None;
    g.pcie_rx_mb_s = None;
    let s = summarize(&[snap(0.0, vec![g.clone()]), snap(2.0, vec![g])]);
    assert_eq!(s.power_total_avg_w, None);
    assert_eq!(s.energy_joules, None);
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert!(
        v.get("pcie_rx_avg_mb_s")
            .is_some_and(serde_json::Value::is_null)
    );
    assert_eq!(
        v.get("samples").and_then(serde_json::Value::as_u64),
        Some(2)
    );
}

#[test]
fn keys_match_reference_order() {
    let s = summarize(&[
        snap(0.0, vec![gpu(0, 50.0, 100.0)]),
        snap(2.0, vec![gpu(0, 50.0, 100.0)]),
    ]);
    let v = serde_json::to_value(&s).unwrap_or_default();
    let keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let reference = [
        "samples",
        "duration_seconds",
        "gpu_count",
        "cpu_util_avg_pct",
        "cpu_temp_max_c",
        "gpu_util_avg_pct",
        "gpu_util_max_pct",
        "mem_util_avg_pct",
        "mem_util_max_pct",
        "temp_avg_c",
        "temp_max_c",
        "power_total_avg_w",
        "power_total_max_w",
        "power_limit_total_w",
        "vram_used_avg_mb",
        "vram_used_max_mb",
        "vram_total_mb",
        "vram_used_avg_pct",
        "vram_used_max_pct",
        "pcie_rx_avg_mb_s",
        "pcie_rx_max_mb_s",
        "pcie_tx_avg_mb_s",
        "pcie_tx_max_mb_s",
    ];
    assert_eq!(&keys[..reference.len()], &reference);
    assert_eq!(
        &keys[reference.len()..],
        [
            "energy_joules",
            "energy_window_seconds",
            "sm_clock_avg_mhz",
            "mem_clock_avg_mhz",
            "throttle",
            "throttle_reasons"
        ]
    );
    let back: HardwareSummary = serde_json::from_value(v).unwrap_or_default();
    assert_eq!(back, s);
}

#[test]
fn throttle_verdict_picks_most_frequent_category() {
    let with = |t: f64, reasons: Vec<ThrottleReason>| {
        let mut g = gpu(0, 90.0, 290.0);
        g.throttle_reasons = Some(reasons);
        snap(t, vec![g])
    };
    use ThrottleReason::*;
    let s = summarize(&[with(0.0, vec![GpuIdle]), with(1.0, vec![])]);
    assert_eq!(s.throttle, Throttle::None);
    assert!(s.throttle_reasons.is_empty());
    let s = summarize(&[
        with(0.0, vec![SwPowerCap]),
        with(1.0, vec![SwPowerCap]),
        with(2.0, vec![HwThermalSlowdown]),
    ]);
    assert_eq!(s.throttle, Throttle::Power);
    assert_eq!(s.throttle_reasons, vec![SwPowerCap, HwThermalSlowdown]);
    let s = summarize(&[
        with(0.0, vec![SwPowerCap]),
        with(1.0, vec![SwThermalSlowdown]),
    ]);
    assert_eq!(s.throttle, Throttle::Thermal, "ties go to thermal");
    let s = summarize(&[with(0.0, vec![SyncBoost])]);
    assert_eq!(s.throttle, Throttle::Other);
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(v["throttle"], "other");
    assert_eq!(v["throttle_reasons"][0], "sync_boost");
}

#[test]
fn rounding_matches_reference_precision() {
    let mut a = gpu(0, 33.333, 100.004);
    a.vram_used_mb = Some(189_600.281);
    let s = summarize(&[snap(0.0, vec![a.clone()]), snap(2.4567, vec![a])]);
    assert_eq!(s.duration_seconds, 2.457);
    assert_eq!(s.gpu_util_avg_pct, Some(33.33));
    assert_eq!(s.vram_used_avg_mb, Some(189_600.28));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_f64() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            (-1e6f64..1e6).prop_map(Some),
            Just(Some(f64::NAN)),
            Just(Some(f64::INFINITY)),
        ]
    }

    prop_compose! {
        fn any_snapshot()(t in any_f64(), power in any_f64(), util in any_f64(), n in 0usize..4) -> HardwareSnapshot {
            let g = GpuSample { index: 0, power_w: power, util_pct: util, vram_total_mb: util, ..GpuSample::default() };
            HardwareSnapshot { t_s: t.unwrap_or(0.0), gpus: vec![g; n], cpu: CpuSample::default() }
        }
    }

    proptest! {
        #[test]
        fn summaries_never_panic_and_stay_finite(
            snaps in proptest::collection::vec(any_snapshot(), 0..12),
            a in any_f64(),
            b in any_f64(),
        ) {
            let window = a.zip(b);
            let s = summarize_window(&snaps, window);
            let v = serde_json::to_value(&s).unwrap_or_default();
            // serde_json writes non-finite floats as null; none may sneak in as numbers.
            for (_, x) in v.as_object().into_iter().flatten() {
                if let Some(f) = x.as_f64() {
                    prop_assert!(f.is_finite());
                }
            }
            let _ = tokens_per_joule(1.0, &s);
        }
    }
}
