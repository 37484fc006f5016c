//! The server between cells: gone (it stopped answering) or restarted.
//!
//! After a cell that failed, one cheap request (`GET /v1/models`) tells a
//! server that is gone from one that only failed this cell. A gone server is
//! waited for up to `--server-down-grace` seconds: back in time, the run goes
//! on; not back, the run labels every cell left without sending anything and
//! ends (exit code 3). After every cell a scrape is compared with the one
//! taken after the cell before: a new process start time, a counter that
//! went down, or another engine version is a restart.

use std::sync::Mutex;
use std::time::Duration;

use ldb_core::document::{Metadata, MetricsLost, ServerOutage, ServerRestart};
use ldb_core::engine::ServerSnapshot;
use ldb_core::result::{CellResult, CellStatus, DecodeMode};
use ldb_core::tokens::format_context;

use crate::ctx::RunCtx;

/// How long the liveness request may take before the server counts as not
/// answering.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between liveness requests while waiting for the server.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What the run learned about the server's faults so far (copied into the
/// metadata at every save).
#[derive(Debug, Default)]
pub struct FaultLog {
    outages: Vec<ServerOutage>,
    restarts: Vec<ServerRestart>,
    /// The server did not come back within the grace: why the run ended.
    gone: Option<String>,
    /// The scrape taken after the previous cell.
    last: Option<ServerSnapshot>,
    /// `/metrics` lost after discovery.
    metrics_lost: Option<MetricsLost>,
    /// The engine version read after the cell before.
    version: Option<String>,
}

impl FaultLog {
    /// Write what was seen into the metadata (keys stay absent when empty).
    pub(crate) fn stamp(&self, md: &mut Metadata) {
        md.server_outages = self.outages.clone();
        md.server_restarts = self.restarts.clone();
        md.metrics_lost = self.metrics_lost.clone();
    }
}

/// The fault log shared by the phases.
pub(crate) type SharedFaults = std::sync::Arc<Mutex<FaultLog>>;

