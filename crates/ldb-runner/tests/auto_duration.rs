//! `--duration auto` against the simulator: a steady server's cell closes
//! well before its maximum at the value a full-length cell measures; a
//! server whose step time drifts runs on to the maximum. Windows are scaled
//! down (maximum 8 s) to keep CI short.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, cell, config, start, within};
use ldb_core::autostop::{AutoStop, StoppedBy};
use ldb_core::result::{CellResult, CellStatus};

const MAX_S: f64 = 8.0;

fn auto(target_pct: f64, min_s: f64) -> Option<AutoStop> {
    Some(AutoStop {
        target_rel: target_pct / 100.0,
        min_s,
    })
}

fn interval(r: &CellResult) -> [f64; 2] {
    r.ext.rate_ci95.expect("rate_ci95 recorded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_server_closes_early_at_the_full_length_value() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    // C=4: 4 tokens per step of 10.8 ms.
    let truth = 4.0 / (0.010 + 0.0002 * 4.0);
    // A ±2 % target: the simulator closes at ±0.7 % after 3 s on an idle
    // machine; the margin is for a loaded one.
    let mut early_cfg = config(&sim, &[4], &[0], MAX_S);
    early_cfg.matrix.auto_stop = auto(2.0, 3.0);
    let (doc, _) = bench(early_cfg, Arc::default()).await;
    let early = cell(&doc, 4, 0).clone();
    // The full-length cell: the same rule held open to the maximum, so it
    // records its own interval.
    let mut full_cfg = config(&sim, &[4], &[0], MAX_S);
    full_cfg.matrix.auto_stop = auto(1.0, MAX_S);
    let (full_doc, _) = bench(full_cfg, Arc::default()).await;
    let full = cell(&full_doc, 4, 0).clone();
    sim.shutdown().await;

    assert_eq!(
        early.ext.status,
        CellStatus::Ok,
        "{}",
        early.ext.status_reason
    );
    assert_eq!(early.ext.stopped_by, Some(StoppedBy::Ci));
    assert_eq!(early.ext.rate_ci_method.as_deref(), Some("batch_means"));
    assert!(
        early.measurement_seconds >= 3.0 && early.measurement_seconds < 0.75 * MAX_S,
        "closed after {:.2} s",
        early.measurement_seconds
    );
    let tps = early.aggregate_tps.expect("value");
    let [lo, hi] = interval(&early);
    assert!(lo <= tps && tps <= hi, "{tps} outside its own [{lo}, {hi}]");
    assert!(
        (hi - lo) / 2.0 <= 0.02 * tps + 0.01,
        "[{lo}, {hi}] wider than ±2 %"
    );
    assert!(early.ext.rate_drift_pct.is_some_and(|d| d.abs() <= 2.0));
    assert!(within(tps, truth, 0.02), "{tps:.1} vs truth {truth:.1}");

    assert_eq!(full.ext.stopped_by, Some(StoppedBy::MaxDuration));
    assert!((full.measurement_seconds - MAX_S).abs() < 0.5);
    let full_tps = full.aggregate_tps.expect("value");
    let [flo, fhi] = interval(&full);
    // Within the full-length cell's interval (which a busy 2-core machine
    // may make very narrow: never held to closer than the 1 % target).
    let slack = ((fhi - flo) / 2.0).max(0.01 * full_tps);
    assert!(
        (tps - full_tps).abs() <= slack,
        "early {tps:.1} vs full {full_tps:.1} [{flo:.1}, {fhi:.1}]"
    );
    // The maximum stays the run's setting; the rule is in the metadata.
    assert_eq!(doc.metadata.duration_per_test, MAX_S);
    let rule = doc.metadata.duration_auto.as_ref().expect("duration_auto");
    assert_eq!((rule.target_ci_pct, rule.min_duration), (2.0, 3.0));
    assert!(doc.methodology.window_auto_stop.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifting_server_runs_to_the_maximum() {
    let _serial = SERIAL.lock().await;
    // The step time grows 10 % over 15 s: the 10 % over 30 s on a
    // window scaled from 30 s to 8 s, at twice the rate so that the drift
    // inside a 5-8 s window (about 3 %) stays well clear of the 1 % target
    // on a loaded machine. The exact 10 %-over-30 s case is the pure test
    // `a_rate_drifting_ten_percent_over_thirty_seconds_does_not_close` in
    // ldb-core.
    let sim = start(FLAT, |s| s.step_time.drift_per_s = 0.1 / 15.0).await;
    let mut cfg = config(&sim, &[4], &[0], MAX_S);
    cfg.matrix.auto_stop = auto(1.0, 5.0);
    let (doc, _) = bench(cfg, Arc::default()).await;
    sim.shutdown().await;
    let r = cell(&doc, 4, 0);
    assert_eq!(r.ext.status, CellStatus::Ok, "{}", r.ext.status_reason);
    assert_eq!(
        r.ext.stopped_by,
        Some(StoppedBy::MaxDuration),
        "closed after {:.2} s, drift {:?} %",
        r.measurement_seconds,
        r.ext.rate_drift_pct
    );
    assert!((r.measurement_seconds - MAX_S).abs() < 0.5);
    let drift = r.ext.rate_drift_pct.expect("drift recorded");
    assert!(drift < -2.0, "drift {drift} %");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_windows_write_no_auto_keys() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let (doc, _) = bench(config(&sim, &[1], &[0], 1.0), Arc::default()).await;
    sim.shutdown().await;
    let r = cell(&doc, 1, 0);
    assert_eq!(r.ext.stopped_by, None);
    assert_eq!(r.ext.rate_ci95, None);
    let json = r.to_json();
    for key in [
        "stopped_by",
        "rate_ci95",
        "rate_ci_method",
        "rate_drift_pct",
    ] {
        assert!(json.get(key).is_none(), "{key} written for a fixed window");
    }
    assert!(doc.metadata.duration_auto.is_none());
    assert!(doc.methodology.window_auto_stop.is_none());
}
