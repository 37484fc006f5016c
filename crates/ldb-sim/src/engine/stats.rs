//! Truth counters kept by the engine (and read by `/metrics` and [`crate::SimHandle::stats`]).

use std::collections::BTreeMap;

/// vLLM's bucket bounds for request-duration histograms (seconds).
pub const DURATION_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// vLLM's bucket bounds for time to first token (seconds).
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// 1-2-5 bucket bounds for token-count histograms.
pub const TOKEN_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0,
    50000.0, 100000.0, 200000.0, 500000.0, 1000000.0,
];

/// A Prometheus-style histogram with fixed bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Upper bounds of the finite buckets.
    pub bounds: &'static [f64],
    /// Observations per bucket (not cumulative); one extra slot for `+Inf`.
    pub counts: Vec<u64>,
    /// Sum of observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    /// An empty histogram with the given bounds.
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    /// Record one value.
    pub fn observe(&mut self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|&b| v <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// Cumulative counts per bound, ending with `+Inf` (= `count`).
    pub fn cumulative(&self) -> Vec<u64> {
        let mut acc = 0;
        self.counts
            .iter()
            .map(|c| {
                acc += c;
                acc
            })
            .collect()
    }
}

/// What the engine did, counted exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    /// Requests accepted by the engine (after HTTP validation).
    pub submitted: u64,
    /// Requests that finished with `stop` or `length`.
    pub completed: u64,
    /// Requests aborted (client disconnect or SGLang `/abort_request`).
    pub aborted: u64,
    /// Finished requests by finish reason (`stop`, `length`, `abort`).
    pub finished_by_reason: BTreeMap<String, u64>,
    /// Tokens generated (and sent) in total.
    pub generated_tokens: u64,
    /// Prompt tokens of requests whose first prefill finished (cached ones included).
    pub prompt_tokens: u64,
    /// Of those, tokens computed by prefill.
    pub prompt_tokens_computed: u64,
    /// Of those, tokens served from the prefix cache.
    pub prompt_tokens_cached: u64,
    /// Tokens recomputed after preemption.
    pub recomputed_tokens: u64,
    /// Prefix-cache lookups, in tokens.
    pub prefix_queries: u64,
    /// Prefix-cache hits, in tokens.
    pub prefix_hits: u64,
    /// Engine steps run (any work).
    pub engine_steps: u64,
    /// Steps that decoded at least one sequence.
    pub decode_steps: u64,
    /// Sequence-steps of decoding (Σ batch size over decode steps).
    pub decode_seq_steps: u64,
    /// Spec-decode draft rounds (one per decoding sequence per step).
    pub spec_drafts: u64,
    /// Draft tokens proposed.
    pub spec_draft_tokens: u64,
    /// Draft tokens accepted (bonus token excluded).
    pub spec_accepted: u64,
    /// Accepted draft tokens per position.
    pub spec_accepted_per_pos: Vec<u64>,
    /// Preemptions (recompute).
    pub preemptions: u64,
    /// Sequences running now.
    pub running: usize,
    /// Requests waiting now.
    pub waiting: usize,
    /// KV blocks referenced now.
    pub kv_blocks_used: usize,
    /// KV blocks in total.
    pub kv_blocks_total: usize,
    /// Tokens held by running sequences now.
    pub kv_tokens_used: u64,
    /// Largest number of tokens processed by one step.
    pub max_step_tokens: u64,
    /// Seconds spent in steps that prefilled.
    pub prefill_seconds: f64,
    /// Seconds spent in decode steps.
    pub decode_seconds: f64,
    /// Prefill time per request (first scheduled to first token).
    pub prefill_time: Histogram,
    /// Newly computed prompt tokens per request.
    pub prefill_kv_computed: Histogram,
    /// Arrival to first token.
    pub ttft: Histogram,
    /// Arrival to finish.
    pub e2e: Histogram,
    /// Arrival to first scheduled.
    pub queue_time: Histogram,
    /// Decode throughput over the last SGLang log interval (tokens/s).
    pub interval_gen_throughput: f64,
    /// Mean accepted length (bonus included) over the last log interval.
    pub interval_accept_length: f64,
    /// Acceptance rate over the last log interval.
    pub interval_accept_rate: f64,
}

impl EngineStats {
    pub(crate) fn new(k: usize, kv_blocks_total: usize) -> Self {
        EngineStats {
            submitted: 0,
            completed: 0,
            aborted: 0,
            finished_by_reason: BTreeMap::new(),
            generated_tokens: 0,
            prompt_tokens: 0,
            prompt_tokens_computed: 0,
            prompt_tokens_cached: 0,
            recomputed_tokens: 0,
            prefix_queries: 0,
            prefix_hits: 0,
            engine_steps: 0,
            decode_steps: 0,
            decode_seq_steps: 0,
            spec_drafts: 0,
            spec_draft_tokens: 0,
            spec_accepted: 0,
            spec_accepted_per_pos: vec![0; k],
            preemptions: 0,
            running: 0,
            waiting: 0,
            kv_blocks_used: 0,
            kv_blocks_total,
            kv_tokens_used: 0,
            max_step_tokens: 0,
            prefill_seconds: 0.0,
            decode_seconds: 0.0,
            prefill_time: Histogram::new(DURATION_BUCKETS),
            prefill_kv_computed: Histogram::new(TOKEN_BUCKETS),
            ttft: Histogram::new(TTFT_BUCKETS),
            e2e: Histogram::new(DURATION_BUCKETS),
            queue_time: Histogram::new(DURATION_BUCKETS),
            interval_gen_throughput: 0.0,
            interval_accept_length: 0.0,
            interval_accept_rate: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets() {
        let mut h = Histogram::new(&[1.0, 2.0]);
        h.observe(0.5);
        h.observe(2.0);
        h.observe(9.0);
        assert_eq!(h.cumulative(), vec![1, 2, 3]);
        assert_eq!(h.count, 3);
    }
}
