//! `llm-decode-bench selftest`: this host's client ceiling (methodology
//! §9.3). At each level N streams run against a simulator whose generation
//! counter is the truth, with the same stream code as a decode cell; the
//! window's client count, CPU and event-loop lag are compared with it. The
//! caller starts the simulator (in this process, on a thread of its own whose
//! name starts with `sim_thread_prefix`, so its CPU is not billed to the
//! client), hands over a way to read its counter, and prints the table
//! (`ldb_core::selftest`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ldb_client::Http;
use ldb_client::stream::{
    CellCounters, RunClock, SharedWindow, StreamEnv, StreamOutcome, run_stream,
};
use ldb_core::client_load::parse_schedstat_cpu;
use ldb_core::headroom::Headroom;
use ldb_core::selftest::{LevelResult, ceiling};
use tokio_util::sync::CancellationToken;

use crate::loop_lag::LagProbe;
use crate::prompts::{BodyOptions, stream_body};

/// What to measure.
#[derive(Debug, Clone)]
pub struct SelftestOptions {
    /// Stream counts, rising.
    pub levels: Vec<u32>,
    /// Seconds between all streams producing and the window.
    pub warmup_s: f64,
    /// Window length, seconds.
    pub window_s: f64,
    /// `max_tokens` of each request (a finished request is replaced at once).
    pub max_tokens: u64,
    /// Served model name.
    pub model: String,
    /// Threads whose name starts with this are the simulator's, not the client's.
    pub sim_thread_prefix: String,
    /// Stop after the first level the client misses.
    pub stop_at_first_miss: bool,
}

/// The simulator's truth, read directly (not over HTTP: a scrape waits
/// behind the simulator's own work and blurs the window's edges): tokens
/// generated so far and sequences running now.
pub type Truth = std::sync::Arc<dyn Fn() -> (u64, usize) + Send + Sync>;

/// On-CPU nanoseconds of this process's threads, without the simulator's.
fn client_cpu_ns(sim_prefix: &str) -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for task in std::fs::read_dir(Path::new("/proc/self/task"))
        .ok()?
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !sim_prefix.is_empty() && comm.trim_end().starts_with(sim_prefix) {
            continue;
        }
        if let Some(ns) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| parse_schedstat_cpu(&s))
        {
            sum = sum.saturating_add(ns);
            any = true;
        }
    }
    any.then_some(sum)
}

/// Measure every level against the simulator at `url`; `each` sees each
/// level as it is done. Errors are one line.
pub async fn run(
    url: &str,
    truth: Truth,
    opts: &SelftestOptions,
    mut each: impl FnMut(&LevelResult),
) -> Result<Vec<LevelResult>, String> {
    let most = opts.levels.iter().copied().max().unwrap_or(1) as usize;
    let http = Http::new(url, None, most + 8).map_err(|e| e.to_string())?;
    let clock = RunClock::new();
    let body = stream_body(
        &opts.model,
        &ldb_core::prompt::messages(&ldb_core::prompt::nonce("selftest", "0"), 0),
        BodyOptions {
            api: ldb_core::api::Api::Chat,
            max_tokens: opts.max_tokens,
            continuous_usage: true,
            ignore_eos: true,
            temperature: None,
            tools: None,
        },
    );
    let mut out = Vec::new();
    for &n in &opts.levels {
        let level = measure_level(&http, &truth, clock, &body, n, opts).await?;
        each(&level);
        out.push(level);
        if opts.stop_at_first_miss && ceiling(&out).first_miss.is_some() {
            break;
        }
    }
    Ok(out)
}

/// `n` streams like a decode cell's workers: each replaces a finished
/// request at once, until `env.cancel` or a failure. Their outcomes arrive on
/// the receiver.
pub fn spawn_workers(
    n: u32,
    env: &StreamEnv,
    body: &bytes::Bytes,
) -> (
    Vec<tokio::task::JoinHandle<()>>,
    tokio::sync::mpsc::UnboundedReceiver<StreamOutcome>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let workers = (0..n)
        .map(|_| {
            let (env, body, tx) = (env.clone(), body.clone(), tx.clone());
            tokio::spawn(async move {
                while !env.cancel.is_cancelled() {
                    let out = run_stream(&env, body.clone()).await;
                    let failed = out.track.error().is_some();
                    if tx.send(out).is_err() || failed {
                        break;
                    }
                }
            })
        })
        .collect();
    (workers, rx)
}

async fn measure_level(
    http: &Http,
    truth: &Truth,
    clock: RunClock,
    body: &bytes::Bytes,
    n: u32,
    opts: &SelftestOptions,
) -> Result<LevelResult, String> {
    // The previous level's streams may still be closing on the server side.
    for _ in 0..100 {
        if truth().1 == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let cancel = CancellationToken::new();
    let env = StreamEnv {
        window: window.clone(),
        counters: counters.clone(),
        cancel: cancel.clone(),
        ..StreamEnv::new(http.clone(), clock)
    };
    let (workers, mut rx) = spawn_workers(n, &env, body);
    let stop = |why: String| {
        cancel.cancel();
        why
    };
    let deadline = clock.now() + 30.0;
    while counters.producing.load(Ordering::Relaxed) < i64::from(n) {
        if counters.failed.load(Ordering::Relaxed) > 0 {
            return Err(stop(format!("a stream failed while {n} streams started")));
        }
        if clock.now() > deadline {
            return Err(stop(format!("{n} streams did not all produce within 30 s")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs_f64(opts.warmup_s)).await;

    let (t0, open) = (truth().0, clock.now());
    window.open(open);
    let cpu0 = client_cpu_ns(&opts.sim_thread_prefix);
    let probe = LagProbe::start();
    tokio::time::sleep(Duration::from_secs_f64(opts.window_s)).await;
    let lag = probe.finish().await;
    let cpu1 = client_cpu_ns(&opts.sim_thread_prefix);
    let (t1, close) = (truth().0, clock.now());
    window.close(close);
    cancel.cancel();
    for w in workers {
        let _ = w.await;
    }
    let mut measured = 0u64;
    let mut failed = 0u64;
    while let Some(o) = rx.recv().await {
        measured += o.track.window_tokens;
        failed += u64::from(o.track.error().is_some() && !o.cancelled);
    }
    let window_s = close - open;
    let cpu_s = cpu0
        .zip(cpu1)
        .and_then(|(a, b)| b.checked_sub(a))
        .map(|ns| ns as f64 / 1e9);
    Ok(LevelResult {
        streams: n,
        window_s,
        truth_tokens: t1.saturating_sub(t0) as f64,
        measured_tokens: measured,
        client_cpu_s: cpu_s,
        loop_lag_p99_s: Headroom::measure(None, window_s, 1, &lag).loop_lag_p99_s,
        failed,
    })
}
