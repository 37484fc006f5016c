//! Shard 0's side of the protocol: the coordinator port, the members that
//! joined, their clocks, their status during a cell and the results they
//! send. The cell itself is run by `shard/cell.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldb_client::stream::RunClock;
use ldb_core::shard::{ClockEstimate, ClockSample, best_estimate};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::join::{accept_loop, version};
use super::refusals::{Refusal, Refusals};
use super::wire::{Msg, Reader, ShardCellData, Writer};

/// What the leader enforces.
#[derive(Debug, Clone)]
pub struct LeaderSettings {
    /// `--shards`.
    pub shards: u32,
    /// The join secret.
    pub secret: String,
    /// Digest of the benchmark flags (`auth::flags_digest`).
    pub flags_digest: String,
    /// How long to wait for every follower to join.
    pub join_wait: Duration,
    /// `--on-shard-loss stop`.
    pub stop_on_loss: bool,
}

/// A member silent for this long is lost (it sends its status four times a second).
pub(crate) const SILENCE_LIMIT: Duration = Duration::from_secs(5);
/// Clock exchanges per synchronisation.
const PINGS: u64 = 8;
/// How long one clock answer may take.
const PONG_WAIT: Duration = Duration::from_secs(2);
/// Messages queued for one member at most: a member that stops reading
/// fills it within seconds (status and heartbeats) and is lost, instead of
/// the leader holding its orders without bound.
const MEMBER_QUEUE: usize = 256;

/// What a joiner claims, checked once its proof verified.
pub(crate) struct Claims<'a> {
    pub version: &'a str,
    pub shards: u32,
    pub index: u32,
    pub flags_digest: &'a str,
}

/// A member's latest status.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Status {
    pub cell: Option<u64>,
    pub producing: u32,
    pub tokens: u64,
    pub window_tokens: u64,
    /// When it arrived, the leader's Unix clock.
    pub received_unix: f64,
}

struct Member {
    tx: mpsc::Sender<Msg>,
    clock: Option<ClockEstimate>,
    status: Status,
    lost: bool,
}

/// State shared with the connection tasks.
pub(crate) struct Shared {
    pub(crate) settings: LeaderSettings,
    /// The plan started: later joins are refused.
    pub(crate) started: AtomicBool,
    /// The run is over: followers leaving are not lost.
    finished: AtomicBool,
    clock: RunClock,
    members: Mutex<BTreeMap<u32, Member>>,
    notes: Mutex<Vec<String>>,
    refusals: Refusals,
    pongs: mpsc::Sender<(u32, u64, f64, f64)>,
    dones: mpsc::Sender<(u32, ShardCellData)>,
}

/// The leader of a sharded run.
pub struct ShardLeader {
    shared: Arc<Shared>,
    addr: SocketAddr,
    pongs: tokio::sync::Mutex<mpsc::Receiver<(u32, u64, f64, f64)>>,
    dones: tokio::sync::Mutex<mpsc::Receiver<(u32, ShardCellData)>>,
    seq: AtomicU64,
}

impl Shared {
    /// A line for the log (stderr now, the run's event log at the next cell).
    pub(crate) fn note(&self, line: String) {
        eprintln!("{line}");
        if let Ok(mut n) = self.notes.lock() {
            n.push(line);
        }
    }

    /// A refused join: counted; printed when its (address, class) is new.
    pub(crate) fn refused(&self, ip: std::net::IpAddr, why: Refusal) {
        if self.refusals.count(ip, why) {
            eprintln!("shard join refused from {ip}: {}", why.name());
        }
    }

    /// Admit a joiner whose proof verified: the checks after the secret, in
    /// the order a user fixes them, and the member added under the same
    /// lock (a second join for its index, or a join after the plan
    /// started, fails). Its queue, with the welcome first.
    pub(crate) fn try_join(
        &self,
        c: &Claims<'_>,
    ) -> Result<mpsc::Receiver<Msg>, (Refusal, String)> {
        let mut members = self
            .members
            .lock()
            .map_err(|_| (Refusal::Late, "the leader is failing".to_string()))?;
        self.admit(c, &members)?;
        let (tx, rx) = mpsc::channel(MEMBER_QUEUE);
        let _ = tx.try_send(Msg::Welcome);
        members.insert(
            c.index,
            Member {
                tx,
                clock: None,
                status: Status::default(),
                lost: false,
            },
        );
        Ok(rx)
    }

