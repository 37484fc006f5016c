//! The scheduler: continuous batching, KV admission, chunked prefill, spec decode, preemption.
//!
//! Sans-IO apart from the per-request channel: [`Scheduler::plan`] decides what the next step
//! does and how long it takes; the engine task sleeps until the step's end and then calls
//! [`Scheduler::apply`], which samples acceptance, emits tokens and retires finished requests.

use std::collections::VecDeque;
use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::time::Instant;

mod accept;
mod admit;

use accept::Interval;

use super::kv::KvCache;
use super::stats::EngineStats;
use super::{Chunk, FinishReason, NewRequest};
use crate::scenario::Scenario;

struct Seq {
    req: NewRequest,
    generated: u32,
    pending: u32,
    cached: u32,
    blocks: Vec<u32>,
    prefill_left: u32,
    prefill_total: u32,
    first_done: bool,
    plan_prefill: u32,
    plan_decode: bool,
    prefill_start: Option<Instant>,
    first_token_at: Option<Instant>,
    scheduled_once: bool,
}

impl Seq {
    fn len(&self) -> u32 {
        self.req.prompt_len + self.generated
    }

    fn limit(&self) -> u32 {
        self.req
            .stop_at
            .map_or(self.req.max_new, |s| s.min(self.req.max_new))
    }
}

/// Engine state: all of it, owned by one task.
pub(crate) struct Scheduler {
    cfg: Arc<Scenario>,
    kv: KvCache,
    /// A reset happened and no request was admitted since.
    after_reset: bool,
    block_tokens: u32,
    lookahead: u32,
    cond_probs: Vec<f64>,
    /// Error-diffusion accumulators (deterministic acceptance).
    diffusion: Option<Vec<f64>>,
    rng: SmallRng,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    spare: Vec<Seq>,
    plan_prefill_tokens: u64,
    plan_decode_batch: usize,
    interval: Interval,
    /// When the engine started: the origin of `step_time.drift_per_s`.
    started: Instant,
    pub(crate) stats: EngineStats,
}

fn blocks_for(tokens: u32, block_tokens: u32) -> usize {
    tokens.max(1).div_ceil(block_tokens) as usize
}

impl Scheduler {
    pub(crate) fn new(cfg: Arc<Scenario>) -> Self {
        let cond_probs = cfg
            .spec
            .as_ref()
            .map(|s| s.conditional_probs())
            .unwrap_or_default();
        let kv = KvCache::new(cfg.kv.num_blocks, cfg.kv.prefix_caching)
            .with_cached_cap(cfg.kv.prefix_cache_blocks);
        let stats = EngineStats::new(cond_probs.len(), kv.total());
        Scheduler {
            block_tokens: cfg.kv.logical_block_tokens(),
            lookahead: cond_probs.len() as u32 + 1,
            rng: SmallRng::seed_from_u64(cfg.seed),
            diffusion: cfg
                .spec
                .as_ref()
                .filter(|s| s.deterministic)
                .map(|s| vec![0.0; s.accept_probs.len()]),
            cond_probs,
            kv,
            after_reset: false,
            waiting: VecDeque::new(),
            running: Vec::new(),
            spare: Vec::new(),
            plan_prefill_tokens: 0,
            plan_decode_batch: 0,
            interval: Interval::default(),
            started: Instant::now(),
            stats,
            cfg,
        }
    }

