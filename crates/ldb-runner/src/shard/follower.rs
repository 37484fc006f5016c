//! A follower shard: join the leader, answer its clock questions, run the
//! streams of each cell it is given, count them inside the one window the
//! leader announces (mapped to this clock), and send back every request.
//! Without the leader for [`SILENCE_LIMIT`] it stops its streams, keeps
//! what it measured, and ends.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ldb_client::Http;
use ldb_client::stream::{RunClock, StreamEnv};
use ldb_core::headroom::Headroom;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::follower_join::join;
use super::leader::SILENCE_LIMIT;
use super::rate::RateOrder;
use super::wire::{Msg, ShardCellData, WireOutcome, Writer};
use crate::client_load::{read_client_load, usable_cpus};
use crate::loop_lag::LagProbe;
use crate::pool::StreamPool;

/// Who this follower is and whom it follows.
#[derive(Debug, Clone)]
pub struct FollowerSettings {
    /// `HOST:PORT` of the leader.
    pub coordinator: String,
    /// `--shards`.
    pub shards: u32,
    /// `--shard-index`.
    pub index: u32,
    /// The join secret.
    pub secret: String,
    /// Digest of the benchmark flags.
    pub flags_digest: String,
    /// How long to keep trying to reach the leader.
    pub join_wait: Duration,
    /// Test only: seconds added to this shard's clock.
    pub clock_offset_s: f64,
}

/// How following ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEnd {
    /// The leader finished the run.
    Finished,
    /// The leader went silent or its connection broke.
    LeaderLost(String),
    /// The leader refused the join.
    Refused(String),
    /// The leader could not be reached.
    Unreachable(String),
}

/// The cell this follower is running.
struct Active {
    cell: u64,
    concurrency: u32,
    pool: StreamPool,
    window: Option<(f64, f64)>,
    load: Option<(ldb_core::client_load::ClientLoadReading, LagProbe)>,
    producing: Vec<f64>,
}

/// The follower's clock: the run clock on Unix seconds plus the test offset.
#[derive(Clone, Copy)]
struct Clock {
    run: RunClock,
    offset: f64,
}

impl Clock {
    fn unix(&self) -> f64 {
        self.run.unix(self.run.now()) + self.offset
    }
    fn origin(&self) -> f64 {
        self.run.unix(0.0) + self.offset
    }
}

/// Join and follow until the run ends; `on_cell` gets each finished cell
/// (to write the shard's record). Returns how it ended and every cell.
pub async fn follow(
    s: &FollowerSettings,
    http: Http,
    idle_timeout: Option<Duration>,
    mut on_cell: impl FnMut(&[ShardCellData]),
) -> (FollowEnd, Vec<ShardCellData>) {
    let clock = Clock {
        run: RunClock::new(),
        offset: s.clock_offset_s,
    };
    let (mut reader, mut writer) = match join(s).await {
        Ok(rw) => rw,
        Err(end) => return (end, Vec::new()),
    };
    eprintln!("shard {}: joined the leader at {}", s.index, s.coordinator);
    let (tx, rx) = mpsc::channel::<Msg>(TO_LEADER_QUEUE);
    let sender = tokio::spawn(async move { send_all(&mut writer, rx).await });
    let (rate_tx, mut rate_rx) = mpsc::unbounded_channel::<ShardCellData>();
    let mut f = Following {
        clock,
        base: StreamEnv {
            idle_timeout,
            ..StreamEnv::new(http, clock.run)
        },
        stop: CancellationToken::new(),
        tx,
        rate_tx,
        rates_running: 0,
        parts: Default::default(),
        bodies: Default::default(),
        active: None,
        done: Vec::new(),
    };
    let mut heard = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let end = loop {
        tokio::select! {
            m = reader.next() => {
                let msg = match m {
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => break FollowEnd::LeaderLost(e.to_string()),
                    None => break FollowEnd::LeaderLost("the leader closed the connection".into()),
                };
                heard = Instant::now();
                if let Some(end) = f.on_message(msg, &mut on_cell).await {
                    break end;
                }
            }
            Some(d) = rate_rx.recv() => f.rate_done(d, &mut on_cell),
            _ = tick.tick() => {
                if heard.elapsed() > SILENCE_LIMIT {
                    break FollowEnd::LeaderLost(format!(
                        "nothing from the leader for {:.0} s", SILENCE_LIMIT.as_secs_f64()
                    ));
                }
                let status = status_now(f.active.as_mut(), &f.clock);
                let _ = f.tx.try_send(status);
            }
        }
    };
    // Leader gone mid-cell: stop the streams now and keep what they measured.
    if let Some(a) = f.active.take() {
        let d = close_reporting(a, &f.clock, &f.tx).await;
        f.done.push(d);
        on_cell(&f.done);
    }
    f.stop.cancel();
    while f.rates_running > 0 {
        match tokio::time::timeout(Duration::from_secs(20), rate_rx.recv()).await {
            Ok(Some(d)) => f.rate_done(d, &mut on_cell),
            _ => break,
        }
    }
    let Following { tx, done, .. } = f;
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), sender).await;
    (end, done)
}

