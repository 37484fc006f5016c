//! Simulator speed: streamed chunks per second on one core (the `firehose` scenario).
//!
//! The simulator runs on a single-threaded tokio runtime (one core); an in-process client on
//! its own runtime opens `STREAMS` streams over loopback and counts SSE frames for
//! `SECONDS`. Run with `cargo bench -p ldb-sim --bench firehose`.
//! Environment overrides: `FIREHOSE_STREAMS`, `FIREHOSE_SECONDS`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ldb_sim::{Scenario, SimServer};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let streams = env("FIREHOSE_STREAMS", 64);
    let seconds = env("FIREHOSE_SECONDS", 5);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let sc = Scenario::builtin("firehose").unwrap();
            let sim = SimServer::start(sc, None, "127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            addr_tx.send(sim.base_url()).unwrap();
            let _ = stop_rx.await;
            let stats = sim.stats();
            sim.shutdown().await;
            stats
        })
    });
    let base = addr_rx.recv().unwrap();
    let chunks = Arc::new(AtomicU64::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let elapsed = rt.block_on(async {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": "firehose"}],
            "max_tokens": 1_000_000, "ignore_eos": true, "stream": true,
        });
        let mut tasks = Vec::new();
        let start = Instant::now();
        let measure_from = start + Duration::from_secs(1);
        for _ in 0..streams {
            let (client, body, base, chunks) = (
                client.clone(),
                body.clone(),
                base.clone(),
                Arc::clone(&chunks),
            );
            tasks.push(tokio::spawn(async move {
                let resp = client
                    .post(format!("{base}/v1/chat/completions"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let mut s = resp.bytes_stream();
                while let Some(Ok(piece)) = s.next().await {
                    let n = piece.windows(2).filter(|w| *w == b"\n\n").count() as u64;
                    if Instant::now() >= measure_from {
                        chunks.fetch_add(n, Ordering::Relaxed);
                    }
                }
            }));
        }
        tokio::time::sleep_until((measure_from + Duration::from_secs(seconds)).into()).await;
        let elapsed = measure_from.elapsed();
        for t in tasks {
            t.abort();
        }
        elapsed
    });
    let n = chunks.load(Ordering::Relaxed);
    let _ = stop_tx.send(());
    let stats = server.join().unwrap();
    println!(
        "firehose: {streams} streams, {:.1} s: {n} chunks = {:.0} chunks/s (simulator on 1 thread); engine steps {}, tokens {}",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        stats.engine.engine_steps,
        stats.engine.generated_tokens,
    );
}
