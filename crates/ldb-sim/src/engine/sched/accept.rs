//! Speculative-decoding acceptance and SGLang's interval gauges.

use rand::Rng;

use super::Scheduler;

impl Scheduler {
    pub(super) fn sample_accepted(&mut self) -> u32 {
        let mut acc = 0u32;
        for (i, &q) in self.cond_probs.iter().enumerate() {
            let accept = match &mut self.diffusion {
                Some(acc) => {
                    acc[i] += q;
                    let hit = acc[i] >= 1.0 - 1e-9;
                    if hit {
                        acc[i] -= 1.0;
                    }
                    hit
                }
                None => self.rng.random::<f64>() < q,
            };
            if accept {
                acc += 1;
                self.stats.spec_accepted_per_pos[i] += 1;
            } else {
                break;
            }
        }
        self.stats.spec_drafts += 1;
        self.stats.spec_draft_tokens += self.cond_probs.len() as u64;
        self.stats.spec_accepted += u64::from(acc);
        acc
    }

    /// SGLang-style gauges recomputed every `decode_log_interval` decode steps.
    pub(super) fn log_interval(&mut self, step_s: f64) {
        if self.plan_decode_batch == 0 {
            return;
        }
        let iv = &mut self.interval;
        iv.steps += 1;
        iv.seconds += step_s;
        iv.seq_steps += self.plan_decode_batch as u64;
        if iv.steps < self.cfg.server.decode_log_interval {
            return;
        }
        let tokens = iv.tokens as f64;
        let seq_steps = iv.seq_steps as f64;
        let k = self.cond_probs.len() as f64;
        let st = &mut self.stats;
        st.interval_gen_throughput = if iv.seconds > 0.0 {
            tokens / iv.seconds
        } else {
            0.0
        };
        st.interval_accept_length = if seq_steps > 0.0 {
            tokens / seq_steps
        } else {
            0.0
        };
        st.interval_accept_rate = if k > 0.0 && seq_steps > 0.0 {
            ((tokens - seq_steps) / (seq_steps * k)).max(0.0)
        } else {
            0.0
        };
        *iv = Interval::default();
    }
}

/// Counters of the current SGLang log interval.
#[derive(Debug, Default)]
pub(super) struct Interval {
    pub(super) steps: u32,
    pub(super) tokens: u64,
    pub(super) seq_steps: u64,
    pub(super) seconds: f64,
}
