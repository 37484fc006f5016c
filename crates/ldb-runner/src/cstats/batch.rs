//! One batch: run indices `first .. first + count` handed out from a queue
//! to `concurrency` workers, each a closed loop of one request at a time.
//! A dataset task may run out of items first; a stop cancels the streams
//! in flight (they are recorded as cancelled) and hands out nothing more.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldb_client::Http;
use ldb_client::stream::{
    CellCounters, ChannelTexts, FIRST_TOKEN_LIMIT, RunClock, SharedWindow, StreamEnv, run_stream,
};
use ldb_eval::cstats::{
    ActiveSet, ActiveStream, CsRun, LATEST_CHARS, Phase, StreamStatus, latest_line,
};
use ldb_eval::task::TaskItem;
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
    /// Called every [`ACTIVE_PERIOD`] with the requests in flight, and
    /// with an empty set when the batch ends.
    pub on_active: Arc<dyn Fn(ActiveSet) + Send + Sync>,
}

/// How often the requests in flight are reported to the live view.
const ACTIVE_PERIOD: Duration = Duration::from_millis(350);

/// A request in flight, as the live view samples it.
struct Inflight {
    item_id: Option<String>,
    sent_at: f64,
    texts: Arc<Mutex<ChannelTexts>>,
}

type Registry = Arc<Mutex<BTreeMap<usize, Inflight>>>;

/// What every request in `reg` has done by `now` (run clock).
fn sample_active(reg: &Registry, now: f64) -> ActiveSet {
    let reg = reg.lock().unwrap_or_else(|p| p.into_inner());
    let streams = reg
        .iter()
        .map(|(&run_index, f)| {
            let t = f.texts.lock().unwrap_or_else(|p| p.into_inner());
            let status = match (t.responded, t.chunks) {
                (false, _) => StreamStatus::Connecting,
                (true, 0) => StreamStatus::WaitingFirst,
                (true, 1) => StreamStatus::FirstToken,
                _ => StreamStatus::Streaming,
            };
            // the answer once it starts, the reasoning before it
            let text = if t.content.trim().is_empty() {
                &t.reasoning
            } else {
                &t.content
            };
            ActiveStream {
                run_index,
                item_id: f.item_id.clone(),
                status,
                elapsed: (now - f.sent_at).max(0.0),
                since_first: t.first_at.map_or(0.0, |a| (now - a).max(0.0)),
                chunks: t.chunks,
                chars: t.chars,
                latest: latest_line(text, LATEST_CHARS),
            }
        })
        .collect();
    ActiveSet::new(streams)
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
    let idle = env.cfg.base.timing.stream_idle_timeout;
    let registry: Registry = Arc::default();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.clamp(1, count.max(1)) {
        let stop = env.stop.clone();
        let stream_env = StreamEnv {
            window: window.clone(),
            counters: counters.clone(),
            cancel: stop.clone(),
            idle_timeout: (idle > 0.0).then(|| Duration::from_secs_f64(idle)),
            first_token_timeout: Some(FIRST_TOKEN_LIMIT),
            ..StreamEnv::new(env.http.clone(), env.clock)
        };
        let worker = Worker {
            queue: queue.clone(),
            end,
            exhausted: exhausted.clone(),
            runs: runs.clone(),
            registry: registry.clone(),
            cfg: env.cfg.clone(),
            on_run: env.on_run.clone(),
            model: env.model.clone(),
            stop,
            stream_env,
            slot: Slot {
                run_index: 0,
                phase,
                concurrency,
            },
            max_tokens,
        };
        workers.spawn(worker.work());
    }
    let ticker = spawn_active_ticker(registry, env.on_active.clone(), env.clock);
    while workers.join_next().await.is_some() {}
    ticker.abort();
    let _ = ticker.await;
    (env.on_active)(ActiveSet::default());
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|p| p.into_inner()));
    BatchResult {
        next_index: queue.load(Ordering::Relaxed).min(end),
        exhausted: exhausted.load(Ordering::Relaxed),
        runs,
    }
}

