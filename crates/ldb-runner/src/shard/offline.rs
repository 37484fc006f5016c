//! Offline shards (`--start-at`): no coordinator. Every shard plans the same
//! run from the same flags and server, and runs its share of each sustained
//! cell in a fixed slot of a time grid from the start time: streams start at
//! the slot's start, the window is `[start + ramp, start + ramp + D]`, the
//! streams stop at its end and the slot ends `SLOT_TAIL_S` later. No shard
//! sees the others, so a fixed ramp replaces readiness. `merge` then builds
//! each cell from every shard's requests (docs/shards.md).

use std::time::Duration;

use ldb_core::document::{Methodology, MethodologyFacts};
use ldb_core::engine::Engine;
use ldb_core::gaps::GapHistogram;
use ldb_core::result::CellResult;
use ldb_core::shard::{share, uncertainty_bound, windows_differ};

use super::record::{RECORD_VERSION, ShardRecordFile, note_host_clock, write_record};
use super::wire::ShardCellData;
use crate::assemble::{CellInputs, assemble};
use crate::cell::decode_body;
use crate::pool::StreamPool;
use crate::run::{RunError, RunHooks};

/// Seconds of each slot after the window: the streams stop, the server
/// drains, and the next slot starts clean on every shard.
pub const SLOT_TAIL_S: f64 = 5.0;

/// An offline shard.
#[derive(Debug, Clone)]
pub struct OfflineSettings {
    /// `--shards`.
    pub shards: u32,
    /// `--shard-index`.
    pub index: u32,
    /// `--start-at`, Unix seconds.
    pub start_at: f64,
    /// `--ramp-seconds`.
    pub ramp_seconds: f64,
    /// Digest of the benchmark flags.
    pub flags_digest: String,
    /// Where the record goes.
    pub record_path: std::path::PathBuf,
}

/// Why an offline shard stopped.
#[derive(Debug)]
pub enum OfflineError {
    /// Discovery or the server failed.
    Run(RunError),
    /// The record could not be written.
    Output(String),
}

/// Run this shard's share of every planned sustained cell on the grid,
/// saving the record after each cell.
pub async fn run_offline(
    cfg: crate::RunConfig,
    o: &OfflineSettings,
    hooks: RunHooks,
) -> Result<ShardRecordFile, OfflineError> {
    let (rc, disc, kv) = crate::run::start(cfg, &hooks, super::CellExecutor::Local)
        .await
        .map_err(OfflineError::Run)?;
    let plan = crate::plan::plan(&rc.cfg, crate::run::limits(&disc, &kv));
    let prompts = crate::run::sized_prompts(&rc, &disc, &plan).await;
    rc.scraper.stop();
    let mut md = crate::startup::metadata(&rc.cfg, &disc, &kv, 0);
    crate::startup::record_prompts(&mut md, &prompts);
    let mut rec = ShardRecordFile {
        shard_record_version: RECORD_VERSION,
        mode: "offline".into(),
        shards: o.shards,
        shard_index: o.index,
        flags_digest: o.flags_digest.clone(),
        start_at: Some(o.start_at),
        model: disc.model.clone(),
        engine: disc.engine.as_str().into(),
        ended: "running".into(),
        max_error_rate: rc.cfg.timing.max_error_rate,
        ignore_eos: !rc.cfg.matrix.respect_eos,
        metadata: Some(md),
        cells: Vec::new(),
        host_clock: None,
    };
    // The merge cannot see a host clock that is off (the windows agree by
    // construction): record what the kernel says of it, now and per cell.
    note_host_clock(&mut rec);
    let slot = o.ramp_seconds + rc.cfg.matrix.duration + SLOT_TAIL_S;
    for (k, cell) in plan.cells_to_measure().enumerate() {
        if rc.controls.stop.is_cancelled() {
            break;
        }
        let begin = o.start_at + k as f64 * slot;
        let now = rc.clock.unix(rc.clock.now());
        if now > begin {
            rc.live.event(format!(
                "offline shard: slot {k} began {:.1} s ago; its cell is not run (start later)",
                now - begin
            ));
            continue;
        }
        tokio::time::sleep(Duration::from_secs_f64(begin - now)).await;
        let spec = crate::cell::CellSpec {
            concurrency: cell.concurrency,
            context: cell.context,
            messages: prompts.messages(cell.context, &format!("ctx{}", cell.context)),
            duration: rc.cfg.matrix.duration,
            auto_stop: None,
            record_prefill: false,
            probe: false,
        };
        let mine = share(cell.concurrency, o.shards, o.index);
        let body = decode_body(&rc, &spec);
        let skip = rc.controls.new_skip();
        let mut pool = StreamPool::launch(&rc, vec![body], mine, 0, &skip);
        let origin = rc.clock.unix(0.0);
        let (ws, we) = (
            begin + o.ramp_seconds,
            begin + o.ramp_seconds + rc.cfg.matrix.duration,
        );
        pool.window.close(we - origin);
        pool.window.open(ws - origin);
        let left = (we - rc.clock.unix(rc.clock.now())).max(0.0);
        tokio::select! {
            _ = skip.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs_f64(left)) => {}
        }
        pool.cancel();
        pool.join(|| {}).await;
        rc.live.event(format!(
            "offline shard: cell C={} ctx={} done ({mine} streams)",
            cell.concurrency, cell.context
        ));
        rec.cells.push(ShardCellData {
            cell: k as u64,
            total_concurrency: cell.concurrency,
            concurrency: mine,
            context: cell.context,
            window_unix: Some((ws, we)),
            origin_unix: origin,
            outcomes: pool.outcomes.iter().map(Into::into).collect(),
            gaps: pool.counters.gaps.snapshot(),
            ..ShardCellData::default()
        });
        note_host_clock(&mut rec);
        write_record(&o.record_path, &rec)
            .map_err(|e| OfflineError::Output(format!("{}: {e}", o.record_path.display())))?;
    }
    rec.ended = "finished".into();
    write_record(&o.record_path, &rec)
        .map_err(|e| OfflineError::Output(format!("{}: {e}", o.record_path.display())))?;
    Ok(rec)
}

