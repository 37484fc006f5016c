//! Energy and cost of matched cells side by side (docs/compare.md, "Energy
//! and cost"): joules per output and prompt token and dollars per million
//! output tokens (lower is better), tokens per second per kW (higher is
//! better), each with its change and, where a side has no figure, that
//! side's reason. Shown for reading, not judged: GPU energy counters and
//! prices are not what a regression gate is for, so these changes never
//! set the exit code.

use std::collections::BTreeMap;

use ldb_core::document::ResultDocument;
use ldb_core::energy_cost::CellEnergyCost;

use super::cells::{CellKey, Layer};
use super::metric::{Change, Direction, Estimate};

#[cfg(test)]
mod tests;

/// An energy or cost figure of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnergyMetric {
    /// `decode_joules_per_token`, J per output token.
    DecodeJoulesPerToken,
    /// `prefill_joules_per_token`, J per prompt token.
    PrefillJoulesPerToken,
    /// `tokens_per_second_per_kw`.
    TokensPerSecondPerKw,
    /// `usd_per_million_output_tokens`.
    UsdPerMillionOutputTokens,
}

impl EnergyMetric {
    /// Every figure, in table order.
    pub const ALL: [EnergyMetric; 4] = [
        EnergyMetric::DecodeJoulesPerToken,
        EnergyMetric::PrefillJoulesPerToken,
        EnergyMetric::TokensPerSecondPerKw,
        EnergyMetric::UsdPerMillionOutputTokens,
    ];

    /// The key in the cell's `energy_cost` (and in the comparison JSON).
    pub fn key(self) -> &'static str {
        match self {
            EnergyMetric::DecodeJoulesPerToken => "decode_joules_per_token",
            EnergyMetric::PrefillJoulesPerToken => "prefill_joules_per_token",
            EnergyMetric::TokensPerSecondPerKw => "tokens_per_second_per_kw",
            EnergyMetric::UsdPerMillionOutputTokens => "usd_per_million_output_tokens",
        }
    }

    /// Column title.
    pub fn label(self) -> &'static str {
        match self {
            EnergyMetric::DecodeJoulesPerToken => "J/out tok",
            EnergyMetric::PrefillJoulesPerToken => "J/prompt tok",
            EnergyMetric::TokensPerSecondPerKw => "tok/s/kW",
            EnergyMetric::UsdPerMillionOutputTokens => "$/Mtok out",
        }
    }

    /// Which way is better.
    pub fn direction(self) -> Direction {
        match self {
            EnergyMetric::TokensPerSecondPerKw => Direction::HigherIsBetter,
            _ => Direction::LowerIsBetter,
        }
    }

    /// The figure, or why there is none.
    fn read(self, e: &CellEnergyCost) -> (Option<f64>, Option<String>) {
        let (v, why) = match self {
            EnergyMetric::DecodeJoulesPerToken => {
                (e.decode_joules_per_token, &e.decode_joules_per_token_reason)
            }
            EnergyMetric::PrefillJoulesPerToken => (
                e.prefill_joules_per_token,
                &e.prefill_joules_per_token_reason,
            ),
            EnergyMetric::TokensPerSecondPerKw => (
                e.tokens_per_second_per_kw,
                &e.tokens_per_second_per_kw_reason,
            ),
            EnergyMetric::UsdPerMillionOutputTokens => (
                e.usd_per_million_output_tokens,
                &e.usd_per_million_output_tokens_reason,
            ),
        };
        let v = v.filter(|x| x.is_finite());
        let why = if v.is_some() {
            None
        } else {
            Some(why.clone().unwrap_or_else(|| "no figure".into()))
        };
        (v, why)
    }
}

/// One figure of a matched cell.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyChange {
    /// Which figure.
    pub metric: EnergyMetric,
    /// Base → new, judged in the figure's direction (for the marks only).
    pub change: Change,
    /// Why the base has no figure.
    pub base_reason: Option<String>,
    /// Why the new run has no figure.
    pub new_reason: Option<String>,
}

/// A cell either run has energy figures for.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyComparison {
    /// The cell.
    pub key: CellKey,
    /// Every figure, in [`EnergyMetric::ALL`] order.
    pub figures: Vec<EnergyChange>,
}

/// The energy figures of each measured cell of a run, by key (the later
/// cell of a key counts, as in the report).
fn keyed(doc: &ResultDocument) -> BTreeMap<CellKey, &CellEnergyCost> {
    let mut m = BTreeMap::new();
    for (layer, cells) in [
        (Layer::Decode, &doc.results),
        (Layer::Burst, &doc.burst_results),
    ] {
        for c in cells.iter().filter(|c| !c.ext.status.is_skip()) {
            if let Some(e) = &c.ext.energy_cost {
                let key = CellKey {
                    layer,
                    context_tokens: c.context_tokens,
                    concurrency: c.concurrency,
                };
                m.insert(key, e);
            }
        }
    }
    m
}

/// Every cell with energy figures in either run, in key order; a side
/// without them says why (`absent`: the run has no such cell or recorded
/// no energy figures for it).
pub fn compare_energy(
    base: &ResultDocument,
    new: &ResultDocument,
    threshold_pct: f64,
) -> Vec<EnergyComparison> {
    let (b, n) = (keyed(base), keyed(new));
    let mut keys: Vec<CellKey> = b.keys().chain(n.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    let absent = "the run recorded no energy figures for this cell";
    let side = |e: Option<&&CellEnergyCost>, m: EnergyMetric| match e {
        Some(e) => m.read(e),
        None => (None, Some(absent.to_string())),
    };
    keys.into_iter()
        .map(|key| EnergyComparison {
            key,
            figures: EnergyMetric::ALL
                .into_iter()
                .map(|metric| {
                    let (bv, base_reason) = side(b.get(&key), metric);
                    let (nv, new_reason) = side(n.get(&key), metric);
                    EnergyChange {
                        metric,
                        change: Change::between(
                            bv.map(Estimate::single),
                            nv.map(Estimate::single),
                            metric.direction(),
                            threshold_pct,
                        ),
                        base_reason,
                        new_reason,
                    }
                })
                .collect(),
        })
        .collect()
}
