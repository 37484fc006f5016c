//! The run plan: everything decided before the first generation request,
//! from the configuration and what discovery found (model context, KV
//! budget). Pure: no I/O, no clock. `run` follows it, `--dry-run` prints it
//! (`ldb_report::text::plan`). The plan's types are `ldb_core::plan`.

use ldb_core::kv::check;
use ldb_core::tokens::format_context;

use crate::config::RunConfig;

mod carry;

pub use carry::mark_carried;
/// The plan's data types live in the core crate (the report crate prints
/// them without depending on the runner); planning stays here.
pub use ldb_core::plan::{PlannedCell, RunPlan, ServerLimits, SkippedPrefill};

/// Prompts are capped here even for models with longer contexts.
const PREFILL_CAP: u64 = 131_072;
/// Room left below the model context for the chat template and one token.
const PREFILL_MARGIN: u64 = 64;
/// Rough per-cell overhead beyond the window, seconds: stream start, the
/// readiness hold, the end scrape and the drain. Only for the estimate.
const CELL_OVERHEAD_S: f64 = 6.0;
/// Rough cost of one prefill measurement (scout, warmup or cold profile), seconds.
const PREFILL_ROW_S: f64 = 3.0;

/// Order of cells: first column (first C, every context), first row, then the rest.
pub fn test_order(concs: &[u32], ctxs: &[u64]) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    let mut push = |c, x| {
        if !out.contains(&(c, x)) {
            out.push((c, x));
        }
    };
    if let (Some(&c0), Some(&x0)) = (concs.first(), ctxs.first()) {
        ctxs.iter().for_each(|&x| push(c0, x));
        concs.iter().for_each(|&c| push(c, x0));
    }
    for &x in ctxs {
        for &c in concs {
            push(c, x);
        }
    }
    out
}

/// Longest prompt sent for a model context (0 = unknown).
pub fn max_prefill(model_context: u64) -> u64 {
    if model_context > 0 {
        PREFILL_CAP.min(model_context.saturating_sub(PREFILL_MARGIN))
    } else {
        PREFILL_CAP
    }
}

/// The largest decode context whose single request fits; 0 when none does.
pub fn warmup_context(cfg: &RunConfig, limits: ServerLimits) -> u64 {
    let mut ctxs = cfg.matrix.contexts.clone();
    ctxs.sort_unstable_by(|a, b| b.cmp(a));
    ctxs.into_iter()
        .find(|&x| {
            check(
                1,
                x,
                cfg.matrix.max_tokens,
                limits.kv_budget,
                limits.model_context,
            )
            .is_none()
        })
        .unwrap_or(0)
}

/// Plan the run.
pub fn plan(cfg: &RunConfig, limits: ServerLimits) -> RunPlan {
    let max_prefill = max_prefill(limits.model_context);
    let prefill = prefill_plan(cfg, limits, max_prefill);
    let decode_warmup = (!cfg.prefill.prefill_only && cfg.matrix.decode_warmup_seconds > 0.0)
        .then(|| warmup_context(cfg, limits));
    let prompt_contexts = prompt_contexts(cfg, limits, &prefill);
    let mut p = RunPlan {
        max_prefill,
        integrated_prefill: prefill.integrated,
        scout_only: prefill.scout_only,
        standalone: prefill.standalone,
        prefill_skipped: prefill.skipped,
        prefill_warmup: prefill.warmup,
        decode_warmup,
        prompt_contexts,
        cells: decode_cells(cfg, limits),
        prefill_carried: vec![],
        rate_skips: rate_skips(cfg, limits),
        open_loop: cfg.open_loop.is_on().then(|| open_loop_line(cfg)),
        estimated_seconds: 0.0,
    };
    p.estimated_seconds = estimate_seconds(cfg, &p);
    p
}

/// Which prefill rows the run measures, and how.
struct PrefillPlan {
    /// Decode contexts whose scout doubles as the prefill row.
    integrated: Vec<u64>,
    /// Prefill-only contexts measured by a scout alone.
    scout_only: Vec<u64>,
    /// Contexts of the standalone (cold) prefill profile.
    standalone: Vec<u64>,
    /// Requested contexts beyond the prefill limit.
    skipped: Vec<SkippedPrefill>,
    /// Context of the prefill warm-up (the smallest measured, at most 8k).
    warmup: Option<u64>,
}

