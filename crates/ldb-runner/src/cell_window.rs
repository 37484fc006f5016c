//! The measurement window of a sustained-decode cell: opened with its
//! instruments (stall watch, hardware mark, the process's own load, the
//! event-loop lag probe, the start scrape), followed one pass per tick, and
//! closed with the end scrape and the instruments' readings.

use std::sync::atomic::Ordering;

use ldb_client::scrape::Scrape;
use ldb_core::client_load::{ClientLoad, ClientLoadReading};
use ldb_core::headroom::Headroom;
use ldb_core::live::CellStage;
use ldb_core::readiness::Observation;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cell::{CellSpec, TICK};
use crate::cell_view::{CellProgress, RateTrace, update_live};
use crate::client_load::{read_client_load, usable_cpus};
use crate::confirm_read::edge_reads;
use crate::ctx::RunCtx;
use crate::loop_lag::LagProbe;
use crate::pool::StreamPool;
use crate::shard::cell::{open_window, tick_within};
use crate::shard::planned::{Planned, window_closes};
use crate::stall::StallWatch;
use crate::window_stop::WindowStop;

/// What the window saw, besides the streams' own counts.
pub(crate) struct WindowRecord {
    /// Window start (run clock).
    pub(crate) start: f64,
    /// Window end (run clock).
    pub(crate) end: f64,
    /// The scrape sent at the window's start.
    pub(crate) start_scrape: Option<Scrape>,
    /// The scrape sent at the window's end.
    pub(crate) end_scrape: Option<Scrape>,
    /// Periodic scrapes sent inside the window.
    pub(crate) sched: Vec<Scrape>,
    /// The confirming read of a lone queue reading (`confirm_read.rs`).
    pub(crate) confirm: Option<Scrape>,
    /// Producing streams at each pass.
    pub(crate) producing: Vec<f64>,
    /// Longest lateness of the driver (see `stall.rs`).
    pub(crate) stall: f64,
    /// The benchmark's own load over the window (see `client_load.rs`).
    pub(crate) load: ClientLoad,
    /// Whether the benchmark kept up (see `ldb_core::headroom`).
    pub(crate) headroom: Headroom,
    /// Hardware sample mark at the window's start.
    pub(crate) hw_start: Option<usize>,
    /// Hardware sample mark at the window's end.
    pub(crate) hw_end: Option<usize>,
    /// Why the window closed, and its rate's interval under `--duration auto`.
    pub(crate) stop: WindowStop,
}

/// A scrape sent on its own task (None: no metrics, or not wanted).
pub(crate) type ScrapeTask = Option<JoinHandle<Option<Scrape>>>;

/// The measurement window: open it, follow it for `spec.duration` (or until
/// its rate is known, `--duration auto`: `window_stop.rs`), close it and send
/// the end scrape, then drop every stream once it has answered. A sharded
/// cell passes its `planned` window `[start, end]` (run clock, announced to
/// every shard before it starts): it opens and closes exactly there.
pub(crate) async fn measure_window(
    rc: &RunCtx,
    spec: &CellSpec,
    skip: &CancellationToken,
    pool: &mut StreamPool,
    aborted: bool,
    planned: Option<&Planned<'_>>,
) -> WindowRecord {
    // From here to the end scrape the server is measured: background
    // /metrics reads slow to --metrics-interval.
    let _measuring = rc.scraper.measuring();
    let edges = || planned.map(|p| p.edges());
    let ws = open_window(rc, skip, pool, edges()).await;
    let mut instruments = Instruments::start(rc, ws, aborted);
    let mut passes = Passes::new(ws, spec);
    loop {
        if aborted || tick_within(rc, skip, edges()).await {
            break;
        }
        pool.collect();
        if pool.hopeless(rc.cfg.timing.max_error_rate) {
            break;
        }
        let now = rc.clock.now();
        instruments.stall.pass(now);
        passes.observe(rc, spec, pool, now);
        if window_closes(rc, planned, &mut passes.stop, now - ws, pool) {
            break;
        }
    }
    let we = edges().map_or_else(|| rc.clock.now(), |(_, e)| e.min(rc.clock.now()));
    close_window(rc, pool, instruments, passes, we, aborted).await
}

/// The instruments that watch the window from its first instant to its end.
struct Instruments {
    /// The driver's own lateness from the window's first instant: each pass
    /// should follow the last by one tick. A much longer gap means this
    /// process was not running, so tokens piled up unread and the window's
    /// client count is wrong.
    stall: StallWatch,
    hw_start: Option<usize>,
    load_start: ClientLoadReading,
    lag_probe: LagProbe,
    start_scrape: ScrapeTask,
}

