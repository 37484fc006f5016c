//! The SLO frontier: per context, the highest concurrency whose cell meets
//! the SLO — the capacity figure a deployment is sized with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::result::{CellResult, CellStatus};

/// The passing cell at the frontier of one context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrontierPoint {
    /// Its concurrency.
    pub concurrency: u32,
    /// Its `aggregate_tps`.
    pub aggregate_tps: Option<f64>,
    /// Its `goodput`.
    pub goodput: Option<f64>,
}

/// Context → the highest-concurrency cell with `slo_met: true` and status
/// `ok` (a capacity-limited cell did not run its concurrency, so it cannot
/// stand for it); `None` for a context where no cell qualifies. Levels are
/// not assumed monotone: a failing middle level does not hide a higher
/// passing one. Reads the verdicts written by `evaluate`.
pub fn frontier(cells: &[CellResult]) -> BTreeMap<u64, Option<FrontierPoint>> {
    let mut out: BTreeMap<u64, Option<FrontierPoint>> = BTreeMap::new();
    for c in cells {
        let best = out.entry(c.context_tokens).or_default();
        let passes = c.ext.status == CellStatus::Ok && c.ext.slo_met == Some(Some(true));
        if passes && best.is_none_or(|b| c.concurrency >= b.concurrency) {
            *best = Some(FrontierPoint {
                concurrency: c.concurrency,
                aggregate_tps: c.aggregate_tps,
                goodput: c.ext.goodput.flatten(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(ctx: u64, conc: u32, met: Option<bool>) -> CellResult {
        let mut c = CellResult {
            context_tokens: ctx,
            concurrency: conc,
            aggregate_tps: Some(f64::from(conc) * 10.0),
            ..CellResult::default()
        };
        c.ext.slo_met = Some(met);
        c.ext.goodput = Some(Some(f64::from(conc)));
        c
    }

    #[test]
    fn the_highest_passing_concurrency_wins_even_past_a_failing_one() {
        let mut limited = cell(0, 32, Some(true));
        limited.ext.status = CellStatus::CapacityLimited;
        let cells = [
            cell(0, 1, Some(true)),
            cell(0, 4, Some(false)),
            cell(0, 16, Some(true)),
            limited,
            cell(8192, 1, Some(false)),
            cell(8192, 4, None),
        ];
        let f = frontier(&cells);
        assert_eq!(
            f[&0],
            Some(FrontierPoint {
                concurrency: 16,
                aggregate_tps: Some(160.0),
                goodput: Some(16.0)
            })
        );
        assert_eq!(f[&8192], None);
        assert_eq!(f.len(), 2);
    }
}