    /// Whether there is nothing to do.
    /// Forget every cached prefix (refused, false, while blocks are in use);
    /// the next admission's cached tokens are logged as the truth of a reset.
    pub(crate) fn reset_prefix_cache(&mut self) -> bool {
        let done = self.kv.reset_prefix_cache();
        if done {
            self.stats.prefix_cache_resets += 1;
            self.after_reset = true;
        }
        done
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    pub(crate) fn submit(&mut self, req: NewRequest) {
        self.stats.submitted += 1;
        self.waiting.push_back(Seq {
            req,
            generated: 0,
            pending: 0,
            cached: 0,
            blocks: Vec::new(),
            prefill_left: 0,
            prefill_total: 0,
            first_done: false,
            plan_prefill: 0,
            plan_decode: false,
            prefill_start: None,
            first_token_at: None,
            scheduled_once: false,
        });
        self.refresh_gauges();
    }

    /// Drop a request (client gone); frees its KV at once. Returns whether it was known.
    pub(crate) fn cancel(&mut self, id: u64, notify: bool) -> bool {
        let seq = if let Some(i) = self.running.iter().position(|s| s.req.id == id) {
            self.running.remove(i)
        } else if let Some(i) = self.waiting.iter().position(|s| s.req.id == id) {
            match self.waiting.remove(i) {
                Some(s) => s,
                None => return false,
            }
        } else {
            return false;
        };
        if notify {
            let _ = seq.req.tx.send(Chunk {
                n: seq.pending,
                total: seq.generated,
                cached: seq.cached,
                finish: Some(FinishReason::Abort),
            });
        }
        self.retire(seq, FinishReason::Abort, Instant::now());
        self.refresh_gauges();
        true
    }

    /// SGLang `/abort_request`: find the request by rid.
    pub(crate) fn abort_rid(&mut self, rid: &str) -> bool {
        let found = self
            .running
            .iter()
            .chain(self.waiting.iter())
            .find(|s| s.req.rid.as_deref() == Some(rid))
            .map(|s| s.req.id);
        found.is_some_and(|id| self.cancel(id, true))
    }

    /// Caches the full blocks of a finished request's reply (issue 35: the
    /// engines keep the generated tokens for the conversation's next turn).
    fn cache_reply(&mut self, seq: &Seq) {
        let Some(prompt) = &seq.req.reply_prompt else {
            return;
        };
        let tokens =
            crate::tokenizer::finished_sequence(&self.cfg.tokenizer, prompt, seq.generated);
        let hashes = crate::tokenizer::block_hashes(&tokens, self.block_tokens);
        let first = seq.req.block_hashes.len();
        for (i, &h) in hashes.iter().enumerate().skip(first) {
            if let Some(&b) = seq.blocks.get(i) {
                self.kv.register(b, h);
            }
        }
    }

    fn retire(&mut self, mut seq: Seq, reason: FinishReason, now: Instant) {
        if reason != FinishReason::Abort && seq.first_done {
            self.cache_reply(&seq);
        }
        for b in seq.blocks.drain(..) {
            self.kv.release(b);
        }
        match reason {
            FinishReason::Abort => self.stats.aborted += 1,
            _ => self.stats.completed += 1,
        }
        self.stats.finished_generated_tokens += u64::from(seq.generated);
        *self
            .stats
            .finished_by_reason
            .entry(reason.as_str().to_string())
            .or_insert(0) += 1;
        if reason != FinishReason::Abort {
            self.stats
                .e2e
                .observe((now - seq.req.arrival).as_secs_f64());
            // vLLM's phases of a finished request: first token → last
            // (decode), first scheduled → last (inference).
            if let Some(first) = seq.first_token_at {
                self.stats.decode_time.observe((now - first).as_secs_f64());
            }
            if let Some(start) = seq.prefill_start {
                self.stats
                    .inference_time
                    .observe((now - start).as_secs_f64());
            }
        }
    }

    fn refresh_gauges(&mut self) {
        self.stats.running = self.running.len();
        self.stats.waiting = self.waiting.len();
        self.stats.kv_blocks_used = self.kv.used();
        self.stats.kv_tokens_used = self.running.iter().map(|s| u64::from(s.len())).sum();
    }

    /// Decide the next step. Returns its duration in seconds, or `None` when idle.
    pub(crate) fn plan(&mut self, now: Instant) -> Option<f64> {
        self.admit(now);
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.prefill_left == 0 && s.first_done {
                let need = blocks_for(s.len() + self.lookahead, self.block_tokens);
                let mut missing = need.saturating_sub(s.blocks.len());
                while missing > self.kv.free() {
                    let last = self.running.len() - 1;
                    self.preempt_last();
                    if last == i {
                        break;
                    }
                }
                if i >= self.running.len() {
                    break;
                }
                while missing > 0 {
                    match self.kv.allocate() {
                        Some(b) => self.running[i].blocks.push(b),
                        None => break,
                    }
                    missing -= 1;
                }
            }
            i += 1;
        }
        let mut budget = self.cfg.scheduler.prefill_budget(self.decode_tokens());
        let mut prefill = 0u64;
        let mut batch = 0usize;
        let mut kv_tokens = 0u64;
        for s in &mut self.running {
            s.plan_prefill = 0;
            s.plan_decode = false;
            if s.prefill_left > 0 {
                let take = s.prefill_left.min(budget);
                if take > 0 && s.prefill_start.is_none() {
                    s.prefill_start = Some(now);
                }
                s.plan_prefill = take;
                budget -= take;
                prefill += u64::from(take);
            } else if s.first_done {
                s.plan_decode = true;
                batch += 1;
                kv_tokens += u64::from(s.len());
            }
        }
        self.refresh_gauges();
        if batch == 0 && prefill == 0 {
            return None;
        }
        self.plan_prefill_tokens = prefill;
        self.plan_decode_batch = batch;
        let since_start = now.saturating_duration_since(self.started).as_secs_f64();
        let decode_s = self
            .cfg
            .step_time
            .decode_seconds_at(batch, kv_tokens, since_start);
        let prefill_s = prefill as f64 / self.cfg.scheduler.prefill_tok_s;
        if prefill > 0 {
            self.stats.prefill_seconds += prefill_s;
        }
        self.stats.decode_seconds += decode_s;
        Some(decode_s + prefill_s)
    }

    /// Tokens the next step decodes (one per decoding sequence, `k + 1`
    /// with speculative decoding): what they take from a shared budget.
    fn decode_tokens(&self) -> u32 {
        let decoding = self
            .running
            .iter()
            .filter(|s| s.prefill_left == 0 && s.first_done)
            .count() as u32;
        decoding.saturating_mul(self.lookahead)
    }

