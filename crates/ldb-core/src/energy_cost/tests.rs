//! Closed-form truth: constant power P over T seconds with N tokens gives
//! P·T/N joules per token; a price gives price·GPUs·T/3600/N·10⁶ $/Mtok.

use super::*;
use crate::hardware::{CpuSample, GpuSample, HardwareSnapshot, summarize_window};
use crate::result::PrefillEntry;

fn snap(t: f64, watts: &[f64]) -> HardwareSnapshot {
    let gpus = watts
        .iter()
        .enumerate()
        .map(|(i, w)| GpuSample {
            index: i as u32,
            power_w: Some(*w),
            ..GpuSample::default()
        })
        .collect();
    HardwareSnapshot {
        t_s: t,
        gpus,
        cpu: CpuSample::default(),
    }
}

/// A cell with `n` tokens over a `t`-second window at constant `watts` per GPU.
fn cell(n: u64, t: f64, watts: &[f64]) -> CellResult {
    let samples: Vec<_> = (0..=4).map(|k| snap(t * k as f64 / 4.0, watts)).collect();
    let mut c = CellResult {
        concurrency: 8,
        context_tokens: 1024,
        client_output_tokens: n,
        measurement_seconds: t,
        ..CellResult::default()
    };
    c.hardware_summary = summarize_window(&samples, Some((0.0, t)));
    c
}

fn run(price: Option<f64>, gpus: Option<u64>) -> RunEnergyCost {
    RunEnergyCost {
        gpu_hour_price_usd: price,
        gpu_count: gpus,
        gpu_count_source: "--gpu-count".into(),
        idle_power_w: Some(100.0),
        idle_power_basis: "test".into(),
        ..RunEnergyCost::default()
    }
}

#[test]
fn constant_power_gives_p_t_over_n_joules_per_token() {
    // Two GPUs at 150 W = 300 W for 10 s = 3000 J over 1500 tokens.
    let c = cell(1500, 10.0, &[150.0, 150.0]);
    let e = cell_energy_cost(&c, &run(None, None), Err("x".into()));
    assert_eq!(e.decode_joules_per_token, Some(300.0 * 10.0 / 1500.0));
    assert_eq!(e.tokens_per_second_per_kw, Some(1000.0 * 1500.0 / 3000.0));
    assert_eq!(e.idle_power_w, Some(100.0));
    assert!(e.energy_basis.contains("3000.0 J"), "{}", e.energy_basis);
}

#[test]
fn idle_baseline_subtracts_idle_power_times_the_window() {
    let c = cell(1500, 10.0, &[300.0]);
    let mut r = run(None, None);
    r.energy_baseline = EnergyBaseline::Idle;
    let e = cell_energy_cost(&c, &r, Err("x".into()));
    assert_eq!(
        e.decode_joules_per_token,
        Some((300.0 - 100.0) * 10.0 / 1500.0)
    );
    r.idle_power_w = None;
    let e = cell_energy_cost(&c, &r, Err("x".into()));
    assert_eq!(e.decode_joules_per_token, None);
    assert!(
        e.decode_joules_per_token_reason
            .unwrap()
            .contains("idle power unknown")
    );
}

#[test]
fn price_gives_dollars_per_million_tokens_exactly() {
    let c = cell(1500, 10.0, &[300.0]);
    let e = cell_energy_cost(&c, &run(Some(2.0), Some(4)), Err("x".into()));
    assert_eq!(
        e.usd_per_million_output_tokens,
        Some(2.0 * 4.0 * 10.0 / 3600.0 / 1500.0 * 1e6)
    );
    assert!(
        e.cost_basis.contains("4 GPU(s) (--gpu-count)"),
        "{}",
        e.cost_basis
    );
    let e = cell_energy_cost(&c, &run(None, Some(4)), Err("x".into()));
    assert_eq!(e.usd_per_million_output_tokens, None);
    assert_eq!(
        e.usd_per_million_output_tokens_reason.as_deref(),
        Some("no --gpu-hour-price given")
    );
}

#[test]
fn a_cell_without_energy_counters_says_why_instead_of_zero() {
    let mut c = cell(1500, 10.0, &[300.0]);
    c.hardware_summary = Default::default();
    let e = cell_energy_cost(&c, &run(Some(2.0), Some(1)), Err("x".into()));
    assert_eq!(e.decode_joules_per_token, None);
    assert!(
        e.decode_joules_per_token_reason
            .as_deref()
            .unwrap()
            .contains("no GPU energy counters")
    );
    assert!(e.tokens_per_second_per_kw_reason.is_some());
    // Cost rests on time, not energy: still there.
    assert!(e.usd_per_million_output_tokens.is_some());
    let json = serde_json::to_value(&e).unwrap();
    assert!(json["decode_joules_per_token"].is_null());
    assert!(json["decode_joules_per_token_reason"].is_string());
}

#[test]
fn prefill_rows_give_joules_per_prompt_token() {
    let samples: Vec<_> = (0..=2).map(|k| snap(k as f64, &[400.0])).collect();
    let row = PrefillEntry {
        prompt_tokens: 4000,
        samples: 2,
        hardware_summary: summarize_window(&samples, Some((0.0, 2.0))),
        ..PrefillEntry::default()
    };
    let r = run(None, None);
    assert_eq!(prefill_joules_per_token(&row, &r), Ok(400.0 * 2.0 / 8000.0));
    let scout = PrefillEntry {
        prompt_tokens: 4000,
        samples: 1,
        ..PrefillEntry::default()
    };
    assert!(
        prefill_joules_per_token(&scout, &r)
            .unwrap_err()
            .contains("scout")
    );
}

#[test]
fn stamp_fills_cells_and_takes_the_gpu_count_from_telemetry() {
    let mut doc = ResultDocument::default();
    doc.results.push(cell(3600, 10.0, &[300.0, 300.0]));
    doc.hardware_run_summary.gpu_count = 2;
    let mut r = run(Some(3.6), None);
    r.gpu_count_source = String::new();
    stamp(&mut doc, r);
    let run = doc.energy_cost.as_ref().unwrap();
    assert_eq!(run.gpu_count, Some(2));
    assert_eq!(run.gpu_count_source, "telemetry");
    let e = doc.results[0].ext.energy_cost.as_ref().unwrap();
    // 3.6 $/h × 2 GPUs × 10 s = 0.02 $ over 3600 tokens.
    let want = 3.6 * 2.0 * 10.0 / 3600.0 / 3600.0 * 1e6;
    assert_eq!(e.usd_per_million_output_tokens, Some(want));
    assert!(e.prefill_joules_per_token_reason.is_some());
}
