//! Admission (FIFO, running cap, KV room, prefix hits) and recompute preemption.

use tokio::time::Instant;

use super::{Scheduler, blocks_for};
use crate::engine::{Chunk, FinishReason};

impl Scheduler {
    pub(super) fn admit(&mut self, now: Instant) {
        // Prompt and cached tokens of this prefill batch (SGLang's
        // `cache_hit_rate` gauge shows the last batch's share).
        let (mut batch_prompt, mut batch_cached) = (0u64, 0u64);
        self.admit_batch(now, &mut batch_prompt, &mut batch_cached);
        if batch_prompt > 0 {
            self.stats.last_batch_cache_hit_rate = batch_cached as f64 / batch_prompt as f64;
        }
    }

    fn admit_batch(&mut self, now: Instant, batch_prompt: &mut u64, batch_cached: &mut u64) {
        while self.running.len() < self.cfg.scheduler.max_running as usize {
            let Some(seq) = self.waiting.front() else {
                break;
            };
            let len = seq.len();
            let hits = self.kv.lookup(&seq.req.block_hashes);
            let need = blocks_for(len, self.block_tokens);
            let fresh = need.saturating_sub(hits.len());
            let available = self.kv.free() - self.kv.count_free(&hits);
            if fresh > available {
                if self.running.is_empty() && need > self.kv.total() {
                    // Can never fit: end it rather than block the queue forever.
                    if let Some(seq) = self.waiting.pop_front() {
                        let _ = seq.req.tx.send(Chunk {
                            n: 0,
                            total: seq.generated,
                            cached: 0,
                            finish: Some(FinishReason::Length),
                        });
                        self.retire(seq, FinishReason::Length, now);
                    }
                    continue;
                }
                break;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            for &b in &hits {
                self.kv.acquire(b);
            }
            seq.blocks = hits;
            for _ in 0..fresh {
                if let Some(b) = self.kv.allocate() {
                    seq.blocks.push(b);
                }
            }
            // Whole blocks only, and never the last prompt token: a fully
            // cached prompt recomputes its last block (as vLLM does).
            let bt = u64::from(self.block_tokens.max(1));
            let hit_tokens = (need - fresh) as u64 * bt;
            let cap = u64::from(len.saturating_sub(1)) / bt * bt;
            let cached = hit_tokens.min(cap) as u32;
            seq.prefill_left = len - cached;
            seq.prefill_total = len - cached;
            if !seq.scheduled_once {
                seq.scheduled_once = true;
                seq.cached = cached;
                self.stats.prefix_queries += u64::from(seq.req.prompt_len);
                self.stats.prefix_hits += u64::from(cached);
                *batch_prompt += u64::from(seq.req.prompt_len);
                *batch_cached += u64::from(cached);
                if std::mem::take(&mut self.after_reset) {
                    self.stats.first_cached_after_reset.push(u64::from(cached));
                }
                self.stats
                    .queue_time
                    .observe((now - seq.req.arrival).as_secs_f64());
            } else {
                self.stats.recomputed_tokens += u64::from(len - cached);
            }
            self.running.push(seq);
        }
    }

    pub(super) fn preempt_last(&mut self) {
        if let Some(mut seq) = self.running.pop() {
            for b in seq.blocks.drain(..) {
                self.kv.release(b);
            }
            seq.prefill_left = 0;
            seq.plan_decode = false;
            seq.plan_prefill = 0;
            self.stats.preemptions += 1;
            self.waiting.push_front(seq);
        }
    }
}
