//! The `{context: {concurrency: value}}` tables derived from the cells.
//!
//! They are recomputed from `results` on every write and ignored on read, so
//! they can never disagree with the cells.

use serde_json::{Map, Value};

use super::CellResult;

/// A matrix keyed `{context: {concurrency: value}}` with numeric-order keys.
pub fn matrix_table<T: Into<Value> + Clone>(
    cells: &[(u64, u32, T)],
    contexts: &[u64],
    concurrencies: &[u32],
) -> Value {
    let mut outer = Map::new();
    for ctx in contexts {
        let mut inner = Map::new();
        for c in concurrencies {
            if let Some((_, _, v)) = cells.iter().find(|(x, y, _)| x == ctx && y == c) {
                inner.insert(c.to_string(), v.clone().into());
            }
        }
        if !inner.is_empty() {
            outer.insert(ctx.to_string(), Value::Object(inner));
        }
    }
    Value::Object(outer)
}

/// `summary_table` (values, `null` when not reported) and its status twin.
pub fn summary_tables(cells: &[CellResult], contexts: &[u64], concs: &[u32]) -> (Value, Value) {
    let values: Vec<(u64, u32, Value)> = cells
        .iter()
        .map(|c| (c.context_tokens, c.concurrency, opt_f64(c.aggregate_tps)))
        .collect();
    let statuses: Vec<(u64, u32, Value)> = cells
        .iter()
        .map(|c| {
            (
                c.context_tokens,
                c.concurrency,
                c.ext.status.as_str().into(),
            )
        })
        .collect();
    (
        matrix_table(&values, contexts, concs),
        matrix_table(&statuses, contexts, concs),
    )
}

fn opt_f64(v: Option<f64>) -> Value {
    v.map_or(Value::Null, Value::from)
}
