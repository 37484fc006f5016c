use super::*;
use crate::hardware::GpuSample;

/// Origin 100, window [103.5, 106.5]: three ramp-up seconds, three window
/// seconds.
fn counter() -> TimelineCounter {
    let c = TimelineCounter::default();
    c.start_at(100.0);
    c
}

#[test]
fn nothing_is_counted_before_an_origin() {
    let c = TimelineCounter::default();
    c.add(1.0, 5, 0, None);
    assert_eq!(c.counts(), None);
}

#[test]
fn window_tokens_land_in_their_second_and_boundaries_open_the_next() {
    let c = counter();
    let ws = 103.5;
    c.add(103.5, 2, 2, Some(ws)); // exactly the start: second 0
    c.add(104.499, 1, 1, Some(ws)); // just before 1 s in: second 0
    c.add(104.5, 4, 4, Some(ws)); // exactly 1 s in: second 1
    c.add(106.5, 3, 3, Some(ws)); // exactly the end: the last second
    let (ramp, series) = client_series(&c.counts().unwrap(), ws, 106.5);
    assert_eq!(
        ramp, 4,
        "3.5 s of ramp-up take four seconds before the window"
    );
    assert_eq!(series, vec![0, 0, 0, 0, 3, 4, 3]);
    assert_eq!(series[ramp as usize..].iter().sum::<u64>(), 10);
}

#[test]
fn empty_seconds_are_zeros_and_a_short_last_second_is_kept() {
    let c = counter();
    let ws = 101.0;
    c.add(101.2, 1, 1, Some(ws));
    c.add(104.1, 1, 1, Some(ws));
    let (ramp, series) = client_series(&c.counts().unwrap(), ws, 104.25);
    assert_eq!(ramp, 1);
    assert_eq!(
        series,
        vec![0, 1, 0, 0, 1],
        "4 window seconds, the last 0.25 s long"
    );
}

#[test]
fn ramp_up_tokens_fold_into_the_seconds_before_the_window() {
    let c = counter();
    c.add(100.2, 5, 0, None); // 3.3 s before the window: second −4
    c.add(102.4, 2, 0, None); // 1.1 s before: second −2
    c.add(103.495, 1, 0, None); // 5 ms before: second −1, never the window's
    c.add(103.6, 7, 7, Some(103.5)); // counted in the window
    c.add(103.52, 1, 0, Some(103.5)); // after the start, uncounted: dropped
    c.add(103.53, 2, 0, None); // read before the stream saw the window open:
    // the window counts it (pending), not ramp-up
    c.add(107.0, 9, 0, Some(103.5)); // after the window: dropped
    let (ramp, series) = client_series(&c.counts().unwrap(), 103.5, 106.5);
    assert_eq!(ramp, 4);
    assert_eq!(series, vec![5, 0, 2, 1, 7, 0, 0]);
}

#[test]
fn window_at_the_origin_has_no_ramp_bins() {
    let c = counter();
    c.add(100.0, 3, 3, Some(100.0));
    let (ramp, series) = client_series(&c.counts().unwrap(), 100.0, 102.0);
    assert_eq!((ramp, series), (0, vec![3, 0]));
}

fn snap(t: f64, watts: [f64; 2]) -> HardwareSnapshot {
    let gpu = |w: f64| GpuSample {
        power_w: Some(w),
        util_pct: Some(50.0),
        pcie_rx_mb_s: Some(10.0),
        ..GpuSample::default()
    };
    HardwareSnapshot {
        t_s: t,
        gpus: vec![gpu(watts[0]), gpu(watts[1])],
        ..HardwareSnapshot::default()
    }
}

#[test]
fn build_puts_scrapes_and_gpu_samples_on_the_cells_axis() {
    let c = counter();
    c.add(104.0, 10, 10, Some(103.5));
    let point = |t: f64, run: f64| ServerPoint {
        t,
        running: Some(run),
        waiting: Some(0.0),
        kv_usage: Some(0.123_456),
    };
    // One scrape before the cell (dropped), one twice (kept once), the end
    // scrape read just after the window's close (kept).
    let scrapes = [
        point(99.0, 1.0),
        point(102.0, 4.0),
        point(105.0, 8.0),
        point(105.0, 8.0),
        point(106.6, 8.0),
    ];
    // Monitor clock is 90 s behind the run clock.
    let gpu = [
        snap(5.0, [1.0, 1.0]),
        snap(13.25, [100.0, 150.5]),
        snap(20.0, [1.0, 1.0]),
    ];
    let t = build(&c.counts().unwrap(), (103.5, 106.5), &scrapes, &gpu, 90.0);
    assert_eq!((t.window_start_s, t.window_end_s), (3.5, 6.5));
    assert_eq!(t.window_tokens(), 10);
    assert_eq!(t.bin_start_s(0), -0.5);
    let s = t.server.unwrap();
    assert_eq!(s.t_s, vec![2.0, 5.0, 6.6]);
    assert_eq!(s.running, vec![Some(4.0), Some(8.0), Some(8.0)]);
    assert_eq!(s.kv_usage, vec![Some(0.123); 3]);
    let g = t.gpu.unwrap();
    assert_eq!(
        g.t_s,
        vec![3.25],
        "samples outside origin..window end are left out"
    );
    assert_eq!(g.power_w, vec![Some(250.5)], "power of all GPUs together");
    assert_eq!(
        g.util_pct,
        vec![Some(50.0)],
        "utilisation is the GPUs' mean"
    );
    assert_eq!(g.pcie_rx_mb_s, vec![Some(20.0)]);
    assert_eq!(
        g.pcie_tx_mb_s,
        vec![None],
        "no GPU reported it: null, not 0"
    );
}

#[test]
fn empty_server_and_gpu_series_are_left_out_of_the_json() {
    let c = counter();
    let t = build(&c.counts().unwrap(), (101.0, 102.0), &[], &[], 0.0);
    let json = serde_json::to_value(&t).unwrap();
    assert!(json.get("server").is_none() && json.get("gpu").is_none());
    let back: CellTimeline = serde_json::from_value(json).unwrap();
    assert_eq!(back, t);
}