/// Combine offline shards' records cell by cell, from their requests: every
/// shard 0..N−1 once, the same flags, and each cell's windows within 0.05 %
/// of its length (`ldb_core::shard::uncertainty_bound`). Err: why not.
pub fn merge_records(recs: &[ShardRecordFile]) -> Result<Vec<CellResult>, String> {
    let first = recs.first().ok_or("no shard record given")?;
    let n = first.shards;
    let mut by_index: Vec<Option<&ShardRecordFile>> = vec![None; n as usize];
    for r in recs {
        if r.mode != "offline" {
            return Err(format!(
                "shard {} is a {} record; merge reads offline shards (--start-at)",
                r.shard_index, r.mode
            ));
        }
        if r.shards != n || r.flags_digest != first.flags_digest {
            return Err(format!(
                "shard {} ran other flags or another --shards than shard {}",
                r.shard_index, first.shard_index
            ));
        }
        match by_index.get_mut(r.shard_index as usize) {
            Some(slot @ None) => *slot = Some(r),
            Some(Some(_)) => return Err(format!("shard {} given twice", r.shard_index)),
            None => return Err(format!("shard index {} ≥ --shards {n}", r.shard_index)),
        }
    }
    let all: Vec<&ShardRecordFile> = by_index
        .iter()
        .enumerate()
        .map(|(i, r)| r.ok_or(format!("shard {i} of {n} is missing")))
        .collect::<Result<_, _>>()?;
    let cells = all.iter().map(|r| r.cells.len()).min().unwrap_or(0);
    (0..cells).map(|k| merge_cell(&all, k)).collect()
}

/// The merged result document: shard 0's metadata, the merged cells, the
/// methodology texts of a sustained run.
pub fn merged_document(
    recs: &[ShardRecordFile],
) -> Result<ldb_core::document::ResultDocument, String> {
    let cells = merge_records(recs)?;
    let zero = recs
        .iter()
        .find(|r| r.shard_index == 0)
        .ok_or("shard 0 is missing")?;
    let mut md = zero.metadata.clone().unwrap_or_default();
    md.merge_clocks = Some(merge_clocks(recs, &cells));
    md.run_status = Some(ldb_core::result::RunStatus::Complete);
    md.timestamp = chrono::Local::now()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string();
    let spec_present = cells.iter().any(|c| c.spec.steps_per_s > 0.0);
    // Only the decode note is present: the merge holds no prefill rows or
    // burst cells (and, as before, no window_auto_stop note).
    let methodology = Methodology::of_run(&MethodologyFacts {
        prefill_mode: md.prefill_mode,
        sustained_present: !cells.is_empty(),
        spec_present,
        ..MethodologyFacts::default()
    });
    Ok(ldb_core::document::ResultDocument {
        metadata: md,
        results: cells,
        methodology,
        ..ldb_core::document::ResultDocument::default()
    })
}

