//! Whole-process client speed bench: what the measuring client costs.
//!
//! Runs C saturated streams against an already running server (meant for the
//! simulator's `firehose-paced` scenario in another process, see
//! `bench/client-speed.sh`) with the same code path as a decode cell
//! (`ldb_client::stream::run_stream`, a worker per slot that replaces a
//! finished request at once, the runner's chat body with continuous usage),
//! and over a fixed window reports:
//!
//! - client CPU time per received token (sum of this process's threads'
//!   on-CPU time from `/proc/self/task/*/schedstat`; the coarser
//!   `/proc/self/stat` utime+stime is printed as a cross-check),
//! - the measured window tokens against the server's own generation counter
//!   (`vllm:generation_tokens_total`, scraped at both window edges; the
//!   client window is opened and closed at the middle of each scrape),
//! - added TTFT: the mean client TTFT of requests whose first token arrived in
//!   the window minus the server's mean TTFT over the same window
//!   (`vllm:time_to_first_token_seconds` sum/count),
//! - resident memory before the streams, at window end, and its growth per
//!   open stream.
//!
//! ```text
//! cargo run --release -p ldb-runner --example client_speed -- \
//!     --url http://127.0.0.1:8123 --concurrency 1024 --window 10
//! ```
//!
//! Prints one human-readable line and one JSON line (prefixed `JSON `).
//!
//! Streams go through the lean HTTP/1.1 reader (`ldb_client::lean`) for an
//! `http://` URL unless `LDB_STREAM_READER=reqwest` is set.
//!
//! `--raw` measures a floor instead: the same streams over bare tokio TCP
//! connections (hand-written HTTP/1.1 request, keep-alive, reads counted
//! with the SSE splitter only: no hyper/reqwest, no JSON parsing, no
//! accounting), so the report can say how much of the cost is the kernel and
//! the runtime rather than the client.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ldb_client::Http;
use ldb_client::stream::{CellCounters, RunClock, SharedWindow, StreamEnv};
use ldb_core::prometheus::MetricSet;
use ldb_runner::prompts::{BodyOptions, stream_body};
use serde_json::json;
use tokio_util::sync::CancellationToken;

type Res<T> = Result<T, Box<dyn Error>>;

#[derive(Debug)]
struct Args {
    url: String,
    model: String,
    concurrency: u32,
    warmup: f64,
    window: f64,
    max_tokens: u64,
    raw: bool,
}

fn parse_args() -> Res<Args> {
    let mut a = Args {
        url: "http://127.0.0.1:8123".into(),
        model: "sim-firehose".into(),
        concurrency: 64,
        warmup: 3.0,
        window: 10.0,
        max_tokens: 1000,
        raw: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--raw" {
            a.raw = true;
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--url" => a.url = v,
            "--model" => a.model = v,
            "--concurrency" => a.concurrency = v.parse()?,
            "--warmup" => a.warmup = v.parse()?,
            "--window" => a.window = v.parse()?,
            "--max-tokens" => a.max_tokens = v.parse()?,
            _ => return Err(format!("unknown flag {k}").into()),
        }
    }
    if a.concurrency == 0 || a.window <= 0.0 {
        return Err("--concurrency and --window must be positive".into());
    }
    Ok(a)
}

/// On-CPU nanoseconds of all live threads of this process.
fn cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// utime + stime of the whole process in clock ticks (USER_HZ, 100 on Linux).
fn cpu_ticks() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command name `(…)`: state is field 3, utime 14, stime 15.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum()
}

/// A `/proc/self/status` field in kB (VmRSS, VmHWM).
fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(str::to_owned))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The server's counters that serve as truth.
#[derive(Debug, Clone, Copy)]
struct Truth {
    generated: f64,
    ttft_sum: f64,
    ttft_count: f64,
    running: f64,
}

async fn scrape(http: &Http) -> Res<Truth> {
    let (status, text) = http.get_text("/metrics", Duration::from_secs(10)).await?;
    if status != 200 {
        return Err(format!("/metrics answered {status}").into());
    }
    let m = MetricSet::parse(&text);
    let get = |n: &str| {
        m.sum(n, &[])
            .ok_or_else(|| format!("/metrics has no {n} (is this the vLLM personality?)"))
    };
    Ok(Truth {
        generated: get("vllm:generation_tokens_total")?,
        ttft_sum: get("vllm:time_to_first_token_seconds_sum")?,
        ttft_count: get("vllm:time_to_first_token_seconds_count")?,
        running: get("vllm:num_requests_running")?,
    })
}

