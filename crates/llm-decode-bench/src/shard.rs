//! `--shards N`: which shard this process is, checked before anything is
//! sent (index, secret, coordinator, port), and the follower's whole run
//! (docs/shards.md). The leader runs the usual benchmark with its cells
//! sharded (`ldb_runner::shard`).

use std::sync::Arc;
use std::time::Duration;

use ldb_runner::RunConfig;
use ldb_runner::shard::record::{RECORD_VERSION, ShardRecordFile, record_path, write_record};
use ldb_runner::shard::{FollowEnd, FollowerSettings, LeaderSettings, ShardLeader, auth};

use crate::cli::BenchArgs;
use crate::error::{AppError, exit};

/// The coordinator's port when `--coordinator` names none.
pub const DEFAULT_PORT: u16 = 29517;
/// Test only: seconds added to a follower's clock (docs/shards.md).
const TEST_CLOCK_OFFSET_ENV: &str = "LDB_TEST_SHARD_CLOCK_OFFSET_S";

/// What this process is among the shards (lowered from the flags).
pub(crate) enum ShardPlan {
    /// No `--shards` (or 1), or `--dry-run`.
    Alone,
    /// Shard 0: binds the coordinator port and waits for the followers.
    Leader {
        /// What it enforces.
        settings: LeaderSettings,
        /// `HOST:PORT` (checked to resolve).
        coordinator: String,
        /// Where to listen: `--coordinator-listen`, else `coordinator`.
        listen: String,
    },
    /// A follower, not yet joined.
    Follower(FollowerSettings),
    /// `--start-at`: an offline shard.
    Offline(Offline),
}

/// An offline shard's identity (`--start-at`).
pub(crate) struct Offline {
    /// Shard count.
    pub shards: u32,
    /// This shard.
    pub index: u32,
    /// Grid origin, Unix seconds.
    pub start_at: f64,
    /// Flag digest.
    pub digest: String,
    /// Seconds from the streams' start to the window.
    pub ramp_seconds: f64,
}

/// Flags that may differ between shards: where each writes, how it shows
/// progress, and the shard's own identity and secret.
const PER_SHARD_FLAGS: &[&str] = &[
    "shard-index",
    "coordinator",
    "coordinator-listen",
    "shard-secret",
    "shard-join-timeout",
    "output",
    "html",
    "requests-jsonl",
    "display-mode",
    "metrics-listen",
    "api-key",
];