fn with<T>(rc: &RunCtx, f: impl FnOnce(&mut FaultLog) -> T) -> T {
    let mut g = rc.faults.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

/// The server was found gone and did not return within the grace: the
/// reason every remaining cell carries.
pub(crate) fn gone(rc: &RunCtx) -> Option<String> {
    with(rc, |f| f.gone.clone())
}

/// The server answers a plain request: any HTTP answer except the gateway
/// errors a proxy gives for a dead backend (502–504).
async fn answers(rc: &RunCtx) -> bool {
    match rc.http.get_text("/v1/models", PROBE_TIMEOUT).await {
        Ok((status, _)) => !(502..=504).contains(&status),
        Err(_) => false,
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `HH:MM:SS` (UTC) of a Unix time.
pub(crate) fn utc_hms(unix: f64) -> String {
    chrono::DateTime::from_timestamp(unix.max(0.0) as i64, 0)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// After a finished cell: look for a gone server (after a failed cell) and
/// for a restart. A gone server that comes back within the grace leaves the
/// cell `error` with a reason naming the outage; one that does not also sets
/// [`gone`]. `cell` is rewritten in place.
pub(crate) async fn after_cell(rc: &RunCtx, cell: &mut CellResult) {
    note_metrics(rc);
    let failed = matches!(cell.ext.status, CellStatus::Error | CellStatus::NoTokens);
    let mut came_back = false;
    if failed && !rc.controls.stop.is_cancelled() && !answers(rc).await {
        came_back = outage(rc, cell).await;
        if !came_back {
            return;
        }
    }
    restart_check(rc, came_back).await;
}

/// Copy the scraper's `/metrics` loss into the log, with an event line when
/// it is new or over.
pub(crate) fn note_metrics(rc: &RunCtx) {
    let Some(now) = rc.scraper.lost() else {
        return;
    };
    let before = with(rc, |f| f.metrics_lost.replace(now.clone()));
    let was_back = before.as_ref().and_then(|b| b.back_unix);
    if before.is_none() {
        rc.live.event(format!(
            "/metrics lost since {} UTC ({}); cells keep their client measurements, without \
             server counts",
            utc_hms(now.since_unix),
            now.reason
        ));
    }
    if let (None, Some(back)) = (was_back, now.back_unix) {
        rc.live.event(format!(
            "/metrics answers again since {} UTC",
            utc_hms(back)
        ));
    }
}

/// How a wait for a server that stopped answering ended.
enum Waited {
    /// It answers again after `down_for` seconds.
    Back { since: f64, down_for: f64 },
    /// The user stopped the run while it waited.
    Stopped,
    /// Not back within the grace: `why` is the reason every cell left
    /// carries (also in [`gone`]).
    Gone { why: String },
}

/// The server does not answer: wait for it up to the grace, with the event
/// lines, the outage entry and, when it does not return, [`gone`] set.
/// `during` names what ran into it, `evidence` the failure that showed it.
async fn wait_for_return(rc: &RunCtx, during: String, evidence: String) -> Waited {
    let since = unix_now();
    let grace = rc.cfg.timing.server_down_grace.max(0.0);
    rc.live.event(format!(
        "server down: no answer since {} UTC after {during} failed ({evidence}); waiting up to \
         {grace:.0} s for it to return (--server-down-grace)",
        utc_hms(since)
    ));
    let t0 = std::time::Instant::now();
    let mut back = false;
    while t0.elapsed().as_secs_f64() < grace && !rc.controls.stop.is_cancelled() {
        let left = Duration::from_secs_f64(grace - t0.elapsed().as_secs_f64());
        tokio::select! {
            _ = rc.controls.stop.cancelled() => break,
            _ = tokio::time::sleep(PROBE_EVERY.min(left)) => {}
        }
        if answers(rc).await {
            back = true;
            break;
        }
    }
    let down_for = t0.elapsed().as_secs_f64();
    let mut entry = ServerOutage {
        since_unix: since,
        back_unix: None,
        during,
        evidence,
    };
    let waited = if back {
        entry.back_unix = Some(unix_now());
        rc.live.event(format!(
            "server back after {down_for:.0} s; the run goes on"
        ));
        Waited::Back { since, down_for }
    } else if rc.controls.stop.is_cancelled() {
        // The user stopped the run while it waited: that ends the run, not
        // the outage.
        Waited::Stopped
    } else {
        let why = format!(
            "server down since {} UTC (no answer within --server-down-grace {grace:.0} s)",
            utc_hms(since)
        );
        rc.live.event(format!(
            "{why}; the cells left are labelled without being run"
        ));
        with(rc, |f| f.gone = Some(why.clone()));
        Waited::Gone { why }
    };
    with(rc, |f| f.outages.push(entry));
    waited
}

/// The server does not answer after `cell` failed: wait for it up to the
/// grace and rewrite the cell's reason to name the outage. True when it
/// came back.
async fn outage(rc: &RunCtx, cell: &mut CellResult) -> bool {
    let during = format!(
        "C={} ctx={}",
        cell.concurrency,
        format_context(cell.context_tokens)
    );
    let waited = wait_for_return(rc, during, cell.ext.status_reason.clone()).await;
    let mark_failed = |cell: &mut CellResult, reason: String| {
        cell.ext.status = CellStatus::Error;
        cell.aggregate_tps = None;
        cell.per_request_avg_tps = None;
        cell.ext.status_reason = reason;
    };
    match waited {
        Waited::Back { since, down_for } => {
            let reason = format!(
                "server down at {} UTC (back after {down_for:.0} s): {}",
                utc_hms(since),
                cell.ext.status_reason
            );
            mark_failed(cell, reason);
            true
        }
        // the cell keeps its own failure
        Waited::Stopped => {
            let reason = cell.ext.status_reason.clone();
            mark_failed(cell, reason);
            false
        }
        Waited::Gone { why } => {
            let reason = format!("{why}: {}", cell.ext.status_reason);
            mark_failed(cell, reason);
            false
        }
    }
}

/// The first generation request of the run could not connect although
/// discovery could: the server went away in between (or is restarting).
/// Wait for it as for a failed cell. True when it answers again (the caller
/// retries); false when it is gone (every cell is then labelled with
/// [`gone`]) or the user stopped the run.
pub(crate) async fn down_before_cells(rc: &RunCtx, evidence: &str) -> bool {
    if answers(rc).await {
        return true;
    }
    let waited = wait_for_return(rc, "the first request".to_string(), evidence.to_string()).await;
    matches!(waited, Waited::Back { .. })
}

/// Compare a fresh scrape with the one after the cell before. After an
/// outage the server is taken as restarted whatever its counters say (a
/// process that stopped answering for seconds and then answers again was
/// most likely started anew), without a second entry for the same restart.
async fn restart_check(rc: &RunCtx, after_outage: bool) {
    let snap = if rc.metrics {
        rc.scraper.scrape_once().await.map(|s| s.snap)
    } else {
        None
    };
    let version = ldb_client::discovery::engine_version(&rc.http, rc.engine).await;
    let last_version = with(rc, |f| f.version.take());
    let version_change = match (&last_version, &version) {
        (Some(a), Some(b)) if a != b => Some(format!("the engine version changed from {a} to {b}")),
        _ => None,
    };
    let last = with(rc, |f| f.last.take());
    let evidence = if after_outage {
        let mut e = "the server stopped answering and came back".to_string();
        if let (Some(a), Some(b)) = (&last, &snap)
            && let Some(more) = a.restart_evidence(b)
        {
            e.push_str("; ");
            e.push_str(&more);
        }
        Some(e)
    } else {
        match (&last, &snap) {
            (Some(a), Some(b)) => a.restart_evidence(b),
            _ => None,
        }
    };
    // A new version is a new process even when its counters say nothing
    // (an engine without a start-time metric, or `/metrics` off).
    let evidence = match (evidence, version_change) {
        (Some(e), Some(v)) => Some(format!("{e}; {v}")),
        (e, v) => e.or(v),
    };
    if let Some(e) = evidence {
        rc.live.event(format!(
            "server restart: {e}; counter deltas across it are not used"
        ));
        with(rc, |f| {
            f.restarts.push(ServerRestart {
                at_unix: unix_now(),
                evidence: e,
            });
        });
    }
    // A failed scrape or version read keeps the older reading to compare
    // with next time.
    with(rc, |f| {
        f.last = snap.or(last);
        f.version = version.or(last_version);
    });
}

/// A cell the run did not send because the server is gone.
pub(crate) fn gone_cell(c: u32, x: u64, mode: DecodeMode, why: &str) -> CellResult {
    CellResult::skipped(c, x, mode, CellStatus::Error, why.to_string())
}
