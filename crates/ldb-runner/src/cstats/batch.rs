//! One batch: run indices `first .. first + count` handed out from a queue
//! to `concurrency` workers, each a closed loop of one request at a time.
//! A dataset task may run out of items first; a stop cancels the streams
//! in flight (they are recorded as cancelled) and hands out nothing more.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::Http;
use ldb_client::stream::{
    CellCounters, ChannelTexts, FIRST_TOKEN_LIMIT, RunClock, SharedWindow, StreamEnv, run_stream,
};
use ldb_core::cstats::{CsRun, Phase};
use tokio_util::sync::CancellationToken;

use super::config::CsConfig;
use super::request::{Slot, body, record};

/// What the batch needs from the run.
pub(crate) struct BatchEnv {
    pub http: Http,
    pub clock: RunClock,
    pub cfg: Arc<CsConfig>,
    pub model: String,
    pub stop: CancellationToken,
    /// Called with each finished run.
    pub on_run: Arc<dyn Fn(&CsRun) + Send + Sync>,
}

/// How a batch ended.
pub(crate) struct BatchResult {
    /// The finished runs, in the order they finished.
    pub runs: Vec<CsRun>,
    /// Indices consumed (the next batch starts after them).
    pub next_index: usize,
    /// The task had no item for some index.
    pub exhausted: bool,
}

/// Run one batch. `max_tokens` overrides the configured limit (the scout).
pub(crate) async fn run_batch(
    env: &BatchEnv,
    phase: Phase,
    concurrency: usize,
    first: usize,
    count: usize,
    max_tokens: Option<u64>,
) -> BatchResult {
    let queue = Arc::new(AtomicUsize::new(first));
    let end = first + count;
    let exhausted = Arc::new(AtomicBool::new(false));
    let runs: Arc<Mutex<Vec<CsRun>>> = Arc::default();
    let counters = Arc::new(CellCounters::default());
    let window = Arc::new(SharedWindow::default());
    let idle = env.cfg.base.stream_idle_timeout;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.clamp(1, count.max(1)) {
        let (queue, exhausted, runs) = (queue.clone(), exhausted.clone(), runs.clone());
        let cfg = env.cfg.clone();
        let on_run = env.on_run.clone();
        let model = env.model.clone();
        let stop = env.stop.clone();
        let stream_env = StreamEnv {
            http: env.http.clone(),
            clock: env.clock,
            window: window.clone(),
            counters: counters.clone(),
            cancel: stop.clone(),
            text_sink: None,
            texts: None,
            path: "/v1/chat/completions",
            idle_timeout: (idle > 0.0).then(|| Duration::from_secs_f64(idle)),
            first_token_timeout: Some(FIRST_TOKEN_LIMIT),
        };
        workers.spawn(async move {
            loop {
                if stop.is_cancelled() {
                    break;
                }
                let i = queue.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                let Some(item) = cfg.task.item_for_run(i) else {
                    exhausted.store(true, Ordering::Relaxed);
                    break;
                };
                let texts: Arc<Mutex<ChannelTexts>> = Arc::default();
                let mut senv = stream_env.clone();
                senv.texts = Some(texts.clone());
                let b = body(
                    &model,
                    &cfg.task,
                    item,
                    max_tokens.or(cfg.max_tokens),
                    cfg.temperature,
                    cfg.top_p,
                );
                let out = run_stream(&senv, b).await;
                let slot = Slot {
                    run_index: i,
                    phase,
                    concurrency,
                };
                let ended = senv.clock.now();
                let run = record(slot, item, &cfg.task, &out, &texts, ended, cfg.save_text);
                on_run(&run);
                runs.lock().unwrap_or_else(|p| p.into_inner()).push(run);
            }
        });
    }
    while workers.join_next().await.is_some() {}
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|p| p.into_inner()));
    BatchResult {
        next_index: queue.load(Ordering::Relaxed).min(end),
        exhausted: exhausted.load(Ordering::Relaxed),
        runs,
    }
}
