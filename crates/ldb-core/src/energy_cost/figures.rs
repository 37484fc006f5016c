//! The formulas, one function each (definitions: docs/methodology.md §11).

use super::{CellEnergyCost, EnergyBaseline, RunEnergyCost};
use crate::hardware::HardwareSummary;
use crate::result::{CellResult, PrefillEntry};

/// Board energy over the summary's window less the idle baseline, with the
/// window: `E − P_idle·T` under `--energy-baseline idle`, else `E`.
fn net_energy(hw: &HardwareSummary, run: &RunEnergyCost) -> Result<(f64, f64), String> {
    let (e, t) = match (hw.energy_joules, hw.energy_window_seconds) {
        (Some(e), Some(t)) if e.is_finite() && t > 0.0 => (e, t),
        _ if hw.samples == 0 => {
            return Err("no GPU energy counters: no hardware sample in the window".into());
        }
        _ => return Err("no GPU power reading in the window (no energy counters)".into()),
    };
    let net = match run.energy_baseline {
        EnergyBaseline::None => e,
        EnergyBaseline::Idle => match run.idle_power_w {
            Some(p) => e - p * t,
            None => return Err(format!("idle power unknown ({})", run.idle_power_basis)),
        },
    };
    if net > 0.0 {
        Ok((net, t))
    } else {
        Err(format!("energy above idle is not positive ({net:.1} J)"))
    }
}

/// US dollars per million tokens: `price × GPUs × seconds / 3600 / tokens × 10⁶`.
pub fn usd_per_million(run: &RunEnergyCost, seconds: f64, tokens: f64) -> Result<f64, String> {
    let price = run.gpu_hour_price_usd.ok_or("no --gpu-hour-price given")?;
    let gpus = run
        .gpu_count
        .filter(|n| *n > 0)
        .ok_or("GPU count unknown: telemetry saw no GPU and no --gpu-count was given")?;
    if !(tokens > 0.0 && seconds > 0.0) {
        return Err("no output token in the window".into());
    }
    Ok(price * gpus as f64 * seconds / 3600.0 / tokens * 1e6)
}

/// GPU joules per prompt token of a prefill row: its net energy over the
/// row's requests' prompt tokens (`prompt_tokens × samples`).
pub fn prefill_joules_per_token(row: &PrefillEntry, run: &RunEnergyCost) -> Result<f64, String> {
    if row.skipped {
        return Err(format!("prefill row skipped: {}", row.skip_reason));
    }
    let tokens = row.prompt_tokens as f64 * row.samples.max(1) as f64;
    if tokens <= 0.0 {
        return Err("prefill row has no prompt tokens".into());
    }
    let (e, _) = net_energy(&row.hardware_summary, run)
        .map_err(|why| format!("prefill row: {why} (a one-request scout row has none)"))?;
    Ok(e / tokens)
}

/// A cell's figures; `prefill` is its context's prefill J/token (or why not).
pub fn cell_energy_cost(
    cell: &CellResult,
    run: &RunEnergyCost,
    prefill: Result<f64, String>,
) -> CellEnergyCost {
    let tokens = cell.client_output_tokens as f64;
    let hw = &cell.hardware_summary;
    let energy = net_energy(hw, run).and_then(|(e, t)| {
        (tokens > 0.0)
            .then_some((e, t))
            .ok_or_else(|| "no output token in the window".to_string())
    });
    let per_token = energy.clone().map(|(e, _)| e / tokens);
    let per_kw = energy.clone().map(|(e, _)| 1000.0 * tokens / e);
    let usd = usd_per_million(run, cell.measurement_seconds, tokens);
    let baseline = match run.energy_baseline {
        EnergyBaseline::Idle => format!(
            " less idle {:.1} W × the window",
            run.idle_power_w.unwrap_or(f64::NAN)
        ),
        EnergyBaseline::None => String::new(),
    };
    let energy_basis = match &energy {
        Ok((e, t)) => format!(
            "{e:.1} J of GPU board energy over {t:.3} s{baseline}, {} client output tokens",
            cell.client_output_tokens
        ),
        Err(_) => "none".to_string(),
    };
    let cost_basis = match &usd {
        Ok(_) => format!(
            "${}/GPU-hour × {} GPU(s) ({}) × {:.3} s ÷ {} client output tokens",
            run.gpu_hour_price_usd.unwrap_or_default(),
            run.gpu_count.unwrap_or_default(),
            run.gpu_count_source,
            cell.measurement_seconds,
            cell.client_output_tokens
        ),
        Err(_) => "none".to_string(),
    };
    let (decode_joules_per_token, decode_joules_per_token_reason) = split(per_token);
    let (prefill_joules_per_token, prefill_joules_per_token_reason) = split(prefill);
    let (tokens_per_second_per_kw, tokens_per_second_per_kw_reason) = split(per_kw);
    let (usd_per_million_output_tokens, usd_per_million_output_tokens_reason) = split(usd);
    CellEnergyCost {
        decode_joules_per_token,
        decode_joules_per_token_reason,
        prefill_joules_per_token,
        prefill_joules_per_token_reason,
        idle_power_w: run.idle_power_w,
        energy_baseline: run.energy_baseline,
        tokens_per_second_per_kw,
        tokens_per_second_per_kw_reason,
        usd_per_million_output_tokens,
        usd_per_million_output_tokens_reason,
        energy_basis,
        cost_basis,
    }
}

fn split(r: Result<f64, String>) -> (Option<f64>, Option<String>) {
    match r {
        Ok(v) => (Some(v), None),
        Err(why) => (None, Some(why)),
    }
}