/// Sort the requested prefill contexts into integrated, scout-only and
/// standalone rows, and those beyond the limit.
fn prefill_plan(cfg: &RunConfig, limits: ServerLimits, max_prefill: u64) -> PrefillPlan {
    let standalone_mode = cfg.prefill.standalone_prefill || cfg.prefill.prefill_only;
    let integrated: Vec<u64> = if cfg.prefill.skip_prefill || standalone_mode {
        vec![]
    } else {
        cfg.matrix
            .contexts
            .iter()
            .copied()
            .filter(|&x| x > 0 && x <= max_prefill)
            .collect()
    };
    let extras: Vec<u64> = if cfg.prefill.skip_prefill || standalone_mode {
        vec![]
    } else {
        cfg.prefill
            .prefill_contexts
            .iter()
            .copied()
            .filter(|x| !cfg.matrix.contexts.contains(x))
            .collect()
    };
    let cold: Vec<u64> = if standalone_mode {
        cfg.prefill.prefill_contexts.clone()
    } else {
        vec![]
    };
    let skipped: Vec<SkippedPrefill> = extras
        .iter()
        .chain(&cold)
        .copied()
        .filter(|&x| x > max_prefill)
        .map(|x| SkippedPrefill {
            context: x,
            reason: beyond_prefill_limit(x, max_prefill, limits.model_context),
            method: if standalone_mode {
                ldb_core::result::PrefillMethod::Client
            } else {
                ldb_core::result::PrefillMethod::ScoutOnly
            },
        })
        .collect();
    let fits = |x: &u64| *x <= max_prefill;
    let scout_only: Vec<u64> = extras.iter().copied().filter(fits).collect();
    let standalone: Vec<u64> = cold.iter().copied().filter(fits).collect();
    let warmup = integrated
        .iter()
        .chain(&scout_only)
        .chain(&standalone)
        .copied()
        .min()
        .map(|x| x.min(8192));
    PrefillPlan {
        integrated,
        scout_only,
        standalone,
        skipped,
        warmup,
    }
}

/// Open-loop contexts whose single request cannot fit the model, and why.
fn rate_skips(cfg: &RunConfig, limits: ServerLimits) -> Vec<(u64, String)> {
    if !cfg.open_loop.is_on() {
        return vec![];
    }
    cfg.matrix
        .contexts
        .iter()
        .filter_map(|&x| {
            check(1, x, cfg.matrix.max_tokens, 0, limits.model_context).map(|inf| (x, inf.reason()))
        })
        .collect()
}

/// The decode grid in test order, each cell with its skip reason (if any).
fn decode_cells(cfg: &RunConfig, limits: ServerLimits) -> Vec<PlannedCell> {
    if cfg.prefill.prefill_only || cfg.open_loop.is_on() {
        return vec![];
    }
    test_order(&cfg.matrix.concurrency, &cfg.matrix.contexts)
        .into_iter()
        .map(|(c, x)| PlannedCell {
            concurrency: c,
            context: x,
            skip: check(
                c,
                x,
                cfg.matrix.max_tokens,
                limits.kv_budget,
                limits.model_context,
            ),
            carried: None,
            burst_carried: None,
            carried_repeats: 0,
        })
        .collect()
}

/// Contexts whose prompts get sized: decode contexts whose single request
/// fits the model, and the prefill contexts measured (only prompts that
/// will be sent).
fn prompt_contexts(cfg: &RunConfig, limits: ServerLimits, prefill: &PrefillPlan) -> Vec<u64> {
    let mut out: Vec<u64> = if cfg.prefill.prefill_only {
        vec![]
    } else {
        cfg.matrix
            .contexts
            .iter()
            .copied()
            .filter(|&x| check(1, x, cfg.matrix.max_tokens, 0, limits.model_context).is_none())
            .collect()
    };
    out.extend(&prefill.scout_only);
    out.extend(&prefill.standalone);
    // The interference probe's prompts (`interference.rs`): those the model takes.
    out.extend(
        cfg.matrix
            .mixed_prefill_contexts
            .iter()
            .filter(|&&l| check(1, l, 1, 0, limits.model_context).is_none()),
    );
    out.sort_unstable();
    out.dedup();
    out
}