/// A follower's state between the leader's messages.
struct Following {
    clock: Clock,
    /// Every stream's environment (the server, the run clock, limits).
    base: StreamEnv,
    /// Cancelled when following ends: open-loop parts stop sending.
    stop: CancellationToken,
    /// To the leader (bounded: a leader that stops reading is lost).
    tx: mpsc::Sender<Msg>,
    /// Open-loop parts, when they end.
    rate_tx: mpsc::UnboundedSender<ShardCellData>,
    rates_running: usize,
    /// The open-loop parts running, by cell: the leader ends one early
    /// (the user skipped the cell) with its `CellEnd`.
    parts: std::collections::HashMap<u64, CancellationToken>,
    /// A large order's first bodies, by cell, until its `RateStart` comes.
    bodies: std::collections::HashMap<u64, Vec<String>>,
    /// The sustained cell running.
    active: Option<Active>,
    /// Every cell finished, in order.
    done: Vec<ShardCellData>,
}

impl Following {
    /// Start this member's share of a rate cell, its bodies sent ahead in
    /// chunks joined to the order first.
    fn start_rate(&mut self, mut order: Box<RateOrder>) -> Option<FollowEnd> {
        if let Some(mut first) = self.bodies.remove(&order.cell) {
            first.append(&mut order.bodies);
            order.bodies = first;
        }
        if let Err(why) = super::check::rate_bodies(&order) {
            return Some(FollowEnd::LeaderLost(format!(
                "a number out of range: {why}"
            )));
        }
        self.rates_running += 1;
        let (env, origin) = (self.base.clone(), self.clock.origin());
        let (cancel, out) = (self.stop.child_token(), self.rate_tx.clone());
        self.parts.insert(order.cell, cancel.clone());
        tokio::spawn(async move {
            let _ = out.send(super::rate::run_share(*order, env, origin, cancel).await);
        });
        None
    }

    /// Start this member's part of a session run: its conversations, run
    /// with the single-process session loop (`replay/sessions/part.rs`).
    fn start_sessions(
        &mut self,
        order: Box<super::session_wire::SessionOrder>,
    ) -> Option<FollowEnd> {
        if let Err(why) = crate::replay::check_session_part(&order) {
            return Some(FollowEnd::LeaderLost(format!("a bad session order: {why}")));
        }
        self.rates_running += 1;
        let (env, origin) = (self.base.clone(), self.clock.origin());
        let (cancel, out) = (self.stop.child_token(), self.rate_tx.clone());
        self.parts.insert(order.cell, cancel.clone());
        tokio::spawn(async move {
            let d = crate::replay::run_session_part(*order, env, origin, cancel).await;
            let _ = out.send(d);
        });
        None
    }

