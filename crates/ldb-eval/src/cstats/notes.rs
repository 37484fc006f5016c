//! The texts of a completion-stats result's `methodology` block: how its
//! numbers are made, in words (docs/completion-stats.md has the long form).
//! They live beside the document type, so the runner supplies no prose.

use super::document::CsMethodology;

impl CsMethodology {
    /// The notes every completion-stats result carries.
    pub fn standard() -> CsMethodology {
        CsMethodology {
            name: "completion-token statistics".into(),
            prefill:
                "Unless turned off, one request with max_tokens = 1 is sent first; its time to \
                  first token and prompt tokens describe the prompt's prefill. It is not part of \
                  any statistic."
                    .into(),
            adaptive_concurrency: "Without a fixed concurrency, levels are probed in rising order \
                               with C x waves requests each (waves alone at C = 1). A level \
                               improves on the best so far when its aggregate gen tok/s exceeds \
                               best x (1 + min_improvement); the first level always sets the \
                               best. After `patience` levels without improvement the probe stops \
                               (unless auto-stop is off), and batches at the best level follow \
                               until min-results runs have completed there."
                .into(),
            token_need: "Completion tokens come from the server's usage report (else one per \
                     streamed chunk, flagged estimated_tokens). Statistics are over completed \
                     runs: avg, min, max, p50/p90/p99 (linear interpolation) and population std. \
                     Aggregate gen tok/s = sum of tokens / the time at least one request was \
                     generating (union of the first-to-last output chunk intervals); with one \
                     request at a time that is sum of tokens / sum of gen_elapsed. The e2e \
                     aggregate uses send-to-end intervals."
                .into(),
            correctness: "Each completed run is judged by the task's scorer (a case-insensitive \
                      regex on the chosen text, or a profile's scorer); correct_rate = correct / \
                      scored. With a dataset, accuracy carries a Wilson 95% interval."
                .into(),
        }
    }
}
