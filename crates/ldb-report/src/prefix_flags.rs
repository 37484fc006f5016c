//! The prefix-cache check of every cell that has one: the hit rate its
//! prompts intended against the one the server achieved, and the flag when
//! they are more than 10 points apart (methodology §16). Shared by the text
//! report, the HTML warnings, the CSV columns and `compare`.

use ldb_core::document::ResultDocument;
use ldb_core::numfmt::context;
use ldb_core::result::{PREFIX_MISMATCH_POINTS, PrefixCacheCell};

/// One cell's prefix-cache figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixRow {
    /// `C=4 ctx=2k`, `burst C=4 ctx=2k` or `R=2 req/s ctx=2k`.
    pub cell: String,
    /// Intended hit rate (0–1).
    pub intended: f64,
    /// Achieved hit rate (0–1), when the server reported one.
    pub achieved: Option<f64>,
    /// Where the achieved one came from.
    pub source: String,
    /// More than [`PREFIX_MISMATCH_POINTS`] apart.
    pub flagged: bool,
}

impl PrefixRow {
    fn of(cell: String, p: &PrefixCacheCell, achieved: Option<f64>) -> Option<PrefixRow> {
        Some(PrefixRow {
            cell,
            intended: p.prefix_cache_intended?,
            achieved,
            source: p.server_prefix_cache_source.clone(),
            flagged: p.mismatch(achieved),
        })
    }

    /// The flag in words, when flagged.
    pub fn flag_text(&self) -> Option<String> {
        let a = self.achieved.filter(|_| self.flagged)?;
        Some(format!(
            "{}: prefix-cache hit rate {:.1} % achieved ({}) vs {:.1} % intended by its prompts, \
             more than {PREFIX_MISMATCH_POINTS:.0} points apart: {}",
            self.cell,
            a * 100.0,
            self.source,
            self.intended * 100.0,
            if a < self.intended {
                "the server's cache evicted or did not share what the prompts share"
            } else {
                "the server served more from its cache than the prompts share (a reset refused?)"
            }
        ))
    }
}

/// Every cell of `doc` with an intended rate, in file order.
pub fn rows(doc: &ResultDocument) -> Vec<PrefixRow> {
    let mut out = Vec::new();
    for (layer, list) in [("", &doc.results), ("burst ", &doc.burst_results)] {
        for c in list {
            let cell = format!(
                "{layer}C={} ctx={}",
                c.concurrency,
                context(c.context_tokens)
            );
            out.extend(PrefixRow::of(
                cell,
                &c.ext.prefix_cache,
                c.ext.server_prefix_cache_hit_rate,
            ));
        }
    }
    for r in &doc.rate_results {
        let cell = format!(
            "R={} req/s ctx={}",
            r.request_rate,
            context(r.context_tokens)
        );
        out.extend(PrefixRow::of(
            cell,
            &r.prefix_cache,
            r.server_prefix_cache_hit_rate,
        ));
    }
    out
}

/// The flags of `doc`, one line each.
pub fn flags(doc: &ResultDocument) -> Vec<String> {
    rows(doc).iter().filter_map(PrefixRow::flag_text).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::open_loop::RateResult;

    #[test]
    fn a_gap_above_ten_points_is_flagged_with_its_direction() {
        let mut doc = ResultDocument::default();
        for (rate, intended, achieved) in [(1.0, 0.5, 0.45), (2.0, 0.5, 0.2), (4.0, 0.3, 0.9)] {
            doc.rate_results.push(RateResult {
                request_rate: rate,
                context_tokens: 2048,
                server_prefix_cache_hit_rate: Some(achieved),
                prefix_cache: PrefixCacheCell {
                    prefix_cache_intended: Some(intended),
                    server_prefix_cache_source: "vllm_counters".into(),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        let r = rows(&doc);
        assert_eq!(
            r.iter().map(|r| r.flagged).collect::<Vec<_>>(),
            [false, true, true]
        );
        let f = flags(&doc);
        assert_eq!(f.len(), 2);
        assert!(
            f[0].starts_with("R=2 req/s ctx=2k: prefix-cache hit rate 20.0 %"),
            "{}",
            f[0]
        );
        assert!(f[0].contains("evicted") && f[1].contains("reset refused"));
    }
}