    fn admit(
        &self,
        c: &Claims<'_>,
        members: &BTreeMap<u32, Member>,
    ) -> Result<(), (Refusal, String)> {
        let s = &self.settings;
        let mine = version();
        if c.version != mine {
            return Err((
                Refusal::Version,
                format!("version differs: the leader runs {mine}"),
            ));
        }
        if c.shards != s.shards {
            return Err((
                Refusal::Index,
                format!(
                    "--shards {} differs from the leader's {}",
                    c.shards, s.shards
                ),
            ));
        }
        if c.index == 0 || c.index >= s.shards {
            return Err((
                Refusal::Index,
                format!(
                    "--shard-index {} is not a follower's index (1..{})",
                    c.index,
                    s.shards - 1
                ),
            ));
        }
        if c.flags_digest != s.flags_digest {
            return Err((
                Refusal::Flags,
                "the benchmark flags differ from the leader's (compare them with --print-config)"
                    .into(),
            ));
        }
        // Read under the members' lock, which `plan_started` takes too.
        if self.started.load(Ordering::Acquire) {
            return Err((
                Refusal::Late,
                "too late: the leader's plan has started".into(),
            ));
        }
        if members.get(&c.index).is_some_and(|x| !x.lost) {
            return Err((
                Refusal::Index,
                format!("index {} has joined already", c.index),
            ));
        }
        Ok(())
    }

    /// A member that joined: its writer and reader run on their own tasks.
    pub(crate) fn run_member(
        self: &Arc<Self>,
        index: u32,
        reader: Reader,
        mut writer: Writer,
        mut rx: mpsc::Receiver<Msg>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if writer.send(&msg).await.is_err() {
                    break;
                }
            }
            me.lose(index, "its connection failed");
        });
        let me = self.clone();
        tokio::spawn(async move { me.read_member(index, reader).await });
    }

    /// Queue `msg` for a member; a full queue loses it (it stopped reading).
    fn enqueue(&self, index: u32, msg: Msg) {
        let full = self
            .members
            .lock()
            .ok()
            .and_then(|m| {
                m.get(&index)
                    .map(|x| x.tx.try_send(msg).is_err() && !x.tx.is_closed())
            })
            .unwrap_or(false);
        if full {
            self.lose(index, "its queue is full (it stopped reading)");
        }
    }

    async fn read_member(self: Arc<Self>, index: u32, mut reader: Reader) {
        loop {
            let msg = match reader.recv(SILENCE_LIMIT).await {
                Ok(m) => m,
                Err(why) => {
                    self.lose(index, &why.to_string());
                    return;
                }
            };
            let now = self.clock.unix(self.clock.now());
            match msg {
                Msg::Pong { seq, clock } => {
                    let _ = self.pongs.try_send((index, seq, clock, now));
                }
                Msg::Status {
                    cell,
                    producing,
                    tokens,
                    window_tokens,
                } => {
                    if let Ok(mut m) = self.members.lock()
                        && let Some(x) = m.get_mut(&index)
                    {
                        x.status = Status {
                            cell,
                            producing,
                            tokens,
                            window_tokens,
                            received_unix: now,
                        };
                    }
                }
                Msg::CellDone(d) => {
                    let _ = self.dones.send((index, *d)).await;
                }
                _ => {}
            }
        }
    }

    fn lose(&self, index: u32, why: &str) {
        if self.finished.load(Ordering::Acquire) {
            return;
        }
        let newly = self
            .members
            .lock()
            .ok()
            .and_then(|mut m| {
                let x = m.get_mut(&index)?;
                Some(!std::mem::replace(&mut x.lost, true))
            })
            .unwrap_or(false);
        if newly {
            self.note(format!("shard {index} lost: {why}"));
        }
    }
}

