//! `<section id="energy-cost">`: each file's Energy and Cost table
//! (docs/methodology.md §11): joules per output and per prompt token, idle
//! power beside, tokens per second per kW and dollars per million output
//! tokens. A figure that could not be made shows `—` with its reason in the
//! same cell, never 0. Nothing at all when no file stamped energy figures.

use ldb_core::energy_cost::{CellEnergyCost, EnergyBaseline};
use ldb_core::result::CellResult;

use super::Page;
use super::escape::escape;
use crate::text::format::context;

/// A figure, or `—` and why not.
fn fig(v: Option<f64>, why: &Option<String>, digits: usize) -> String {
    match (v, why) {
        (Some(v), _) if v.is_finite() => format!("<td>{v:.digits$}</td>"),
        (_, Some(why)) => format!(
            "<td class=\"why\">—<span class=\"detail\">{}</span></td>",
            escape(why)
        ),
        _ => "<td>—</td>".into(),
    }
}

/// One row.
fn row(c: &CellResult, e: &CellEnergyCost) -> String {
    format!(
        "<tr><td>{}</td><td>{}</td>{}{}{}{}{}<td class=\"basis\">{}</td></tr>\n",
        escape(&context(c.context_tokens)),
        c.concurrency,
        fig(
            e.decode_joules_per_token,
            &e.decode_joules_per_token_reason,
            3
        ),
        fig(
            e.prefill_joules_per_token,
            &e.prefill_joules_per_token_reason,
            4
        ),
        fig(e.idle_power_w, &None, 0),
        fig(
            e.tokens_per_second_per_kw,
            &e.tokens_per_second_per_kw_reason,
            0
        ),
        fig(
            e.usd_per_million_output_tokens,
            &e.usd_per_million_output_tokens_reason,
            3
        ),
        escape(&format!("{}; {}", e.energy_basis, e.cost_basis)),
    )
}

/// The section, or an empty string.
pub(crate) fn section(page: &Page<'_>) -> String {
    let mut body = String::new();
    for i in page.inputs {
        let Some(run) = &i.doc.energy_cost else {
            continue;
        };
        let rows: Vec<String> = i
            .doc
            .results
            .iter()
            .chain(&i.doc.burst_results)
            .filter(|c| !c.ext.status.is_skip())
            .filter_map(|c| Some(row(c, c.ext.energy_cost.as_ref()?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        if page.multi() {
            body.push_str(&format!("<h3>{}</h3>\n", escape(i.name)));
        }
        let baseline = match run.energy_baseline {
            EnergyBaseline::Idle => "idle power subtracted",
            EnergyBaseline::None => "board energy as measured (idle power beside)",
        };
        let price = run.gpu_hour_price_usd.map_or_else(
            || "no GPU-hour price".to_string(),
            |p| format!("${p}/GPU-hour × {} GPU(s)", run.gpu_count.unwrap_or(0)),
        );
        body.push_str(&format!(
            "<p class=\"note\">Energy baseline: {}; cost: {}.</p>\n<table class=\"energy\">\n\
             <tr><th>ctx</th><th>C</th><th>J/output token</th><th>J/prompt token</th>\
             <th>idle W</th><th>tok/s per kW</th><th>$/M output tokens</th>\
             <th>rests on</th></tr>\n{}</table>\n",
            escape(baseline),
            escape(&price),
            rows.concat()
        ));
    }
    if body.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"energy-cost\">\n<h2>Energy and Cost</h2>\n<p class=\"note\">GPU joules \
         per output token over each cell's window and per prompt token over the prefill rows, \
         tokens per second per kW, and dollars per million output tokens at the GPU-hour \
         price. A figure that could not be made says why.</p>\n{body}</section>\n"
    )
}