    /// Act on one message of the leader (Some: following ends).
    async fn on_message(
        &mut self,
        msg: Msg,
        on_cell: &mut impl FnMut(&[ShardCellData]),
    ) -> Option<FollowEnd> {
        match msg {
            Msg::Ping { seq } => {
                let _ = self.tx.try_send(Msg::Pong {
                    seq,
                    clock: self.clock.unix(),
                });
            }
            Msg::CellStart {
                cell,
                concurrency,
                body,
                idle_timeout_s,
            } => {
                let env = StreamEnv {
                    // In range: checked on arrival (`shard/check.rs`).
                    idle_timeout: idle_timeout_s
                        .and_then(|s| Duration::try_from_secs_f64(s).ok())
                        .or(self.base.idle_timeout),
                    ..self.base.clone()
                };
                let pool = StreamPool::launch_env(
                    &env,
                    Bytes::from(body),
                    concurrency,
                    0,
                    &self.stop,
                    self.clock.run.now(),
                );
                self.active = Some(Active {
                    cell,
                    concurrency,
                    pool,
                    window: None,
                    load: None,
                    producing: Vec::new(),
                });
            }
            Msg::RateBodies { cell, bodies } => {
                self.bodies.entry(cell).or_default().extend(bodies);
            }
            Msg::RateStart(order) => return self.start_rate(order),
            Msg::SessionStart(order) => return self.start_sessions(order),
            Msg::BatchStart(order) => {
                self.rates_running += 1;
                let (env, origin) = (self.base.clone(), self.clock.origin());
                let (cancel, out) = (self.stop.child_token(), self.rate_tx.clone());
                self.parts.insert(order.cell, cancel.clone());
                tokio::spawn(async move {
                    let _ = out.send(super::batch::run_share(*order, env, origin, cancel).await);
                });
            }
            Msg::Window { cell, start, end } => {
                if let Some(a) = self.active.as_mut().filter(|a| a.cell == cell) {
                    let (ls, le) = (start - self.clock.origin(), end - self.clock.origin());
                    a.pool.window.close(le);
                    // A second announcement only moves the end earlier
                    // (`--duration auto` closed the window).
                    if a.window.replace((ls, le)).is_none() {
                        a.pool.window.open(ls);
                        a.load = Some((read_client_load(), LagProbe::start()));
                    }
                }
            }
            Msg::CellEnd { cell } if self.parts.contains_key(&cell) => {
                if let Some(part) = self.parts.get(&cell) {
                    part.cancel();
                }
            }
            Msg::CellEnd { cell } => {
                if self.active.as_ref().is_some_and(|a| a.cell == cell)
                    && let Some(a) = self.active.take()
                {
                    let d = close_reporting(a, &self.clock, &self.tx).await;
                    let _ = self.tx.send(Msg::CellDone(Box::new(d.clone()))).await;
                    self.done.push(d);
                    on_cell(&self.done);
                }
            }
            Msg::Finish => return Some(FollowEnd::Finished),
            _ => {}
        }
        None
    }

    /// An open-loop part ended: send it to the leader and keep it.
    fn rate_done(&mut self, d: ShardCellData, on_cell: &mut impl FnMut(&[ShardCellData])) {
        self.rates_running = self.rates_running.saturating_sub(1);
        self.parts.remove(&d.cell);
        let _ = self.tx.try_send(Msg::CellDone(Box::new(d.clone())));
        self.done.push(d);
        on_cell(&self.done);
    }
}

/// The status sent four times a second; inside the window it also samples the
/// producing streams.
fn status_now(active: Option<&mut Active>, clock: &Clock) -> Msg {
    let Some(a) = active else {
        return Msg::Status {
            cell: None,
            producing: 0,
            tokens: 0,
            window_tokens: 0,
        };
    };
    a.pool.collect();
    let now = clock.run.now();
    if a.window.is_some_and(|(s, e)| now >= s && now <= e) {
        a.producing.push(f64::from(a.pool.producing()));
    }
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    Msg::Status {
        cell: Some(a.cell),
        producing: a.pool.producing(),
        tokens: count(&a.pool.counters.tokens),
        window_tokens: count(&a.pool.counters.window_tokens),
    }
}

/// Messages queued for the leader at most (status four times a second,
/// results at cell ends: far below unless the leader stopped reading).
const TO_LEADER_QUEUE: usize = 256;

/// Close a cell while telling the leader, four times a second, that this
/// follower lives: streams that take long to stop are not a lost shard.
/// (The leader waits for the cell's results a bounded time, `cell.rs`.)
async fn close_reporting(a: Active, clock: &Clock, tx: &mpsc::Sender<Msg>) -> ShardCellData {
    let cell = a.cell;
    while_reporting(cell, close_cell(a, clock), tx).await
}

