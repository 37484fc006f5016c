//! The sending loop of an open-loop cell: each request leaves at its due
//! time on its own task, whether or not earlier ones finished, optionally
//! held back by `--max-in-flight`. One process runs it over the whole
//! schedule; with `--shards N` every shard runs it over its part of the
//! one schedule (`shard/rate.rs`), so both send by the same code.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ldb_client::stream::{StreamEnv, StreamOutcome, run_stream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// What the sending loop of an open-loop cell works with.
pub(crate) struct Sender<'a> {
    /// The requests to send: (request index, due time in seconds after `t0`).
    pub due: &'a [(usize, f64)],
    /// Run-clock time of the schedule's start.
    pub t0: f64,
    /// The cell's time limit: no request is sent after it.
    pub deadline: tokio::time::Instant,
    pub skip: &'a CancellationToken,
    /// `--max-in-flight` slots (this shard's part of them).
    pub cap: Option<Arc<Semaphore>>,
    /// Every request's environment: clock, server, the cell's window and
    /// counters, limits (its cancellation is a child of `skip`).
    pub env: StreamEnv,
    /// The body of request i (built, and fed to the intended cache, as it
    /// is sent).
    pub body: &'a (dyn Fn(usize) -> Bytes + Sync),
    /// Each finished request: (index, due time on the run clock, outcome).
    pub tx: mpsc::UnboundedSender<(usize, f64, StreamOutcome)>,
    pub in_flight: Arc<AtomicU64>,
    pub most: Arc<AtomicU64>,
}

/// Sends every request at its due time, each on its own task; returns
/// whether a request waited for a `--max-in-flight` slot, and how many
/// were never sent because the cell's limit came while every slot was
/// taken.
pub(crate) async fn send_all(s: Sender<'_>) -> (bool, u64) {
    let mut not_sent = 0u64;
    let mut capped = false;
    for (k, &(i, d)) in s.due.iter().enumerate() {
        let wait = s.t0 + d - s.env.clock.now();
        if wait > 0.0 {
            tokio::select! {
                _ = s.skip.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
        }
        if s.skip.is_cancelled() {
            break;
        }
        let permit = match &s.cap {
            Some(sem) => {
                let p = match sem.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        capped = true;
                        tokio::select! {
                            _ = s.skip.cancelled() => break,
                            _ = tokio::time::sleep_until(s.deadline) => {
                                not_sent = (s.due.len() - k) as u64;
                                break;
                            }
                            p = sem.clone().acquire_owned() => match p {
                                Ok(p) => p,
                                Err(_) => break,
                            },
                        }
                    }
                };
                Some(p)
            }
            None => None,
        };
        let env = StreamEnv {
            cancel: s.skip.child_token(),
            ..s.env.clone()
        };
        let (body, tx) = ((s.body)(i), s.tx.clone());
        let (in_flight, most) = (s.in_flight.clone(), s.most.clone());
        let scheduled = s.t0 + d;
        tokio::spawn(async move {
            let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            most.fetch_max(now, Ordering::Relaxed);
            let out = run_stream(&env, body).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
            let _ = tx.send((i, scheduled, out));
        });
    }
    (capped, not_sent)
}