/// Every host's clock state, judged against the shortest window's tolerance.
fn merge_clocks(
    recs: &[ShardRecordFile],
    cells: &[CellResult],
) -> ldb_core::host_clock::MergeClocks {
    let shortest = cells
        .iter()
        .filter_map(|c| Some(c.ext.window_end_unix? - c.ext.window_start_unix?))
        .fold(f64::INFINITY, f64::min);
    let mut hosts: Vec<_> = recs
        .iter()
        .map(|r| ldb_core::host_clock::ShardHostClock {
            shard_index: r.shard_index,
            clock: r.host_clock.clone(),
        })
        .collect();
    hosts.sort_by_key(|h| h.shard_index);
    let tolerance = if shortest.is_finite() {
        uncertainty_bound(shortest)
    } else {
        0.0
    };
    ldb_core::host_clock::judge(hosts, tolerance)
}

/// One cell from every shard's part `k`, on shard 0's clock.
fn merge_cell(all: &[&ShardRecordFile], k: usize) -> Result<CellResult, String> {
    let parts: Vec<&ShardCellData> = all.iter().map(|r| &r.cells[k]).collect();
    let base = parts[0];
    let w0 = base.window_unix.ok_or("shard 0 has no window")?;
    let tolerance = uncertainty_bound(w0.1 - w0.0);
    for (i, p) in parts.iter().enumerate() {
        if (p.total_concurrency, p.context) != (base.total_concurrency, base.context) {
            return Err(format!("cell {k}: shard {i} ran another cell"));
        }
        let w = p
            .window_unix
            .ok_or(format!("cell {k}: shard {i} has no window"))?;
        if let Some(why) = windows_differ(w0, w, tolerance) {
            return Err(format!(
                "cell {k} (C={} ctx={}): shard {i} and shard 0 measured different windows: {why}",
                base.total_concurrency, base.context
            ));
        }
    }
    let origin = base.origin_unix;
    let gaps = GapHistogram::default();
    let mut outcomes = Vec::new();
    for p in &parts {
        gaps.absorb(&p.gaps);
        let dt = p.origin_unix - origin;
        outcomes.extend(p.outcomes.iter().cloned().map(|o| o.into_outcome(dt)));
    }
    let mut cell = assemble(CellInputs {
        concurrency: base.total_concurrency,
        context: base.context,
        engine: Engine::default(),
        outcomes: &outcomes,
        window_start: w0.0 - origin,
        window_end: w0.1 - origin,
        start_scrape: None,
        end_scrape: None,
        confirm_scrape: None,
        sched: &[],
        producing_samples: &[],
        readiness_failed: false,
        accept_len_ref: 0.0,
        hw: None,
        gaps: gaps.stats(),
        ignore_eos: all[0].ignore_eos,
        max_error_rate: all[0].max_error_rate,
    });
    cell.ext.window_start_unix = Some(w0.0);
    cell.ext.window_end_unix = Some(w0.1);
    cell.ext.shards = parts
        .iter()
        .enumerate()
        .map(|(i, p)| ldb_core::shard::ShardCellRecord {
            index: i as u32,
            concurrency: p.concurrency,
            delivered_tokens: p.outcomes.iter().map(|o| o.track.window_tokens).sum(),
            requests: p.outcomes.len() as u64,
            ..ldb_core::shard::ShardCellRecord::default()
        })
        .collect();
    Ok(cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::wire::WireOutcome;
    use ldb_core::chunk::Channel;
    use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};

    /// A request that streamed one token every 0.1 s from `t0` to `t1` (its
    /// run clock), counted inside `window`.
    fn outcome(t0: f64, t1: f64, window: (f64, f64)) -> WireOutcome {
        let w = WindowBounds {
            start: Some(window.0),
            end: Some(window.1),
        };
        let mut track = RequestTrack::new(t0 - 0.05);
        let mut t = t0;
        let mut n = 0;
        while t <= t1 {
            n += 1;
            let ev = ChunkEvent {
                t,
                in_stream: true,
                channel: Channel::Content,
                completion_tokens: Some(n),
                ..ChunkEvent::default()
            };
            track.on_chunk(ev, w);
            t += 0.1;
        }
        track.settle(w);
        WireOutcome {
            track,
            request_id: None,
            cancelled: true,
            timings: None,
            done_at: None,
            cached_tokens: None,
        }
    }

    /// Shard `index` of 2 whose clock origin is `origin` (Unix s); window
    /// [1000, 1010] Unix, its one stream streaming from 995 to 1012.
    fn record(index: u32, origin: f64) -> ShardRecordFile {
        let w = (1000.0 - origin, 1010.0 - origin);
        ShardRecordFile {
            shard_record_version: RECORD_VERSION,
            mode: "offline".into(),
            shards: 2,
            shard_index: index,
            flags_digest: "d".into(),
            max_error_rate: 0.02,
            cells: vec![ShardCellData {
                total_concurrency: 2,
                concurrency: 1,
                window_unix: Some((1000.0, 1010.0)),
                origin_unix: origin,
                outcomes: vec![outcome(995.0 - origin, 1012.0 - origin, w)],
                ..ShardCellData::default()
            }],
            ..ShardRecordFile::default()
        }
    }

    #[test]
    fn two_shards_on_different_origins_merge_into_one_windows_count() {
        let cells = merge_records(&[record(0, 900.0), record(1, 950.0)]).expect("merged");
        let c = &cells[0];
        // 10 tokens/s per stream inside [1000, 1010]: 100 (or 101 with both
        // edges) per stream, 2 streams.
        assert!(
            (200..=202).contains(&c.client_output_tokens),
            "{}",
            c.client_output_tokens
        );
        assert_eq!(c.request_samples.len(), 2);
        let starts: Vec<f64> = c.request_samples.iter().map(|s| s.start_s).collect();
        assert!(
            (starts[0] - starts[1]).abs() < 1e-6,
            "{starts:?}: one clock"
        );
        assert_eq!(c.ext.shards.len(), 2);
    }

    #[test]
    fn a_missing_duplicate_or_foreign_shard_is_refused() {
        let why = merge_records(&[record(0, 900.0)]).expect_err("missing");
        assert!(why.contains("shard 1 of 2 is missing"), "{why}");
        let why = merge_records(&[record(0, 900.0), record(0, 900.0)]).expect_err("twice");
        assert!(why.contains("given twice"), "{why}");
        let mut other = record(1, 900.0);
        other.flags_digest = "e".into();
        let why = merge_records(&[record(0, 900.0), other]).expect_err("flags");
        assert!(why.contains("other flags"), "{why}");
        let mut late = record(1, 900.0);
        late.cells[0].window_unix = Some((1000.2, 1010.2));
        let why = merge_records(&[record(0, 900.0), late]).expect_err("window");
        assert!(why.contains("different windows"), "{why}");
    }

    /// Issue 35: the windows in the records agree by construction (each
    /// shard computed them from `--start-at` on its own clock), so the merge
    /// could never catch a host clock that was off. Each record carries its
    /// host's kernel clock state; the merged file lists them and flags hosts
    /// that were not shown synchronised within the windows' tolerance.
    #[test]
    fn the_merged_file_records_each_hosts_clock_and_flags_unsynchronised_ones() {
        use ldb_core::host_clock::HostClock;
        let clock = |synchronised: bool, est_ms: f64| HostClock {
            source: "adjtimex".into(),
            synchronised,
            est_error_s: est_ms / 1e3,
            max_error_s: 0.02,
            read_error: String::new(),
        };
        let with = |i: u32, c: Option<HostClock>| ShardRecordFile {
            host_clock: c,
            ..record(i, 900.0)
        };
        let doc = merged_document(&[
            with(0, Some(clock(true, 0.5))),
            with(1, Some(clock(true, 1.0))),
        ])
        .expect("merged");
        let m = doc.metadata.merge_clocks.expect("merge_clocks");
        // A 10 s window: 0.05 % is 5 ms.
        assert!((m.tolerance_s - 0.005).abs() < 1e-12, "{m:?}");
        assert!(m.synchronised, "{m:?}");
        assert_eq!(m.hosts.len(), 2);
        let doc = merged_document(&[
            with(0, Some(clock(true, 0.5))),
            with(1, Some(clock(false, 0.5))),
        ])
        .expect("merged all the same");
        let m = doc.metadata.merge_clocks.expect("merge_clocks");
        assert!(!m.synchronised);
        assert!(
            m.problem.contains("shard 1: host clock not synchronised"),
            "{}",
            m.problem
        );
        // A record from before the clock state: unknown, so flagged.
        let doc =
            merged_document(&[with(0, Some(clock(true, 0.5))), with(1, None)]).expect("merged");
        assert!(
            !doc.metadata
                .merge_clocks
                .expect("merge_clocks")
                .synchronised
        );
    }

    #[test]
    fn a_shard_reads_its_hosts_clock_state() {
        let mut rec = record(0, 900.0);
        crate::shard::record::note_host_clock(&mut rec);
        let c = rec.host_clock.expect("read");
        if cfg!(target_os = "linux") {
            assert_eq!(c.source, "adjtimex", "{c:?}");
            assert!(c.est_error_s >= 0.0 && c.max_error_s >= 0.0);
        }
    }
}