/// Runs `work` (a cell's close, which waits for every stream to end) while
/// sending the leader a status for `cell` every 250 ms: the leader counts a
/// member silent for [`SILENCE_LIMIT`] as lost, and a slow close is not a
/// loss (issue 34).
async fn while_reporting<T>(cell: u64, work: impl Future<Output = T>, tx: &mpsc::Sender<Msg>) -> T {
    tokio::pin!(work);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            d = &mut work => return d,
            _ = tick.tick() => {
                let _ = tx.try_send(Msg::Status {
                    cell: Some(cell),
                    producing: 0,
                    tokens: 0,
                    window_tokens: 0,
                });
            }
        }
    }
}

async fn send_all(writer: &mut Writer, mut rx: mpsc::Receiver<Msg>) {
    while let Some(m) = rx.recv().await {
        if writer.send(&m).await.is_err() {
            break;
        }
    }
}

/// Stop the cell's streams and gather what they measured.
async fn close_cell(mut a: Active, clock: &Clock) -> ShardCellData {
    a.pool.cancel();
    let (cpu_share, limited) = match (a.load.take(), a.window) {
        (Some((start, probe)), Some((ws, we))) => {
            let load = read_client_load().since(&start);
            let lag = probe.finish().await;
            let len = (clock.run.now().min(we) - ws).max(1e-9);
            let h = Headroom::measure(load.cpu_s, len, usable_cpus(), &lag);
            (h.cpu_share, h.limited())
        }
        _ => (None, false),
    };
    a.pool.join(|| {}).await;
    if let Some((_, end)) = a.window {
        drop_after_end(&mut a.pool, end);
    }
    let producing_mean = if a.producing.is_empty() {
        0.0
    } else {
        a.producing.iter().sum::<f64>() / a.producing.len() as f64
    };
    ShardCellData {
        cell: a.cell,
        concurrency: a.concurrency,
        window_unix: a
            .window
            .map(|(s, e)| (s + clock.origin(), e + clock.origin())),
        origin_unix: clock.origin(),
        outcomes: a.pool.outcomes.iter().map(WireOutcome::from).collect(),
        gaps: a.pool.counters.gaps.snapshot(),
        producing_mean,
        client_cpu_share: cpu_share,
        client_limited: limited,
        ..ShardCellData::default()
    }
}

/// A window end this follower learned after it passed (`--duration auto`
/// closed the window and the announcement came late) left the tokens that
/// arrived meanwhile counted: take them back by their arrival times, and
/// their gaps out of the cell's histogram.
fn drop_after_end(pool: &mut StreamPool, end: f64) {
    let (mut tokens, mut inexact) = (0u64, 0u64);
    for o in &mut pool.outcomes {
        let late = o.track.drop_after(end);
        tokens += late.tokens;
        inexact += u64::from(!late.exact);
        for g in late.gaps {
            pool.counters.gaps.forget(g);
        }
    }
    if tokens > 0 {
        eprintln!(
            "window end learned late: {tokens} tokens that arrived after it taken back{}",
            if inexact > 0 {
                format!(" ({inexact} requests may still count a few: their kept reads ran out)")
            } else {
                String::new()
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// A close that takes three silence limits still keeps the leader
    /// hearing from the member: no gap between statuses, nor between the
    /// last one and the end, comes near the limit (paused clock: exact).
    #[tokio::test(start_paused = true)]
    async fn a_slow_close_keeps_sending_status() {
        let (tx, mut rx) = mpsc::channel(1024);
        let heard = tokio::spawn(async move {
            let mut at = Vec::new();
            while let Some(m) = rx.recv().await {
                assert!(matches!(m, Msg::Status { cell: Some(7), .. }), "{m:?}");
                at.push(Instant::now());
            }
            at
        });
        let t0 = Instant::now();
        while_reporting(7, tokio::time::sleep(SILENCE_LIMIT * 3), &tx).await;
        let end = Instant::now();
        drop(tx);
        let heard = heard.await.expect("receiver");
        assert!(heard.len() >= 60, "{} statuses in 15 s", heard.len());
        let mut prev = t0;
        for t in heard.into_iter().chain([end]) {
            assert!(t - prev <= Duration::from_millis(250), "{:?}", t - prev);
            prev = t;
        }
    }
}