impl Instruments {
    /// Start every instrument at the window's start `ws`.
    fn start(rc: &RunCtx, ws: f64, aborted: bool) -> Instruments {
        let stall = StallWatch::new(ws, TICK.as_secs_f64());
        let hw_start = rc.hw_mark();
        let load_start = read_client_load();
        let lag_probe = LagProbe::start();
        // The start scrape runs beside the loop, not awaited here: a freeze
        // of this process while it waited for the answer would hide from the
        // stall watch (and a slow /metrics must not pass for one).
        let start_scrape = spawn_scrape(rc, !aborted);
        Instruments {
            stall,
            hw_start,
            load_start,
            lag_probe,
            start_scrape,
        }
    }
}

/// What the window's passes gather, one sample each.
struct Passes {
    /// Window start (run clock).
    ws: f64,
    /// Periodic scrapes sent inside the window.
    sched: Vec<Scrape>,
    /// Producing streams at each pass.
    producing: Vec<f64>,
    /// The last periodic scrape kept. Periodic scrapes count from 1; the
    /// edge scrapes carry 0.
    last_seq: u64,
    /// The window's rate, for the dashboard.
    trace: RateTrace,
    /// When the window closes.
    stop: WindowStop,
}

impl Passes {
    fn new(ws: f64, spec: &CellSpec) -> Passes {
        Passes {
            ws,
            sched: Vec::new(),
            producing: Vec::new(),
            last_seq: 0,
            trace: RateTrace::new(ws),
            stop: WindowStop::new(spec.auto_stop, spec.duration),
        }
    }

    /// One pass at `now`: keep a new periodic scrape sent inside the window,
    /// sample the producing streams and the window's rate, and show them.
    fn observe(&mut self, rc: &RunCtx, spec: &CellSpec, pool: &StreamPool, now: f64) {
        let ws = self.ws;
        if let Some(s) = rc.scraper.latest()
            && s.seq != self.last_seq
            && s.sent >= ws
        {
            self.last_seq = s.seq;
            self.sched.push((*s).clone());
        }
        let now_producing = pool.producing();
        self.producing.push(f64::from(now_producing));
        self.trace
            .sample(now, pool.counters.window_tokens.load(Ordering::Relaxed));
        let latest = rc.scraper.latest();
        let obs = Observation {
            elapsed: now - pool.launch,
            running: latest.as_ref().and_then(|s| s.snap.running),
            waiting: latest.as_ref().and_then(|s| s.snap.waiting),
            producing: now_producing,
            any_tokens: true,
        };
        let progress = CellProgress {
            stage: CellStage::Window,
            stage_elapsed: now - ws,
            window_elapsed: now - ws,
            obs: &obs,
            trace: Some(&self.trace.values),
        };
        update_live(rc, spec, pool, &progress);
    }
}

/// Close the window at `we`, send the end scrape, read the instruments and
/// wait for the edge scrapes' answers.
async fn close_window(
    rc: &RunCtx,
    pool: &StreamPool,
    instruments: Instruments,
    passes: Passes,
    we: f64,
    aborted: bool,
) -> WindowRecord {
    let ws = passes.ws;
    pool.window.close(we);
    // The end scrape is sent at the window's end, while the streams still
    // run: the server reads its counters somewhere between the sending and
    // the answer, and that whole span must still be generating like the
    // window, or a slow /metrics reads a rate that already fell.
    let end_scrape = spawn_scrape(rc, !aborted);
    let load = read_client_load().since(&instruments.load_start);
    let lag = instruments.lag_probe.finish().await;
    let headroom = Headroom::measure(load.cpu_s, we - ws, usable_cpus(), &lag);
    // Hardware covers the window only, like the tokens it is divided into:
    // not the end scrape, the stream shutdown or the drain.
    let hw_end = rc.hw_mark();
    let (start_scrape, end_scrape, confirm) = edge_reads(
        rc,
        [instruments.start_scrape, end_scrape],
        &passes.sched,
        pool,
    )
    .await;
    WindowRecord {
        start: ws,
        end: we,
        start_scrape,
        end_scrape,
        sched: passes.sched,
        confirm,
        producing: passes.producing,
        stall: instruments.stall.worst(),
        load,
        headroom,
        hw_start: instruments.hw_start,
        hw_end,
        stop: passes.stop,
    }
}

/// One scrape sent now on its own task (none without metrics or `wanted`).
fn spawn_scrape(rc: &RunCtx, wanted: bool) -> ScrapeTask {
    (rc.metrics && wanted).then(|| {
        let scraper = rc.scraper.clone();
        tokio::spawn(async move { scraper.scrape_once().await })
    })
}

/// The answer of a scrape sent on its own task (None: failed, or no task).
pub(crate) async fn join_scrape(task: ScrapeTask) -> Option<Scrape> {
    match task {
        Some(task) => task.await.ok().flatten(),
        None => None,
    }
}