/// Check the shard flags (exit 2 on a mistake); nothing is sent here.
pub(crate) fn lower(a: &BenchArgs, cfg: &RunConfig) -> Result<ShardPlan, AppError> {
    let s = &a.shard;
    let shards = match s.shards {
        None | Some(1) => return Ok(ShardPlan::Alone),
        Some(_) if a.dry_run => return Ok(ShardPlan::Alone),
        Some(0) => return Err(AppError::config("invalid --shards 0: use 1 or more")),
        Some(n) => n,
    };
    let index = shard_index(s.shard_index)?;
    if index >= shards {
        return Err(AppError::Config(format!(
            "invalid --shard-index {index}: must be below --shards {shards} (0 to {})",
            shards - 1
        )));
    }
    unsupported(a, cfg)?;
    let digest = auth::flags_digest(&digest_flags(&cfg.output.effective_config));
    if let Some(t) = s.start_at {
        if !t.is_finite() || t <= 0.0 {
            return Err(AppError::config(format!(
                "invalid --start-at {t}: a Unix time"
            )));
        }
        if !(s.ramp_seconds.is_finite() && s.ramp_seconds >= 0.0) {
            return Err(AppError::config("invalid --ramp-seconds: seconds ≥ 0"));
        }
        return Ok(ShardPlan::Offline(Offline {
            shards,
            index,
            start_at: t,
            digest,
            ramp_seconds: s.ramp_seconds,
        }));
    }
    let secret = s.shard_secret.clone().filter(|x| !x.is_empty()).ok_or_else(|| {
        AppError::config(
            "--shards needs a join secret shared by every shard: --shard-secret or LDB_SHARD_SECRET",
        )
    })?;
    if let Some(why) = ldb_runner::shard::secret_weakness(&secret) {
        return Err(AppError::Config(why));
    }
    let stop_on_loss = match s.on_shard_loss.as_str() {
        "continue" => false,
        "stop" => true,
        x => {
            return Err(AppError::config(format!(
                "invalid --on-shard-loss {x:?}: use continue or stop"
            )));
        }
    };
    if !(s.shard_join_timeout.is_finite() && s.shard_join_timeout > 0.0) {
        return Err(AppError::config(
            "invalid --shard-join-timeout: seconds > 0",
        ));
    }
    let join_wait = Duration::from_secs_f64(s.shard_join_timeout);
    let coordinator = coordinator(s.coordinator.as_deref())?;
    if index == 0 {
        let listen = match s.coordinator_listen.as_deref() {
            Some(l) => with_port(l, "--coordinator-listen")?,
            None => coordinator.clone(),
        };
        return Ok(ShardPlan::Leader {
            listen,
            settings: LeaderSettings {
                shards,
                secret,
                flags_digest: digest,
                join_wait,
                stop_on_loss,
            },
            coordinator,
        });
    }
    Ok(ShardPlan::Follower(FollowerSettings {
        coordinator,
        shards,
        index,
        secret,
        flags_digest: digest,
        join_wait,
        clock_offset_s: std::env::var(TEST_CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
    }))
}

/// Before any request: the coordinator must resolve; the leader binds its
/// port (in use: exit 2) and waits for every follower (exit 3 if one is
/// missing), and is returned.
pub(crate) async fn prepare(plan: &ShardPlan) -> Result<Option<Arc<ShardLeader>>, AppError> {
    match plan {
        ShardPlan::Follower(f) => resolve(&f.coordinator).await.map(|()| None),
        ShardPlan::Leader {
            settings,
            coordinator,
            listen,
        } => {
            resolve(coordinator).await?;
            // Only the address asked for: the port is not opened on every
            // interface of the host (docs/security.md).
            let leader = ShardLeader::bind(listen, settings.clone())
                .await
                .map_err(|e| {
                    AppError::Config(format!(
                        "cannot listen on the coordinator port {listen}: {e} (is another leader \
                         running? if that name is not this host's own address, give \
                         --coordinator-listen)"
                    ))
                })?;
            let at = leader.local_addr();
            let host = listen.rsplit_once(':').map_or("", |(h, _)| h);
            if at.ip().is_loopback()
                && host.parse::<std::net::IpAddr>().is_err()
                && host != "localhost"
            {
                // Debian's /etc/hosts maps the host's own name to 127.0.1.1.
                eprintln!(
                    "note: {host} resolves to the loopback address {} here: followers on other \
                     hosts cannot reach it (give --coordinator-listen with this host's address)",
                    at.ip()
                );
            }
            eprintln!(
                "shard 0 (leader): waiting for {} follower(s) on {at}",
                settings.shards - 1
            );
            leader.wait_for_members().await.map_err(AppError::Server)?;
            Ok(Some(Arc::new(leader)))
        }
        ShardPlan::Alone | ShardPlan::Offline(_) => Ok(None),
    }
}

/// A follower's or an offline shard's whole run, in place of the
/// benchmark's (None: this process runs the benchmark).
pub(crate) async fn run_instead(
    plan: &ShardPlan,
    cfg: &RunConfig,
) -> Option<Result<i32, AppError>> {
    match plan {
        ShardPlan::Follower(f) => Some(follow(f.clone(), cfg).await),
        ShardPlan::Offline(o) => Some(offline(o, cfg.clone()).await),
        ShardPlan::Alone | ShardPlan::Leader { .. } => None,
    }
}

/// `--shard-index`, else `JOB_COMPLETION_INDEX` (Kubernetes Indexed Job),
/// else `SLURM_PROCID` (Slurm).
fn shard_index(flag: Option<u32>) -> Result<u32, AppError> {
    if let Some(i) = flag {
        return Ok(i);
    }
    for var in ["JOB_COMPLETION_INDEX", "SLURM_PROCID"] {
        if let Ok(v) = std::env::var(var) {
            return v
                .trim()
                .parse()
                .map_err(|_| AppError::Config(format!("invalid ${var} {v:?}: not a shard index")));
        }
    }
    Err(AppError::config(
        "--shards needs --shard-index (or $JOB_COMPLETION_INDEX, $SLURM_PROCID)",
    ))
}

/// Why a replay cannot run over these shards: on offline shards there is
/// no shared start, no clock offsets and no leader to deal conversations
/// or fold their turns (a coordinator runs traces and sessions).
fn replay_refusal(cfg: &RunConfig, offline: bool) -> Option<&'static str> {
    use ldb_runner::replay::ReplayConfig;
    if !offline {
        return None;
    }
    match cfg.replay.as_ref()? {
        ReplayConfig::Sessions(_) => Some(
            "--sessions with --start-at (an offline shard has no leader to deal sessions; use a coordinator)",
        ),
        ReplayConfig::Trace(t) if t.sessions => Some(
            "--trace-sessions with --start-at (an offline shard has no leader to deal sessions; use a coordinator)",
        ),
        ReplayConfig::Trace(_) => Some(
            "--trace with --start-at (an offline shard cannot share a schedule; use a coordinator)",
        ),
    }
}

