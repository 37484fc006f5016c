//! Whether a cell fits the server: KV budget and model context.

/// Why a cell cannot run.
#[derive(Debug, Clone, PartialEq)]
pub enum Infeasible {
    /// `context + max_tokens` exceeds the model's context length.
    Context {
        /// Tokens one request needs.
        needed: u64,
        /// The model's context length.
        limit: u64,
    },
    /// C × (context + max_tokens) exceeds the KV budget.
    Kv {
        /// Tokens the cell needs.
        needed: u64,
        /// The KV budget.
        budget: u64,
    },
}

impl Infeasible {
    /// Tokens missing.
    pub fn deficit(&self) -> u64 {
        match self {
            Infeasible::Context { needed, limit } => needed.saturating_sub(*limit),
            Infeasible::Kv { needed, budget } => needed.saturating_sub(*budget),
        }
    }

    /// One line for reports and events.
    pub fn reason(&self) -> String {
        match self {
            Infeasible::Context { needed, limit } => format!(
                "context {needed} tokens (prompt + max_tokens) exceeds the model context {limit}"
            ),
            Infeasible::Kv { needed, budget } => format!(
                "needs {} KV tokens, budget {} (short by {})",
                compact_tokens(*needed),
                compact_tokens(*budget),
                compact_tokens(needed.saturating_sub(*budget))
            ),
        }
    }
}

/// Check one cell. Zero `budget` or `model_context` means unknown (no check).
///
/// The KV rule counts every stream's full context, as the reference did; the C
/// identical prompts share prefix blocks on servers with a prefix cache, so a
/// cell this rule skips may still fit — pass `--kv-budget` to override.
pub fn check(
    concurrency: u32,
    context: u64,
    max_tokens: u64,
    budget: u64,
    model_context: u64,
) -> Option<Infeasible> {
    let per_request = context + max_tokens;
    if model_context > 0 && per_request > model_context {
        return Some(Infeasible::Context {
            needed: per_request,
            limit: model_context,
        });
    }
    let needed = u64::from(concurrency) * per_request;
    if budget > 0 && needed > budget {
        return Some(Infeasible::Kv { needed, budget });
    }
    None
}

/// `1.23M`, `37k`, or the raw number.
pub fn compact_tokens(v: u64) -> String {
    if v >= 1_000_000 {
        format!("{:.2}M", v as f64 / 1e6)
    } else if v >= 10_000 {
        format!("{}k", v / 1000)
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_before_kv_and_unknowns_pass() {
        assert_eq!(check(1, 98_304, 1024, 0, 98_304).unwrap().deficit(), 1024);
        let kv = check(16, 65_536, 1024, 884_736, 98_304).unwrap();
        assert!(matches!(kv, Infeasible::Kv { .. }));
        assert_eq!(kv.deficit(), 16 * 66_560 - 884_736);
        assert!(check(4, 65_536, 1024, 884_736, 98_304).is_none());
        assert!(check(1000, 1 << 20, 1024, 0, 0).is_none());
        assert_eq!(compact_tokens(1_234_567), "1.23M");
        assert_eq!(compact_tokens(37_000), "37k");
    }
}