/// "rates 2, 8 req/s × contexts 0, 1k: 8 cells (poisson arrivals, seed 42), requests per cell: 60, 240".
fn open_loop_line(cfg: &RunConfig) -> String {
    let mut rates = cfg.open_loop.request_rates.clone();
    rates.sort_by(f64::total_cmp);
    let join = |v: Vec<String>| v.join(", ");
    format!(
        "open loop: rates {} req/s × contexts {}: {} cells ({} arrivals, seed {}{}), requests per cell: {}",
        join(rates.iter().map(|r| format!("{r}")).collect()),
        join(
            cfg.matrix
                .contexts
                .iter()
                .map(|&x| format_context(x))
                .collect()
        ),
        rates.len() * cfg.matrix.contexts.len(),
        cfg.open_loop.arrival,
        cfg.open_loop.seed,
        if cfg.open_loop.max_in_flight > 0 {
            format!(", at most {} in flight", cfg.open_loop.max_in_flight)
        } else {
            String::new()
        },
        join(
            rates
                .iter()
                .map(|&r| {
                    crate::open_loop::requests_per_cell(
                        r,
                        cfg.open_loop.rate_request_count,
                        cfg.matrix.duration,
                    )
                    .to_string()
                })
                .collect()
        )
    )
}

/// The `skip_reason` of a prefill context beyond the prompt limit.
pub fn beyond_prefill_limit(context: u64, max_prefill: u64, model_context: u64) -> String {
    if model_context > 0 {
        format!(
            "context {context} exceeds the prefill limit {max_prefill} (model context \
             {model_context} − {PREFILL_MARGIN}, at most 128k)"
        )
    } else {
        format!("context {context} exceeds the prefill limit {max_prefill} (at most 128k)")
    }
}

