//! `rerun`: what differs between the run a result file records and the run
//! about to start with the same flags — cells the fresh plan adds or drops
//! (a different KV budget or model context), and the settings a rerun
//! cannot hold the same (engine, its version, model, GPU count). Pure: the
//! binary prints these lines before anything is sent.

use ldb_core::document::{Metadata, ResultDocument};
use ldb_core::result::CellStatus;
use ldb_core::tokens::format_context;

use crate::plan::RunPlan;

/// Cells the recorded run planned to measure (not skipped for KV or the
/// model's context), as (concurrency, context).
fn recorded_cells(prior: &ResultDocument) -> Vec<(u32, u64)> {
    prior
        .results
        .iter()
        .filter(|c| {
            !matches!(
                c.ext.status,
                CellStatus::SkippedKv | CellStatus::SkippedContext
            )
        })
        .map(|c| (c.concurrency, c.context_tokens))
        .collect()
}

fn label((c, ctx): (u32, u64)) -> String {
    format!("C={c} ctx={}", format_context(ctx))
}

/// One line per difference; empty when the rerun plans and meets the same.
pub fn differences(
    prior: &ResultDocument,
    plan: &RunPlan,
    now: &Metadata,
    gpus_now: Option<u64>,
) -> Vec<String> {
    let mut out = Vec::new();
    let was = recorded_cells(prior);
    let will: Vec<(u32, u64)> = plan
        .measured_cells()
        .map(|c| (c.concurrency, c.context))
        .collect();
    let added: Vec<String> = will
        .iter()
        .filter(|c| !was.contains(c))
        .map(|&c| label(c))
        .collect();
    let dropped: Vec<String> = was
        .iter()
        .filter(|c| !will.contains(c))
        .map(|&c| label(c))
        .collect();
    if !added.is_empty() {
        out.push(format!("cells added by the new plan: {}", added.join(", ")));
    }
    if !dropped.is_empty() {
        out.push(format!(
            "cells dropped by the new plan: {}",
            dropped.join(", ")
        ));
    }
    let p = &prior.metadata;
    let settings: [(&str, String, String); 5] = [
        ("engine", p.engine.to_string(), now.engine.to_string()),
        (
            "engine version",
            p.engine_version.clone(),
            now.engine_version.clone(),
        ),
        ("model", p.model.clone(), now.model.clone()),
        (
            "model context",
            p.model_context_length.unwrap_or(0).to_string(),
            now.model_context_length.unwrap_or(0).to_string(),
        ),
        (
            "KV budget (tokens)",
            p.kv_budget_tokens.unwrap_or(0).to_string(),
            now.kv_budget_tokens.unwrap_or(0).to_string(),
        ),
    ];
    for (name, a, b) in settings {
        if a != b {
            out.push(format!("{name}: {a:?} then, {b:?} now"));
        }
    }
    let gpus_then = prior.hardware_run_summary.gpu_count;
    match gpus_now {
        Some(n) if n != gpus_then => out.push(format!("GPU count: {gpus_then} then, {n} now")),
        None if gpus_then > 0 => out.push(format!(
            "GPU count: {gpus_then} then, not known now (no hardware sample yet)"
        )),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlannedCell;
    use ldb_core::result::CellResult;

    fn cell(c: u32, ctx: u64, status: CellStatus) -> CellResult {
        let mut r = CellResult {
            concurrency: c,
            context_tokens: ctx,
            ..CellResult::default()
        };
        r.ext.status = status;
        r
    }

    fn planned(c: u32, ctx: u64) -> PlannedCell {
        PlannedCell {
            concurrency: c,
            context: ctx,
            skip: None,
            carried: None,
            burst_carried: None,
            carried_repeats: 0,
        }
    }

    #[test]
    fn names_cells_added_and_dropped_and_settings_that_moved() {
        let mut prior = ResultDocument {
            results: vec![
                cell(1, 0, CellStatus::Ok),
                cell(4, 0, CellStatus::Error),
                cell(16, 8192, CellStatus::SkippedKv),
            ],
            ..ResultDocument::default()
        };
        prior.metadata.engine_version = "0.1".into();
        prior.metadata.model = "m".into();
        let plan = RunPlan {
            max_prefill: 0,
            integrated_prefill: vec![],
            scout_only: vec![],
            standalone: vec![],
            prefill_skipped: vec![],
            prefill_warmup: None,
            decode_warmup: None,
            prompt_contexts: vec![],
            cells: vec![planned(1, 0), planned(16, 8192)],
            prefill_carried: vec![],
            rate_skips: vec![],
            open_loop: None,
            estimated_seconds: 0.0,
        };
        let mut now = prior.metadata.clone();
        assert_eq!(
            differences(&prior, &plan, &now, Some(0)),
            [
                "cells added by the new plan: C=16 ctx=8k",
                "cells dropped by the new plan: C=4 ctx=0"
            ]
        );
        now.engine_version = "0.2".into();
        let d = differences(&prior, &plan, &now, Some(2));
        assert!(
            d.contains(&"engine version: \"0.1\" then, \"0.2\" now".to_string()),
            "{d:?}"
        );
        assert!(d.contains(&"GPU count: 0 then, 2 now".to_string()), "{d:?}");
    }
}