/// Reports the requests in flight every [`ACTIVE_PERIOD`] until aborted.
fn spawn_active_ticker(
    registry: Registry,
    on_active: Arc<dyn Fn(ActiveSet) + Send + Sync>,
    clock: RunClock,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ACTIVE_PERIOD).await;
            on_active(sample_active(&registry, clock.now()));
        }
    })
}

/// One closed-loop worker: what it shares with the others (the queue of
/// run indices, the finished runs, the in-flight registry) and what each
/// of its requests needs.
struct Worker {
    queue: Arc<AtomicUsize>,
    end: usize,
    exhausted: Arc<AtomicBool>,
    runs: Arc<Mutex<Vec<CsRun>>>,
    registry: Registry,
    cfg: Arc<CsConfig>,
    on_run: Arc<dyn Fn(&CsRun) + Send + Sync>,
    model: String,
    stop: CancellationToken,
    stream_env: StreamEnv,
    /// Phase and concurrency of every run (the index is set per request).
    slot: Slot,
    max_tokens: Option<u64>,
}

impl Worker {
    /// Take run indices until the batch's end, a stop, or the task runs
    /// out of items.
    async fn work(self) {
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            let i = self.queue.fetch_add(1, Ordering::Relaxed);
            if i >= self.end {
                break;
            }
            let Some(item) = self.cfg.task.item_for_run(i) else {
                self.exhausted.store(true, Ordering::Relaxed);
                break;
            };
            self.request(i, item).await;
        }
    }

    /// Send run `i`'s request for `item`, visible in the registry while in
    /// flight, and record its run.
    async fn request(&self, i: usize, item: &TaskItem) {
        let cfg = &self.cfg;
        let texts: Arc<Mutex<ChannelTexts>> = Arc::default();
        let mut senv = self.stream_env.clone();
        senv.texts = Some(texts.clone());
        let b = body(
            cfg.base.target.api,
            &self.model,
            &cfg.task,
            item,
            self.max_tokens.or(cfg.max_tokens),
            cfg.temperature,
            cfg.top_p,
        );
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                i,
                Inflight {
                    item_id: item.item_id.clone(),
                    sent_at: senv.clock.now(),
                    texts: texts.clone(),
                },
            );
        let out = run_stream(&senv, b).await;
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&i);
        let slot = Slot {
            run_index: i,
            ..self.slot
        };
        let ended = senv.clock.now();
        let run = record(slot, item, &cfg.task, &out, &texts, ended, cfg.save_text);
        (self.on_run)(&run);
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflight(sent_at: f64, t: ChannelTexts) -> Inflight {
        Inflight {
            item_id: Some("q1".into()),
            sent_at,
            texts: Arc::new(Mutex::new(t)),
        }
    }

    #[test]
    fn in_flight_requests_are_sampled_with_their_status_and_latest_line() {
        let reg: Registry = Arc::default();
        {
            let mut r = reg.lock().unwrap();
            r.insert(7, inflight(1.0, ChannelTexts::default()));
            let waiting = ChannelTexts {
                responded: true,
                ..ChannelTexts::default()
            };
            r.insert(3, inflight(2.0, waiting));
            let streaming = ChannelTexts {
                responded: true,
                reasoning: "thinking\nabout it".into(),
                content: "step one\nthe answer is 18\n".into(),
                chunks: 10,
                chars: 400,
                first_at: Some(2.0),
                ..ChannelTexts::default()
            };
            r.insert(5, inflight(1.5, streaming));
        }
        let a = sample_active(&reg, 4.0);
        assert_eq!(a.total, 3);
        let idx: Vec<usize> = a.rows.iter().map(|r| r.run_index).collect();
        assert_eq!(idx, [3, 5, 7], "oldest run index first");
        let s = &a.rows[1];
        assert_eq!(s.status, StreamStatus::Streaming);
        assert_eq!((s.elapsed, s.since_first, s.tokens()), (2.5, 2.0, 100));
        assert_eq!(s.rate(), 50.0);
        assert_eq!(s.latest, "the answer is 18", "content over reasoning");
        assert_eq!(a.rows[0].status, StreamStatus::WaitingFirst);
        assert_eq!(a.rows[2].status, StreamStatus::Connecting);
        assert_eq!(a.rows[2].item_id.as_deref(), Some("q1"));
    }
}
