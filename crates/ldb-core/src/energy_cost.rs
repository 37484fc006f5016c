//! Energy and cost per token (docs/methodology.md §11, "Energy and cost").
//! Pure arithmetic over what a cell already holds (its GPU energy, window
//! and token count) and the run's settings (`--energy-baseline`,
//! `--gpu-hour-price`, `--gpu-count`). A figure that cannot be made is
//! `null` beside a `*_reason` key saying why — never 0, which would read as
//! "free" or "no energy".

use crate::document::ResultDocument;
use crate::result::CellResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod figures;
#[cfg(test)]
mod tests;

pub use figures::{cell_energy_cost, prefill_joules_per_token, usd_per_million};

/// What the idle power is subtracted as (`--energy-baseline`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyBaseline {
    /// Board energy as measured (idle power shown beside, not subtracted).
    #[default]
    None,
    /// Idle power × the energy window subtracted from the board energy.
    Idle,
}

impl EnergyBaseline {
    /// Parses `idle` or `none`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "idle" => Ok(Self::Idle),
            "none" => Ok(Self::None),
            _ => Err(format!("--energy-baseline must be idle or none, not {s:?}")),
        }
    }
}

/// The run's energy and cost settings and its idle power (top-level
/// `energy_cost` of the result file).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunEnergyCost {
    /// `idle` or `none`.
    pub energy_baseline: EnergyBaseline,
    /// `--gpu-hour-price`, US dollars per GPU-hour (`None`: no cost figures).
    pub gpu_hour_price_usd: Option<f64>,
    /// GPUs the price is multiplied by.
    pub gpu_count: Option<u64>,
    /// Where `gpu_count` came from: `--gpu-count`, `telemetry` or `none`.
    pub gpu_count_source: String,
    /// Mean GPU board power (all GPUs) while the server was idle, watts.
    pub idle_power_w: Option<f64>,
    /// How `idle_power_w` was measured, or why it is missing.
    pub idle_power_basis: String,
    /// $ per million output tokens at each context's SLO frontier point
    /// (`null` with a reason where there is none).
    pub slo_frontier_usd_per_million_output_tokens: BTreeMap<u64, Option<f64>>,
    /// $ per million output tokens of each trace replay, in run order.
    pub replay_usd_per_million_output_tokens: Vec<Option<f64>>,
    /// Why a frontier or replay figure is `null` (empty when all are set).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// A cell's energy and cost figures (`energy_cost` of a cell).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CellEnergyCost {
    /// GPU joules per output token over the decode window (idle subtracted
    /// with `energy_baseline: idle`).
    pub decode_joules_per_token: Option<f64>,
    /// Why `decode_joules_per_token` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_joules_per_token_reason: Option<String>,
    /// GPU joules per prompt token over the prefill rows of this context.
    pub prefill_joules_per_token: Option<f64>,
    /// Why `prefill_joules_per_token` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_joules_per_token_reason: Option<String>,
    /// The run's idle power, shown beside (watts).
    pub idle_power_w: Option<f64>,
    /// `idle` (subtracted) or `none`.
    pub energy_baseline: EnergyBaseline,
    /// Output tokens per second per kW of (net) GPU power.
    pub tokens_per_second_per_kw: Option<f64>,
    /// Why `tokens_per_second_per_kw` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_second_per_kw_reason: Option<String>,
    /// US dollars per million output tokens at the GPU-hour price.
    pub usd_per_million_output_tokens: Option<f64>,
    /// Why `usd_per_million_output_tokens` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens_reason: Option<String>,
    /// What the energy figures rest on, in words with the numbers.
    pub energy_basis: String,
    /// What the cost figure rests on, in words with the numbers.
    pub cost_basis: String,
}

/// Fills every cell's `energy_cost` and the run's frontier and replay costs
/// from `run` (its settings and idle power); stores `run` in the document.
pub fn stamp(doc: &mut ResultDocument, mut run: RunEnergyCost) {
    if run.gpu_count.is_none() {
        let seen = doc.hardware_run_summary.gpu_count;
        run.gpu_count = (seen > 0).then_some(seen);
        run.gpu_count_source = if seen > 0 { "telemetry" } else { "none" }.into();
    }
    let prefill: BTreeMap<u64, Result<f64, String>> = doc
        .prefill
        .iter()
        .map(|(x, row)| (*x, prefill_joules_per_token(row, &run)))
        .collect();
    let fill = |cell: &mut CellResult| {
        let pre = prefill
            .get(&cell.context_tokens)
            .cloned()
            .unwrap_or_else(|| {
                Err("no prefill row for this context (run without prefill)".to_string())
            });
        cell.ext.energy_cost = Some(cell_energy_cost(cell, &run, pre));
    };
    doc.results.iter_mut().for_each(fill);
    doc.burst_results.iter_mut().for_each(fill);
    run.reasons.clear();
    run.slo_frontier_usd_per_million_output_tokens.clear();
    if let Some(slo) = &doc.slo {
        for (x, point) in &slo.frontier {
            let cell = point.as_ref().and_then(|p| {
                doc.results
                    .iter()
                    .find(|c| c.context_tokens == *x && c.concurrency == p.concurrency)
            });
            let usd = match cell.and_then(|c| c.ext.energy_cost.as_ref()) {
                Some(e) => e.usd_per_million_output_tokens.ok_or_else(|| {
                    e.usd_per_million_output_tokens_reason
                        .clone()
                        .unwrap_or_default()
                }),
                None => Err("no cell meets every SLO at this context".to_string()),
            };
            if let Err(why) = &usd {
                run.reasons
                    .push(format!("SLO frontier at context {x}: {why}"));
            }
            run.slo_frontier_usd_per_million_output_tokens
                .insert(*x, usd.ok());
        }
    }
    run.replay_usd_per_million_output_tokens = doc
        .trace_results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let s = &r.summary;
            let tokens = s.output_tps * s.wall_time;
            let usd = usd_per_million(&run, s.wall_time, tokens);
            if let Err(why) = &usd {
                run.reasons.push(format!("replay {}: {why}", i + 1));
            }
            usd.ok()
        })
        .collect();
    doc.energy_cost = Some(run);
}