/// The modes a sharded run does not split yet.
fn unsupported(a: &BenchArgs, cfg: &RunConfig) -> Result<(), AppError> {
    let why = if a.sim.is_some() {
        Some(
            "--sim (each shard would measure its own simulator: start `llm-decode-bench sim` once and pass --host)",
        )
    } else if cfg.open_loop.is_on() && a.shard.start_at.is_some() {
        Some(
            "--request-rate with --start-at (an offline shard cannot share a schedule; use a coordinator)",
        )
    } else if let Some(why) = replay_refusal(cfg, a.shard.start_at.is_some()) {
        Some(why)
    } else if (cfg.matrix.request_count > 0 || cfg.burst.run_burst) && a.shard.start_at.is_some() {
        Some(
            "--request-count or --run-burst with --start-at (a batch has no fixed end; use a coordinator)",
        )
    } else if cfg.matrix.auto_stop.is_some() && a.shard.start_at.is_some() {
        Some("--duration auto with --start-at (offline shards close their windows on a fixed grid)")
    } else {
        None
    };
    if let Some(w) = why {
        return Err(AppError::Config(format!(
            "--shards does not support {w} yet"
        )));
    }
    // Each shard sends its part of an open-loop schedule or a trace with its
    // part of --max-in-flight (split like C): every shard needs one slot at
    // least (a part of 0 would mean no cap).
    let shards = u64::from(a.shard.shards.unwrap_or(1));
    if (cfg.open_loop.is_on() || cfg.replay.is_some())
        && cfg.open_loop.max_in_flight > 0
        && cfg.open_loop.max_in_flight < shards
    {
        return Err(AppError::Config(format!(
            "invalid --max-in-flight {}: below --shards {shards} (it is split over the shards, \
             and each needs a slot)",
            cfg.open_loop.max_in_flight
        )));
    }
    Ok(())
}

/// The benchmark flags every shard must share, as one JSON object (the
/// recorded effective configuration: presets resolved, secrets left out).
fn digest_flags(effective: &serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    let mut m = effective.clone();
    for k in PER_SHARD_FLAGS {
        m.remove(*k);
    }
    serde_json::Value::Object(m)
}

/// `--coordinator` with its default port, or the Slurm default (the job's
/// first host). Kubernetes has no default: shard 0's name needs the
/// Service's, so the manifests pass the flag.
fn coordinator(flag: Option<&str>) -> Result<String, AppError> {
    let given = match flag {
        Some(c) => c.to_string(),
        None => slurm_first_host().ok_or_else(|| {
            AppError::config("--shards needs --coordinator HOST:PORT (shard 0's address)")
        })?,
    };
    with_port(&given, "--coordinator")
}