impl ShardLeader {
    /// Listen on `addr` (a port in use is an error here, before any request).
    pub async fn bind(addr: &str, settings: LeaderSettings) -> std::io::Result<ShardLeader> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        // Bounded like the members' queues: a clock answer over the bound
        // is dropped (the exchange repeats), a result waits its turn.
        let (ptx, prx) = mpsc::channel(1024);
        let (dtx, drx) = mpsc::channel(64);
        let shared = Arc::new(Shared {
            settings,
            started: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            clock: RunClock::new(),
            members: Mutex::default(),
            notes: Mutex::default(),
            refusals: Refusals::default(),
            pongs: ptx,
            dones: dtx,
        });
        tokio::spawn(accept_loop(listener, shared.clone()));
        tokio::spawn(heartbeat(shared.clone()));
        Ok(ShardLeader {
            shared,
            addr: local,
            pongs: tokio::sync::Mutex::new(prx),
            dones: tokio::sync::Mutex::new(drx),
            seq: AtomicU64::new(0),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Settings.
    pub fn settings(&self) -> &LeaderSettings {
        &self.shared.settings
    }

    /// Wait until every follower joined (bounded by the join wait), then
    /// measure their clocks. Err: who is missing, or a clock without bound.
    pub async fn wait_for_members(&self) -> Result<(), String> {
        let want = self.shared.settings.shards.saturating_sub(1) as usize;
        let deadline = Instant::now() + self.shared.settings.join_wait;
        while self.live_members().len() < want {
            if Instant::now() > deadline {
                return Err(format!(
                    "only {} of {want} follower shards joined within {:.0} s",
                    self.live_members().len(),
                    self.shared.settings.join_wait.as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.sync_clocks().await;
        for i in self.live_members() {
            if self.clock(i).is_none() {
                return Err(format!("shard {i}'s clock could not be measured"));
            }
        }
        Ok(())
    }

    /// From now on joins are late (set under the members' lock, so a join
    /// being admitted either finishes before or is refused).
    pub fn plan_started(&self) {
        let _members = self.shared.members.lock();
        self.shared.started.store(true, Ordering::Release);
    }

    /// Followers joined and not lost, index order.
    pub fn live_members(&self) -> Vec<u32> {
        self.shared
            .members
            .lock()
            .map(|m| m.iter().filter(|(_, x)| !x.lost).map(|(i, _)| *i).collect())
            .unwrap_or_default()
    }

    /// A member's clock offset (its clock − the leader's) and uncertainty.
    pub fn clock(&self, index: u32) -> Option<ClockEstimate> {
        self.shared
            .members
            .lock()
            .ok()
            .and_then(|m| m.get(&index).and_then(|x| x.clock))
    }

    pub(crate) fn status(&self, index: u32) -> Option<Status> {
        self.shared
            .members
            .lock()
            .ok()
            .and_then(|m| m.get(&index).map(|x| x.status))
    }

    pub(crate) fn is_lost(&self, index: u32) -> bool {
        self.shared
            .members
            .lock()
            .map(|m| m.get(&index).is_none_or(|x| x.lost))
            .unwrap_or(true)
    }

    /// Lines logged since the last call, and a summary of the joins
    /// refused meanwhile (address, class, count: never what they sent).
    pub fn take_notes(&self) -> Vec<String> {
        let mut n = self
            .shared
            .notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default();
        n.extend(self.shared.refusals.summary());
        n
    }

    pub(crate) fn send(&self, index: u32, msg: Msg) {
        self.shared.enqueue(index, msg);
    }

    /// The leader's Unix clock (the same base as the run clock's `unix`).
    pub(crate) fn now_unix(&self) -> f64 {
        self.shared.clock.unix(self.shared.clock.now())
    }

    /// Measure every live member's clock: [`PINGS`] exchanges each, the
    /// shortest round trip kept (`ldb_core::shard::best_estimate`).
    pub async fn sync_clocks(&self) {
        let members = self.live_members();
        let mut samples: BTreeMap<u32, Vec<ClockSample>> = BTreeMap::new();
        let mut pongs = self.pongs.lock().await;
        while pongs.try_recv().is_ok() {}
        for _ in 0..PINGS {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let mut sent = BTreeMap::new();
            for &i in &members {
                sent.insert(i, self.now_unix());
                self.send(i, Msg::Ping { seq });
            }
            let deadline = tokio::time::Instant::now() + PONG_WAIT;
            let mut answered = 0;
            while answered < members.len() {
                let Ok(Some((i, s, clock, received))) =
                    tokio::time::timeout_at(deadline, pongs.recv()).await
                else {
                    break;
                };
                if s != seq {
                    continue;
                }
                answered += 1;
                if let Some(&sent) = sent.get(&i) {
                    samples.entry(i).or_default().push(ClockSample {
                        sent,
                        peer: clock,
                        received,
                    });
                }
            }
        }
        if let Ok(mut m) = self.shared.members.lock() {
            for (i, s) in samples {
                if let (Some(x), Some(e)) = (m.get_mut(&i), best_estimate(&s)) {
                    x.clock = Some(e);
                }
            }
        }
    }

    /// The results of `cell` from `members`, until each answered, was lost,
    /// or `within` passed (then it counts as lost).
    pub(crate) async fn collect(
        &self,
        cell: u64,
        members: &[u32],
        within: Duration,
    ) -> (BTreeMap<u32, ShardCellData>, Vec<u32>) {
        let mut got = BTreeMap::new();
        let deadline = tokio::time::Instant::now() + within;
        let mut dones = self.dones.lock().await;
        loop {
            let pending: Vec<u32> = members
                .iter()
                .copied()
                .filter(|i| !got.contains_key(i) && !self.is_lost(*i))
                .collect();
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            let step = tokio::time::Instant::now() + Duration::from_millis(200);
            if let Ok(Some((i, d))) =
                tokio::time::timeout_at(step.min(deadline), dones.recv()).await
                && d.cell == cell
            {
                got.insert(i, d);
            }
        }
        let lost = members
            .iter()
            .copied()
            .filter(|i| !got.contains_key(i))
            .collect();
        (got, lost)
    }

    /// Tell every member the run is over, and give the messages a moment
    /// to leave.
    pub async fn finish(&self) {
        self.shared.finished.store(true, Ordering::Release);
        for i in self.live_members() {
            self.send(i, Msg::Finish);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A heartbeat every second, so a follower knows its leader lives.
async fn heartbeat(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let live: Vec<u32> = shared
            .members
            .lock()
            .map(|m| m.iter().filter(|(_, x)| !x.lost).map(|(i, _)| *i).collect())
            .unwrap_or_default();
        for i in live {
            shared.enqueue(i, Msg::Heartbeat);
        }
    }
}
