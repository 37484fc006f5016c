//! Energy and Cost: per cell, joules per output and prompt token, idle
//! power beside, tokens per second per kW and $ per million output tokens
//! (docs/methodology.md §11), then what the figures rest on and why any is
//! missing.

use ldb_core::energy_cost::CellEnergyCost;
use ldb_core::result::CellResult;

use super::Ctx;
use super::format::context;
use super::table::Table;

/// `—` for a figure that could not be made (its reason is listed below).
fn fig(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.digits$}"))
}

/// The table, the run's settings and every distinct reason (nothing when
/// the run stamped no energy figures).
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let Some(run) = &cx.doc.energy_cost else {
        return Vec::new();
    };
    let rows: Vec<(&CellResult, &CellEnergyCost)> = cx
        .doc
        .results
        .iter()
        .chain(&cx.doc.burst_results)
        .filter(|c| !c.ext.status.is_skip())
        .filter_map(|c| Some((c, c.ext.energy_cost.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let headers = [
        "ctx",
        "C",
        "J/out tok",
        "J/prompt tok",
        "idle W",
        "tok/s/kW",
        "$/Mtok out",
    ];
    let mut t = Table::new("Energy and Cost", &headers).right(&[1, 2, 3, 4, 5, 6]);
    let mut reasons: Vec<String> = Vec::new();
    for (c, e) in &rows {
        t.push(vec![
            context(c.context_tokens).into(),
            c.concurrency.to_string().into(),
            fig(e.decode_joules_per_token, 3).into(),
            fig(e.prefill_joules_per_token, 4).into(),
            fig(e.idle_power_w, 0).into(),
            fig(e.tokens_per_second_per_kw, 0).into(),
            fig(e.usd_per_million_output_tokens, 3).into(),
        ]);
        for why in [
            &e.decode_joules_per_token_reason,
            &e.prefill_joules_per_token_reason,
            &e.usd_per_million_output_tokens_reason,
        ]
        .into_iter()
        .flatten()
        {
            if !reasons.contains(why) {
                reasons.push(why.clone());
            }
        }
    }
    let mut out = t.render(cx.color);
    let baseline = match run.energy_baseline {
        ldb_core::energy_cost::EnergyBaseline::Idle => "idle power subtracted",
        ldb_core::energy_cost::EnergyBaseline::None => "board energy as measured",
    };
    let mut note = format!("Energy: {baseline}; idle power: {}.", run.idle_power_basis);
    if let Some(p) = run.gpu_hour_price_usd {
        note.push_str(&format!(
            " Cost: ${p}/GPU-hour × {} GPU(s) ({}) × window seconds ÷ output tokens.",
            run.gpu_count.map_or_else(|| "?".into(), |n| n.to_string()),
            run.gpu_count_source
        ));
    }
    for (x, usd) in &run.slo_frontier_usd_per_million_output_tokens {
        if let Some(usd) = usd {
            note.push_str(&format!(
                " SLO frontier at {}: ${usd:.3}/Mtok.",
                context(*x)
            ));
        }
    }
    for (i, usd) in run.replay_usd_per_million_output_tokens.iter().enumerate() {
        if let Some(usd) = usd {
            note.push_str(&format!(" Replay {}: ${usd:.3}/Mtok.", i + 1));
        }
    }
    reasons.extend(run.reasons.iter().cloned());
    if !reasons.is_empty() {
        note.push_str(&format!(" Missing (—): {}.", reasons.join("; ")));
    }
    out.extend(cx.note(&note));
    out.push(String::new());
    out
}
