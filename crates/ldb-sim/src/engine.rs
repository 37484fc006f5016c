//! The engine task: one per server, owns all scheduling state, paced by absolute deadlines.
//!
//! Requests arrive over an unbounded mpsc channel. Each step's end is scheduled at
//! `previous_end + step_time` (not "now + step_time"), so timer overshoot does not
//! accumulate and long-run throughput matches the formula. A step of zero length yields to
//! the runtime instead of sleeping, so a zero-delay scenario never spins.

mod kv;
mod sched;
pub mod stats;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::scenario::Scenario;
use sched::Scheduler;
use stats::EngineStats;

/// Why a request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinishReason {
    /// Natural end (EOS) reached.
    Stop,
    /// `max_tokens` or the context length reached.
    Length,
    /// Aborted by the client or `/abort_request`.
    Abort,
    /// A tool call ended (never sent by the engine: the frames write it
    /// for a call's natural end, `server/tool_call.rs`).
    ToolCalls,
}

impl FinishReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::ToolCalls => "tool_calls",
        }
    }
}

/// Tokens for one request, sent by the engine when a chunk is due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk {
    /// New tokens in this chunk (may be 0 on an abort).
    pub n: u32,
    /// Tokens generated so far, this chunk included.
    pub total: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached: u32,
    /// Set on the last chunk.
    pub finish: Option<FinishReason>,
}

/// A validated request handed to the engine.
#[derive(Debug)]
pub(crate) struct NewRequest {
    pub id: u64,
    pub rid: Option<String>,
    pub prompt_len: u32,
    pub block_hashes: Vec<u64>,
    /// The prompt's token ids when the reply is plain generated text that
    /// a next turn can repeat (a chat request without a script, reasoning
    /// or textless tokens): the reply's blocks are then cached too.
    pub reply_prompt: Option<Vec<u32>>,
    pub max_new: u32,
    pub stop_at: Option<u32>,
    pub arrival: Instant,
    pub tx: mpsc::UnboundedSender<Chunk>,
}

/// Messages to the engine task.
#[derive(Debug)]
pub(crate) enum Command {
    Submit(NewRequest),
    /// The client went away: free the request now.
    Cancel(u64),
    /// SGLang abort by rid; replies whether it was found.
    AbortRid(String, oneshot::Sender<bool>),
    /// Forget every cached prefix; replies false while blocks are in use.
    ResetPrefixCache(oneshot::Sender<bool>),
    /// Drop every request and stop.
    Shutdown,
}

/// Handle used by the HTTP side.
#[derive(Debug, Clone)]
pub(crate) struct EngineHandle {
    pub tx: mpsc::UnboundedSender<Command>,
    pub stats: Arc<Mutex<EngineStats>>,
}

impl EngineHandle {
    /// Start the engine task on the current runtime.
    pub(crate) fn spawn(cfg: Arc<Scenario>) -> (EngineHandle, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let sched = Scheduler::new(cfg);
        let stats = Arc::new(Mutex::new(sched.stats.clone()));
        let task = tokio::spawn(run(sched, rx, Arc::clone(&stats)));
        (EngineHandle { tx, stats }, task)
    }

    /// A copy of the current truth counters.
    pub(crate) fn snapshot(&self) -> EngineStats {
        lock(&self.stats).clone()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Returns false when the engine should stop.
fn handle(sched: &mut Scheduler, cmd: Command) -> bool {
    match cmd {
        Command::Submit(req) => sched.submit(req),
        Command::Cancel(id) => {
            sched.cancel(id, false);
        }
        Command::AbortRid(rid, reply) => {
            let _ = reply.send(sched.abort_rid(&rid));
        }
        Command::ResetPrefixCache(reply) => {
            let _ = reply.send(sched.reset_prefix_cache());
        }
        Command::Shutdown => return false,
    }
    true
}

fn publish(sched: &Scheduler, shared: &Mutex<EngineStats>) {
    lock(shared).clone_from(&sched.stats);
}

/// Deadlines further behind than this are reset rather than caught up (e.g. after a pause).
const MAX_LAG: Duration = Duration::from_millis(250);

async fn run(
    mut sched: Scheduler,
    mut rx: mpsc::UnboundedReceiver<Command>,
    shared: Arc<Mutex<EngineStats>>,
) {
    let mut deadline = Instant::now();
    loop {
        while let Ok(cmd) = rx.try_recv() {
            if !handle(&mut sched, cmd) {
                return;
            }
        }
        let now = Instant::now();
        if now > deadline + MAX_LAG || sched.is_idle() {
            deadline = now;
        }
        let Some(step_s) = sched.plan(deadline) else {
            publish(&sched, &shared);
            let Some(cmd) = rx.recv().await else { return };
            if !handle(&mut sched, cmd) {
                return;
            }
            deadline = Instant::now();
            continue;
        };
        let end = deadline + Duration::from_secs_f64(step_s);
        if step_s <= 0.0 {
            tokio::task::yield_now().await;
        } else {
            let sleep = tokio::time::sleep_until(end);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    biased;
                    () = &mut sleep => break,
                    cmd = rx.recv() => {
                        let Some(cmd) = cmd else { return };
                        if !handle(&mut sched, cmd) {
                            return;
                        }
                        publish(&sched, &shared);
                    }
                }
            }
        }
        sched.apply(end, step_s);
        deadline = end;
        publish(&sched, &shared);
    }
}