    /// Finish the planned step at `end`: emit tokens, retire finished requests.
    pub(crate) fn apply(&mut self, end: Instant, step_s: f64) {
        self.stats.engine_steps += 1;
        if self.plan_decode_batch > 0 {
            self.stats.decode_steps += 1;
            self.stats.decode_seq_steps += self.plan_decode_batch as u64;
        }
        let mut step_tokens = self.plan_prefill_tokens;
        let mut running = std::mem::take(&mut self.running);
        let mut keep = std::mem::take(&mut self.spare);
        for mut s in running.drain(..) {
            let mut n = 0;
            if s.plan_prefill > 0 {
                s.prefill_left -= s.plan_prefill;
                if s.prefill_left == 0 {
                    self.prefill_done(&mut s, end);
                    n = 1;
                }
            } else if s.plan_decode {
                n = if self.cond_probs.is_empty() {
                    1
                } else {
                    1 + self.sample_accepted()
                };
                step_tokens += u64::from(n);
                self.interval.tokens += u64::from(n);
            }
            s.plan_prefill = 0;
            s.plan_decode = false;
            if n == 0 {
                keep.push(s);
                continue;
            }
            match self.emit(&mut s, n) {
                Ok(None) => keep.push(s),
                Ok(Some(reason)) => self.retire(s, reason, end),
                Err(()) => self.retire(s, FinishReason::Abort, end),
            }
        }
        self.spare = running;
        self.running = keep;
        self.stats.max_step_tokens = self.stats.max_step_tokens.max(step_tokens);
        self.log_interval(step_s);
        self.refresh_gauges();
    }

    fn prefill_done(&mut self, s: &mut Seq, end: Instant) {
        for (i, &h) in s.req.block_hashes.iter().enumerate() {
            if let Some(&b) = s.blocks.get(i) {
                self.kv.register(b, h);
            }
        }
        if s.first_done {
            return;
        }
        s.first_token_at = Some(end);
        let p = u64::from(s.req.prompt_len);
        self.stats.prompt_tokens += p;
        self.stats.prompt_tokens_cached += u64::from(s.cached);
        self.stats.prompt_tokens_computed += p - u64::from(s.cached);
        self.stats
            .prefill_kv_computed
            .observe(f64::from(s.prefill_total));
        if let Some(start) = s.prefill_start {
            self.stats.prefill_time.observe((end - start).as_secs_f64());
        }
        self.stats.ttft.observe((end - s.req.arrival).as_secs_f64());
    }

    /// Add `n` tokens; send a chunk when due. `Err` when the receiver is gone.
    fn emit(&mut self, s: &mut Seq, n: u32) -> Result<Option<FinishReason>, ()> {
        let limit = s.limit();
        let n = n.min(limit.saturating_sub(s.generated)).max(1);
        s.generated += n;
        s.pending += n;
        self.stats.generated_tokens += u64::from(n);
        let finish = if s.generated >= limit {
            let natural = s.req.stop_at.is_some_and(|stop| s.generated >= stop);
            Some(if natural {
                FinishReason::Stop
            } else {
                FinishReason::Length
            })
        } else {
            None
        };
        let first = !s.first_done;
        s.first_done = true;
        if first || finish.is_some() || s.pending >= self.cfg.scheduler.stream_interval {
            let chunk = Chunk {
                n: s.pending,
                total: s.generated,
                cached: s.cached,
                finish,
            };
            s.pending = 0;
            s.req.tx.send(chunk).map_err(|_| ())?;
        }
        Ok(finish)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Scheduler;
    use crate::scenario::Scenario;

    fn glm(deterministic: bool) -> Scheduler {
        let mut sc = Scenario::builtin("glm-5.3-flash-4gpu").unwrap_or_else(|e| panic!("{e}"));
        if let Some(spec) = sc.spec.as_mut() {
            spec.deterministic = deterministic;
        }
        Scheduler::new(Arc::new(sc))
    }

    /// The unconditional per-position rates come out as configured (the seed's values).
    #[test]
    fn per_position_acceptance_matches_unconditional_probs() {
        let want = [0.7699, 0.5011, 0.2825, 0.18, 0.1071, 0.0638, 0.0387];
        for (deterministic, tol) in [(true, 1e-3), (false, 0.01)] {
            let mut s = glm(deterministic);
            let n = 200_000;
            let tokens: u64 = (0..n).map(|_| 1 + u64::from(s.sample_accepted())).sum();
            for (i, w) in want.iter().enumerate() {
                let got = s.stats.spec_accepted_per_pos[i] as f64 / n as f64;
                assert!(
                    (got - w).abs() < tol,
                    "pos {i}: {got} vs {w} (deterministic {deterministic})"
                );
            }
            let mean = tokens as f64 / n as f64;
            assert!((mean - 2.9431).abs() < 3.0 * tol, "mean {mean}");
            assert_eq!(s.stats.spec_drafts, n);
            assert_eq!(s.stats.spec_draft_tokens, 7 * n);
        }
    }
}
