//! `--repeat N` and the SLO search against the simulator's known truth:
//! repeats are interleaved pass by pass and average to the truth, and
//! `--slo-search` / `--slo-bisect` find the highest passing concurrency of
//! a server whose token time grows with the batch.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, cell, config, start, within};
use ldb_core::result::CellStatus;
use ldb_core::slo::{SloSpec, evaluate};

/// Step time of FLAT at concurrency `c`: every sequence emits one token per step.
fn step(c: u32) -> f64 {
    0.010 + 0.0002 * f64::from(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_repeats_interleave_and_average_to_the_truth() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let mut cfg = config(&sim, &[1, 4], &[0], 1.5);
    cfg.matrix.repeat = 3;
    let (doc, _) = bench(cfg, Arc::default()).await;
    sim.shutdown().await;
    assert_eq!(doc.metadata.repeat, 3);
    let mut starts = Vec::new();
    for c in [1u32, 4] {
        let truth = f64::from(c) / step(c);
        let r = cell(&doc, c, 0);
        assert_eq!(r.ext.status, CellStatus::Ok, "{}", r.ext.status_reason);
        assert_eq!(r.ext.repeats.len(), 3, "C={c}");
        let each: Vec<f64> = r
            .ext
            .repeats
            .iter()
            .map(|e| e.values["aggregate_tps"])
            .collect();
        for v in &each {
            assert!(
                within(*v, truth, 0.05),
                "C={c}: repeat {v:.1} vs {truth:.1}"
            );
        }
        let s = r.ext.repeat_stats["aggregate_tps"];
        assert_eq!(s.n, 3);
        // The headline is the mean of the repeats.
        assert_eq!(r.aggregate_tps, Some(s.mean));
        assert!(
            within(s.mean, truth, 0.03),
            "C={c}: mean {:.1} vs {truth:.1}",
            s.mean
        );
        // The 95 % interval holds the truth. Each window ends on a token
        // boundary, which biases a repeat by up to one step's tokens in a
        // 1.5 s window (< 1 %): that much is allowed beyond the interval.
        let (lo, hi) = (s.low().expect("ci"), s.high().expect("ci"));
        let slack = 0.01 * truth;
        assert!(
            lo - slack <= truth && truth <= hi + slack,
            "C={c}: truth {truth:.2} outside [{lo:.2}, {hi:.2}] (repeats {each:?})"
        );
        starts.push(
            r.ext
                .repeats
                .iter()
                .map(|e| e.window_start_unix.expect("window start"))
                .collect::<Vec<f64>>(),
        );
    }
    // Pass by pass: C=1 #1 < C=4 #1 < C=1 #2 < C=4 #2 < C=1 #3 < C=4 #3.
    let order: Vec<f64> = (0..3).flat_map(|k| [starts[0][k], starts[1][k]]).collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "not interleaved: {order:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slo_search_skips_and_bisection_finds_the_true_frontier() {
    let _serial = SERIAL.lock().await;
    // 2 ms per running sequence: a token every 10 + 2·C ms, so a TPOT
    // target of 21 ms passes up to C = 5 (20 ms) and fails from C = 6 (22 ms).
    let sim = start(FLAT, |s| s.step_time.per_seq_s = 0.002).await;
    let mut cfg = config(&sim, &[1, 2, 8, 16, 32], &[0], 1.0);
    let spec = SloSpec::parse("tpot_p99=0.021").expect("spec");
    cfg.slo.spec = Some(spec.clone());
    cfg.slo.search = true;
    cfg.slo.bisect = true;
    let (mut doc, _) = bench(cfg, Arc::default()).await;
    sim.shutdown().await;
    // 8 and 16 failed: 32 is not measured.
    let top = cell(&doc, 32, 0);
    assert_eq!(top.ext.status, CellStatus::SkippedSlo);
    assert!(
        top.ext.status_reason.contains("C=8 and C=16"),
        "{}",
        top.ext.status_reason
    );
    // Bisection between 2 (pass) and 8 (fail): 5 passes, then 6 fails.
    let measured: Vec<u32> = doc.results.iter().map(|r| r.concurrency).collect();
    assert_eq!(measured, [1, 2, 8, 16, 32, 5, 6], "order of cells");
    evaluate(&spec, &mut doc);
    let slo = doc.slo.as_ref().expect("slo block");
    let point = slo.frontier[&0].expect("a passing level");
    assert_eq!(point.concurrency, 5);
    for (c, tpot) in [(5u32, step(5) + 0.0018 * 5.0), (6, step(6) + 0.0018 * 6.0)] {
        let r = cell(&doc, c, 0);
        let got = r.latency.inter_token_latency.p50;
        assert!(within(got, tpot, 0.04), "C={c}: TPOT {got:.4} vs {tpot:.4}");
    }
}