/// Scrape, returning the truth, the middle of the scrape on the run clock and
/// how long the scrape took (the uncertainty of the window edge).
async fn scrape_at(http: &Http, clock: RunClock) -> Res<(Truth, f64, f64)> {
    let a = clock.now();
    let t = scrape(http).await?;
    let b = clock.now();
    Ok((t, (a + b) / 2.0, b - a))
}

/// Event-loop delay: every 10 ms, how long a task that yields waits until it
/// runs again, i.e. how long a newly ready socket waits behind the tasks that
/// are already queued. Returns (p50, p99, max) in ms once `stop` is cancelled.
async fn loop_lag(stop: CancellationToken) -> (f64, f64, f64) {
    let mut v = Vec::new();
    while !stop.is_cancelled() {
        let t = std::time::Instant::now();
        tokio::task::yield_now().await;
        v.push(t.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        v.get(((v.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (q(0.5), q(0.99), q(1.0))
}

async fn run(a: Args) -> Res<()> {
    let c = a.concurrency;
    let http = Http::new(&a.url, None, c as usize + 20)?;
    let clock = RunClock::new();
    // Wait for an idle server (a previous run's streams may still be closing).
    let mut idle = scrape(&http).await?;
    for _ in 0..100 {
        if idle.running == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle = scrape(&http).await?;
    }
    let msgs = ldb_core::prompt::messages(&ldb_core::prompt::nonce("speed", "0"), 0);
    let body = stream_body(
        &a.model,
        &msgs,
        BodyOptions {
            api: ldb_core::api::Api::Chat,
            max_tokens: a.max_tokens,
            continuous_usage: true,
            ignore_eos: true,
            temperature: None,
            tools: None,
        },
    );
    if a.raw {
        return run_raw(&a, &http, clock, &body).await;
    }
    let rss_base = status_kb("VmRSS");
    let window = Arc::new(SharedWindow::default());
    let counters = Arc::new(CellCounters::default());
    let cancel = CancellationToken::new();
    let env = StreamEnv {
        window: window.clone(),
        counters: counters.clone(),
        cancel: cancel.clone(),
        ..StreamEnv::new(http.clone(), clock)
    };
    // As the runner's cell worker: replace a finished request at once.
    let (workers, mut rx) = ldb_runner::selftest::spawn_workers(c, &env, &body);
    // Ramp-up: every stream producing, then the warmup.
    let ramp_deadline = clock.now() + 60.0;
    while counters.producing.load(Ordering::Relaxed) < i64::from(c) {
        if clock.now() > ramp_deadline {
            return Err("streams did not all start producing within 60 s".into());
        }
        if counters.failed.load(Ordering::Relaxed) > 0 {
            return Err("a stream failed during ramp-up".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs_f64(a.warmup)).await;
    let mut outcomes = Vec::new();
    while let Ok(o) = rx.try_recv() {
        outcomes.push(o);
    }
    outcomes.clear();

    // The window.
    let (t0, open, scrape0) = scrape_at(&http, clock).await?;
    window.open(open);
    let lag_stop = CancellationToken::new();
    let lag = tokio::spawn(loop_lag(lag_stop.clone()));
    let cpu0 = (
        cpu_ns(),
        cpu_ticks(),
        counters.tokens.load(Ordering::Relaxed),
    );
    let rss_open = status_kb("VmRSS");
    let mut rss_max = rss_open;
    let end = open + a.window;
    while clock.now() < end {
        tokio::time::sleep(
            Duration::from_millis(250).min(Duration::from_secs_f64((end - clock.now()).max(0.0))),
        )
        .await;
        while let Ok(o) = rx.try_recv() {
            outcomes.push(o);
        }
        rss_max = rss_max.max(status_kb("VmRSS"));
    }
    let cpu1 = (
        cpu_ns(),
        cpu_ticks(),
        counters.tokens.load(Ordering::Relaxed),
    );
    let rss_close = status_kb("VmRSS");
    lag_stop.cancel();
    let (lag50, lag99, lag_max) = lag.await?;
    let (t1, close, scrape1) = scrape_at(&http, clock).await?;
    window.close(close);
    cancel.cancel();
    for w in workers {
        let _ = w.await;
    }
    while let Some(o) = rx.recv().await {
        outcomes.push(o);
    }

    let bounds = window.get();
    let measured: u64 = outcomes.iter().map(|o| o.track.window_tokens).sum();
    let failed = outcomes
        .iter()
        .filter(|o| o.track.error().is_some())
        .count();
    let truth = t1.generated - t0.generated;
    let secs = close - open;
    let err_pct = (measured as f64 - truth) / truth * 100.0;
    let tokens_cpu = (cpu1.2 - cpu0.2) as f64;
    let us_per_tok = (cpu1.0 - cpu0.0) as f64 / 1e3 / tokens_cpu;
    let us_per_tok_ticks = (cpu1.1 - cpu0.1) as f64 * 1e4 / tokens_cpu;
    let cpu_util = (cpu1.0 - cpu0.0) as f64 / 1e9 / secs;
    // TTFT of requests whose first token arrived in the window.
    let ttfts: Vec<f64> = outcomes
        .iter()
        .map(|o| o.track.to_sample(0.0, bounds))
        .filter(|s| s.first_token_s.is_some_and(|f| bounds.contains(f)))
        .map(|s| s.ttft)
        .collect();
    let client_ttft = ttfts.iter().sum::<f64>() / ttfts.len().max(1) as f64;
    let server_n = t1.ttft_count - t0.ttft_count;
    let server_ttft = if server_n > 0.0 {
        (t1.ttft_sum - t0.ttft_sum) / server_n
    } else {
        0.0
    };
    let added_ms = (client_ttft - server_ttft) * 1e3;
    let rss_per_stream = (rss_close as f64 - rss_base as f64) / f64::from(c);
    println!(
        "C={c:<5} window {secs:.2}s  measured {measured} tok ({:.0} tok/s)  truth {truth:.0} ({:.0} tok/s)  \
         error {err_pct:+.3}%  CPU {us_per_tok:.3} us/tok (ticks: {us_per_tok_ticks:.2})  \
         {:.0}% of a core  TTFT client {:.2} ms server {:.2} ms added {added_ms:.2} ms (n={}/{server_n:.0})  \
         RSS base {rss_base} kB window {rss_open}->{rss_close} kB (max {rss_max})  \
         {rss_per_stream:.1} kB/stream  failed {failed}  \
         loop delay p50 {lag50:.2} p99 {lag99:.2} max {lag_max:.2} ms  scrapes {:.1}/{:.1} ms",
        measured as f64 / secs,
        truth / secs,
        cpu_util * 100.0,
        client_ttft * 1e3,
        server_ttft * 1e3,
        ttfts.len(),
        scrape0 * 1e3,
        scrape1 * 1e3,
    );
    let reader = if http.uses_lean_reader() {
        "lean"
    } else {
        "reqwest"
    };
    println!("reader: {reader} (LDB_STREAM_READER=reqwest for the general client)");
    let report = json!({
        "mode": "client",
        "reader": reader,
        "concurrency": c,
        "window_s": secs,
        "measured_tokens": measured,
        "truth_tokens": truth,
        "measured_tok_s": measured as f64 / secs,
        "truth_tok_s": truth / secs,
        "error_pct": err_pct,
        "cpu_us_per_token": us_per_tok,
        "cpu_us_per_token_ticks": us_per_tok_ticks,
        "cpu_core_fraction": cpu_util,
        "client_ttft_ms": client_ttft * 1e3,
        "server_ttft_ms": server_ttft * 1e3,
        "added_ttft_ms": added_ms,
        "ttft_samples": ttfts.len(),
        "rss_base_kb": rss_base,
        "rss_window_open_kb": rss_open,
        "rss_window_close_kb": rss_close,
        "rss_window_max_kb": rss_max,
        "rss_hwm_kb": status_kb("VmHWM"),
        "rss_per_stream_kb": rss_per_stream,
        "failed_requests": failed,
        "loop_delay_ms": {"p50": lag50, "p99": lag99, "max": lag_max},
        "scrape_ms": [scrape0 * 1e3, scrape1 * 1e3],
    });
    println!("JSON {report}");
    Ok(())
}

/// One slot of the `--raw` floor: keep-alive HTTP/1.1 over a bare socket,
/// one request after another, counting `data:` payloads.
async fn raw_slot(
    addr: std::net::SocketAddr,
    req: Arc<Vec<u8>>,
    chunks: Arc<std::sync::atomic::AtomicU64>,
    cancel: CancellationToken,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    while !cancel.is_cancelled() {
        let Ok(mut sock) = tokio::net::TcpStream::connect(addr).await else {
            return;
        };
        let _ = sock.set_nodelay(true);
        'conn: loop {
            if sock.write_all(&req).await.is_err() {
                break;
            }
            let mut dec = ldb_core::sse::SseDecoder::new();
            let mut done = false;
            loop {
                // The floor does nothing it does not need: no cancellation
                // future in the read (the window's end aborts these tasks;
                // a flag checked per read ends them once the server goes on).
                let n = match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break 'conn,
                    Ok(n) => n,
                };
                if cancel.is_cancelled() {
                    return;
                }
                let mut count = 0;
                dec.feed(&buf[..n], |p| {
                    if p == b"[DONE]" {
                        done = true;
                    } else {
                        count += 1;
                    }
                });
                chunks.fetch_add(count, Ordering::Relaxed);
                // The chunked body's terminator ends the response.
                if done && buf[..n].ends_with(b"0\r\n\r\n") {
                    break;
                }
            }
        }
    }
}

/// The `--raw` floor: CPU per received chunk over bare sockets.
async fn run_raw(a: &Args, http: &Http, clock: RunClock, body: &[u8]) -> Res<()> {
    let host = a.url.trim_start_matches("http://").trim_end_matches('/');
    let addr: std::net::SocketAddr = host
        .parse()
        .map_err(|_| format!("--raw needs http://IP:PORT, not {}", a.url))?;
    let mut req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let req = Arc::new(req);
    let chunks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cancel = CancellationToken::new();
    let rss_base = status_kb("VmRSS");
    let slots: Vec<_> = (0..a.concurrency)
        .map(|_| tokio::spawn(raw_slot(addr, req.clone(), chunks.clone(), cancel.clone())))
        .collect();
    let c = a.concurrency;
    // Ramp-up: the server runs all of them.
    let ramp_deadline = clock.now() + 60.0;
    while scrape(http).await?.running < f64::from(c) {
        if clock.now() > ramp_deadline {
            return Err("the server did not run every stream within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs_f64(a.warmup)).await;
    let (t0, open, _) = scrape_at(http, clock).await?;
    let cpu0 = (cpu_ns(), chunks.load(Ordering::Relaxed));
    tokio::time::sleep(Duration::from_secs_f64(a.window)).await;
    let cpu1 = (cpu_ns(), chunks.load(Ordering::Relaxed));
    let rss_close = status_kb("VmRSS");
    let (t1, close, _) = scrape_at(http, clock).await?;
    cancel.cancel();
    for s in slots {
        s.abort();
        let _ = s.await;
    }
    let secs = close - open;
    let n = (cpu1.1 - cpu0.1) as f64;
    let us = (cpu1.0 - cpu0.0) as f64 / 1e3 / n;
    let truth = t1.generated - t0.generated;
    let per_stream = (rss_close as f64 - rss_base as f64) / f64::from(c);
    println!(
        "RAW C={c:<5} window {secs:.2}s  chunks {n:.0} ({:.0}/s)  truth {truth:.0} tok ({:.0} tok/s)  \
         CPU {us:.3} us/chunk  {:.0}% of a core  RSS {rss_base}->{rss_close} kB  {per_stream:.1} kB/stream",
        n / secs,
        truth / secs,
        (cpu1.0 - cpu0.0) as f64 / 1e9 / secs * 100.0,
    );
    let report = json!({
        "mode": "raw",
        "concurrency": c,
        "window_s": secs,
        "chunks": n,
        "truth_tokens": truth,
        "cpu_us_per_chunk": us,
        "cpu_core_fraction": (cpu1.0 - cpu0.0) as f64 / 1e9 / secs,
        "rss_per_stream_kb": per_stream,
    });
    println!("JSON {report}");
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The binary's runtime: multi-threaded, one worker per available core
    // (so one when pinned with taskset).
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