/// `HOST:PORT` with the default port when none is given; an IPv6 address
/// in brackets (`[fd00::1]:29517`, `[::]`), or bare (`fd00::1`, default port).
fn with_port(given: &str, flag: &str) -> Result<String, AppError> {
    let bad = |p: &str| AppError::Config(format!("invalid {flag} {given:?}: bad port {p:?}"));
    if let Some(rest) = given.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((_, "")) => Ok(format!("{given}:{DEFAULT_PORT}")),
            Some((_, p)) => match p.strip_prefix(':') {
                Some(p) if p.parse::<u16>().is_ok() => Ok(given.to_string()),
                _ => Err(bad(p)),
            },
            None => Err(AppError::Config(format!(
                "invalid {flag} {given:?}: no closing ]"
            ))),
        };
    }
    if given.matches(':').count() > 1 {
        return Ok(format!("[{given}]:{DEFAULT_PORT}"));
    }
    match given.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => {
            p.parse::<u16>().map_err(|_| bad(p))?;
            Ok(given.to_string())
        }
        _ => Ok(format!("{given}:{DEFAULT_PORT}")),
    }
}

/// The first host of `SLURM_JOB_NODELIST`, expanded by `scontrol show
/// hostnames` when it is there (else a plain list's first name).
fn slurm_first_host() -> Option<String> {
    let list = std::env::var("SLURM_JOB_NODELIST").ok()?;
    let expanded = ldb_sys::child::command("scontrol")
        .args(["show", "hostnames", &list])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        });
    expanded.or_else(|| {
        (!list.contains('['))
            .then(|| list.split(',').next().map(str::to_string))
            .flatten()
    })
}

/// The coordinator must resolve (bounded: a hung resolver is an answer too).
async fn resolve(addr: &str) -> Result<(), AppError> {
    let found = tokio::time::timeout(Duration::from_secs(10), tokio::net::lookup_host(addr))
        .await
        .map(|r| r.map(Iterator::count));
    match found {
        Ok(Ok(n)) if n > 0 => Ok(()),
        Ok(Err(e)) => Err(AppError::Config(format!(
            "invalid --coordinator {addr}: cannot resolve it: {e}"
        ))),
        _ => Err(AppError::Config(format!(
            "invalid --coordinator {addr}: cannot resolve it"
        ))),
    }
}

/// A follower's run: join, follow, keep a record of every cell next to
/// `--output` (`out.shard-I.json`), and end with the documented code.
pub(crate) async fn follow(s: FollowerSettings, cfg: &RunConfig) -> Result<i32, AppError> {
    let most = cfg.matrix.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let http = ldb_client::Http::new(&cfg.target.base_url, cfg.target.api_key.clone(), most + 20)
        .map_err(|e| AppError::Config(format!("invalid --host: {e}")))?;
    // the leader checked that the server serves it; followers speak it too
    http.set_api(cfg.target.api);
    let path = record_path(&cfg.output.output, s.index);
    let mut rec = ShardRecordFile {
        shard_record_version: RECORD_VERSION,
        mode: "coordinated".into(),
        shards: s.shards,
        shard_index: s.index,
        flags_digest: s.flags_digest.clone(),
        ended: "running".into(),
        ..ShardRecordFile::default()
    };
    let mut save_error: Option<String> = None;
    let (end, cells) = ldb_runner::shard::follow(&s, http, cfg.timing.idle_timeout(), |cells| {
        let r = ShardRecordFile {
            cells: cells.to_vec(),
            ..rec.clone()
        };
        if let Err(e) = write_record(&path, &r) {
            save_error = Some(format!("{}: {e}", path.display()));
        }
    })
    .await;
    rec.cells = cells;
    rec.ended = match &end {
        FollowEnd::Finished => "finished",
        FollowEnd::LeaderLost(_) => "leader_lost",
        FollowEnd::Refused(_) => "refused",
        FollowEnd::Unreachable(_) => "unreachable",
    }
    .into();
    if matches!(end, FollowEnd::Finished | FollowEnd::LeaderLost(_)) {
        write_record(&path, &rec)
            .map_err(|e| AppError::Output(format!("{}: {e}", path.display())))?;
    }
    if let Some(e) = save_error {
        return Err(AppError::Output(e));
    }
    match end {
        FollowEnd::Finished => {
            eprintln!(
                "shard {}: the run is over; record saved to {}",
                s.index,
                path.display()
            );
            Ok(exit::OK)
        }
        FollowEnd::LeaderLost(why) => {
            eprintln!(
                "error: shard {}: the leader is lost ({why}); streams stopped, what was measured \
                 is saved to {}",
                s.index,
                path.display()
            );
            Ok(exit::SHARD_LOST)
        }
        FollowEnd::Refused(why) => Err(AppError::Config(format!(
            "the leader refused shard {}: {why}",
            s.index
        ))),
        FollowEnd::Unreachable(why) => Err(AppError::Server(why)),
    }
}