/// A lower estimate: windows, warmups and a fixed overhead per cell and per
/// prefill row. Ramp-up on a slow server, long prefills and request-count
/// cells (whose length depends on the server) come on top.
fn estimate_seconds(cfg: &RunConfig, p: &RunPlan) -> f64 {
    let measured: f64 = p
        .cells_to_measure()
        .map(|c| f64::from(cfg.matrix.repeat.max(1).saturating_sub(c.carried_repeats)))
        .sum();
    let per_cell = if cfg.matrix.request_count > 0 {
        CELL_OVERHEAD_S
    } else {
        // The interference probe: its quiet stretch, then per length a
        // prefill and a settle stretch (about 1 s each; a rough floor).
        let probe = match cfg.matrix.mixed_prefill_contexts.len() {
            0 => 0.0,
            n => 1.0 + 2.0 * n as f64,
        };
        cfg.matrix.duration + CELL_OVERHEAD_S + probe
    };
    let rows = p
        .scout_only
        .iter()
        .chain(&p.standalone)
        .filter(|x| !p.prefill_carried.contains(x))
        .count() as f64
        + f64::from(u8::from(p.prefill_warmup.is_some()));
    let warmup = if p.decode_warmup.is_some() {
        cfg.matrix.decode_warmup_seconds + CELL_OVERHEAD_S
    } else {
        0.0
    };
    let rate_cells = if cfg.open_loop.is_on() {
        (cfg.matrix.contexts.len() - p.rate_skips.len()) as f64
            * cfg.open_loop.request_rates.len() as f64
    } else {
        0.0
    };
    (measured + rate_cells) * per_cell + rows * PREFILL_ROW_S + warmup
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::kv::Infeasible;

    fn cfg(concs: &[u32], ctxs: &[u64]) -> RunConfig {
        RunConfig {
            matrix: crate::config::MatrixConfig {
                concurrency: concs.to_vec(),
                contexts: ctxs.to_vec(),
                max_tokens: 1024,
                duration: 30.0,
                decode_warmup_seconds: 10.0,
                ..Default::default()
            },
            prefill: crate::config::PrefillConfig {
                prefill_contexts: vec![],
                ..Default::default()
            },
            ..RunConfig::default()
        }
    }

    const LIMITS: ServerLimits = ServerLimits {
        model_context: 32_768,
        kv_budget: 100_000,
    };

    #[test]
    fn cells_run_first_column_then_first_row_then_the_rest() {
        assert_eq!(
            test_order(&[1, 2, 4], &[0, 8192]),
            vec![(1, 0), (1, 8192), (2, 0), (4, 0), (2, 8192), (4, 8192)]
        );
    }

    #[test]
    fn kv_and_context_skips_are_decided_with_their_deficits() {
        let p = plan(&cfg(&[1, 8], &[0, 16_384, 32_768]), LIMITS);
        let skip = |c: u32, x: u64| {
            p.cells
                .iter()
                .find(|k| k.concurrency == c && k.context == x)
                .expect("cell")
                .skip
                .clone()
        };
        assert_eq!(skip(1, 0), None);
        assert_eq!(skip(1, 16_384), None);
        // 8 × (16k + 1k) = 139,264 > 100,000.
        assert_eq!(
            skip(8, 16_384),
            Some(Infeasible::Kv {
                needed: 139_264,
                budget: 100_000
            })
        );
        assert_eq!(skip(8, 16_384).map(|i| i.deficit()), Some(39_264));
        // 32k + 1k > 32k: beyond the model, whatever the concurrency.
        assert_eq!(
            skip(1, 32_768),
            Some(Infeasible::Context {
                needed: 33_792,
                limit: 32_768
            })
        );
        assert_eq!(p.measured_cells().count(), 3);
        // Prompts are sized only for contexts a single request can use.
        assert_eq!(p.prompt_contexts, vec![0, 16_384]);
        // The decode warmup uses the largest context one request fits.
        assert_eq!(p.decode_warmup, Some(16_384));
    }

    #[test]
    fn integrated_scout_only_and_skipped_prefill_contexts() {
        let mut c = cfg(&[1], &[0, 4096]);
        c.prefill.prefill_contexts = vec![4096, 65_536, 1024];
        let p = plan(&c, LIMITS);
        assert_eq!(p.max_prefill, 32_768 - 64);
        assert_eq!(p.integrated_prefill, vec![4096]);
        assert_eq!(p.scout_only, vec![1024]);
        assert!(p.standalone.is_empty());
        assert_eq!(p.prefill_skipped.len(), 1);
        assert_eq!(p.prefill_skipped[0].context, 65_536);
        assert_eq!(p.prefill_skipped[0].method, "scout_only");
        assert!(
            p.prefill_skipped[0]
                .reason
                .contains("exceeds the prefill limit 32704"),
            "{}",
            p.prefill_skipped[0].reason
        );
        assert_eq!(p.prefill_warmup, Some(1024));
        assert_eq!(p.prompt_contexts, vec![0, 1024, 4096]);
    }

    #[test]
    fn prefill_only_plans_no_cells_and_standalone_rows() {
        let mut c = cfg(&[1, 2], &[0, 4096]);
        c.prefill.prefill_only = true;
        c.prefill.prefill_contexts = vec![2048, 200_000];
        let p = plan(&c, ServerLimits::default());
        assert!(p.cells.is_empty());
        assert!(p.integrated_prefill.is_empty() && p.scout_only.is_empty());
        assert_eq!(p.standalone, vec![2048]);
        assert_eq!(p.prefill_skipped[0].context, 200_000);
        assert_eq!(p.prefill_skipped[0].method, "client");
        assert_eq!(p.decode_warmup, None);
        assert_eq!(p.prompt_contexts, vec![2048]);
    }

    #[test]
    fn skip_prefill_measures_no_prefill_row() {
        let mut c = cfg(&[1], &[0, 4096]);
        c.prefill.skip_prefill = true;
        c.prefill.prefill_contexts = vec![1024];
        let p = plan(&c, LIMITS);
        assert!(p.integrated_prefill.is_empty() && p.scout_only.is_empty());
        assert_eq!(p.prefill_warmup, None);
    }

    #[test]
    fn unknown_limits_skip_nothing() {
        let p = plan(&cfg(&[64], &[0, 131_072]), ServerLimits::default());
        assert!(p.cells.iter().all(|c| c.skip.is_none()));
        assert_eq!(p.max_prefill, 131_072);
    }

    #[test]
    fn the_estimate_counts_windows_warmup_and_overheads() {
        let p = plan(&cfg(&[1, 8], &[0, 16_384, 32_768]), LIMITS);
        // 3 measured cells × (30 + 6) + warmup (10 + 6) + prefill warmup 3.
        assert!(
            (p.estimated_seconds - (3.0 * 36.0 + 16.0 + 3.0)).abs() < 1e-9,
            "{}",
            p.estimated_seconds
        );
        let shown = ldb_report::text::plan::PlanText(&p).to_string();
        assert!(shown.contains("estimated time: at least 2m07s"), "{shown}");
        assert!(
            shown.contains("C=8 ctx=16k  skip: needs 139k KV tokens"),
            "{shown}"
        );
        assert!(
            shown.contains("6 in order, 3 measured, 3 skipped"),
            "{shown}"
        );
    }
}