/// The leader's exit code when a follower was lost under `--on-shard-loss
/// stop` (the run was stopped for it, not by the user).
pub(crate) fn leader_exit(
    leader: Option<&ShardLeader>,
    doc: &ldb_core::document::ResultDocument,
) -> Option<i32> {
    let l = leader?;
    let lost = doc.results.iter().any(|c| !c.ext.shards_lost.is_empty())
        || doc.rate_results.iter().any(|r| !r.shards_lost.is_empty())
        || doc
            .session_results
            .iter()
            .any(|r| !r.shards_lost.is_empty());
    (l.settings().stop_on_loss && lost).then_some(exit::SHARD_LOST)
}

/// An offline shard's run (`--start-at`): its share of every cell on the
/// grid, its record next to `--output` (`out.shard-I.json`).
pub(crate) async fn offline(o: &Offline, cfg: RunConfig) -> Result<i32, AppError> {
    use ldb_runner::shard::offline::{OfflineError, OfflineSettings, run_offline};
    let settings = OfflineSettings {
        shards: o.shards,
        index: o.index,
        start_at: o.start_at,
        ramp_seconds: o.ramp_seconds,
        flags_digest: o.digest.clone(),
        record_path: record_path(&cfg.output.output, o.index),
    };
    let (live, _rx) = ldb_runner::Live::new();
    let hooks = ldb_runner::RunHooks {
        live: live.clone(),
        controls: Arc::default(),
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let printer = tokio::spawn(print_events(live));
    let r = run_offline(cfg, &settings, hooks).await;
    printer.abort();
    match r {
        Ok(rec) => {
            eprintln!(
                "offline shard {}: {} cells saved to {}",
                o.index,
                rec.cells.len(),
                settings.record_path.display()
            );
            Ok(exit::OK)
        }
        Err(OfflineError::Run(e)) => Err(crate::bench::run_error(e)),
        Err(OfflineError::Output(e)) => Err(AppError::Output(e)),
    }
}

/// The offline shard's event lines on stderr as they come.
async fn print_events(live: ldb_runner::Live) {
    let mut shown = 0;
    loop {
        let ev = live.events();
        for line in ev.iter().skip(shown) {
            eprintln!("{line}");
        }
        shown = ev.len();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_gets_the_default_port() {
        assert_eq!(coordinator(Some("lead")).ok(), Some("lead:29517".into()));
        assert_eq!(coordinator(Some("lead:9")).ok(), Some("lead:9".into()));
        assert!(coordinator(Some("lead:x")).is_err());
        assert_eq!(coordinator(Some("[::1]:9")).ok(), Some("[::1]:9".into()));
        assert_eq!(coordinator(Some("[::1]")).ok(), Some("[::1]:29517".into()));
        assert_eq!(
            coordinator(Some("fd00::1")).ok(),
            Some("[fd00::1]:29517".into())
        );
        assert!(coordinator(Some("[::1]:x")).is_err());
        assert!(coordinator(Some("[::1")).is_err());
    }

    #[test]
    fn per_shard_flags_do_not_change_the_digest() {
        let a = |extra: &[&str]| {
            let mut v: Vec<String> = ["llm-decode-bench", "--duration", "4"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            auth::flags_digest(&digest_flags(&crate::effective::from_argv(&v)))
        };
        assert_eq!(
            a(&["--shard-index", "1"]),
            a(&["--shard-index", "2", "--output", "x.json"])
        );
        assert_ne!(a(&[]), a(&["--max-tokens", "7"]));
    }
}
