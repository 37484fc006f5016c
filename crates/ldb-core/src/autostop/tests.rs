//! Known truth for the auto-stop statistics: synthetic token counts from a
//! constant rate, an AR(1) rate (the interval must cover the true mean about
//! 95 % of the time) and a linearly drifting rate (the window must not close).

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// Cumulative counts at every `dt` over `secs` for a rate given per step.
fn counts(secs: f64, dt: f64, mut rate: impl FnMut(usize, f64) -> f64) -> Vec<(f64, u64)> {
    let steps = (secs / dt).round() as usize;
    let mut total = 0.0;
    (1..=steps)
        .map(|i| {
            let t = i as f64 * dt;
            total += rate(i, t) * dt;
            (t, total.round() as u64)
        })
        .collect()
}

pub(super) fn normal(rng: &mut StdRng) -> f64 {
    // Box–Muller: enough for a test's noise.
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// An AR(1) rate around `mu`: x ← φx + ε, rate = μ(1 + x), sampled every 10 ms.
fn ar1_window(seed: u64, mu: f64, phi: f64, sd: f64, secs: f64) -> Vec<(f64, u64)> {
    let mut rng = StdRng::seed_from_u64(seed);
    // Start from the stationary distribution, as a ready cell does.
    let stat_sd = sd / (1.0 - phi * phi).sqrt();
    let mut x = stat_sd * normal(&mut rng);
    counts(secs, 0.01, |_, _| {
        x = phi * x + sd * normal(&mut rng);
        mu * (1.0 + x)
    })
}

#[test]
fn constant_rate_gives_its_value_and_a_narrow_interval() {
    let s = counts(6.0, 0.25, |_, _| 400.0);
    let e = estimate_window(&s, 6.0, 30.0).expect("estimate");
    assert!((e.mean - 400.0).abs() < 0.5, "{e:?}");
    assert!(e.rel_half_width() < 0.005, "{e:?}");
    assert!(e.drift_rel.abs() < 0.005, "{e:?}");
    let rule = AutoStop {
        target_rel: 0.01,
        min_s: 5.0,
    };
    assert_eq!(
        decide(Some(&rule), 6.0, 30.0, Some(&e)),
        Some(StoppedBy::Ci)
    );
    // Not before the minimum, whatever the interval.
    assert_eq!(decide(Some(&rule), 4.9, 30.0, Some(&e)), None);
    // Without the rule, only the maximum closes the window.
    assert_eq!(decide(None, 6.0, 30.0, Some(&e)), None);
    assert_eq!(decide(None, 30.0, 30.0, None), Some(StoppedBy::MaxDuration));
}

#[test]
fn batch_rates_average_to_the_window_rate() {
    let s = counts(7.3, 0.25, |i, _| if i % 3 == 0 { 900.0 } else { 100.0 });
    let rates = batch_rates(&s, 7.25, 10);
    assert_eq!(rates.len(), 10);
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let direct = count_at(&s, 7.25) / 7.25;
    assert!((mean - direct).abs() < 1e-9, "{mean} vs {direct}");
}

#[test]
fn ar1_interval_covers_the_true_mean_about_95_percent() {
    // Correlation time ≈ 1/(1 − φ) steps = 0.2 s against 1 s batches.
    let mu = 1000.0;
    let runs = 400;
    let mut covered = 0;
    for seed in 0..runs {
        let s = ar1_window(seed, mu, 0.95, 0.05, 10.0);
        let e = estimate_window(&s, 10.0, 30.0).expect("estimate");
        if (e.low()..=e.high()).contains(&mu) {
            covered += 1;
        }
    }
    let share = covered as f64 / runs as f64;
    assert!((0.90..=0.995).contains(&share), "coverage {share}");
}

#[test]
fn strongly_correlated_rate_keeps_an_honest_interval() {
    // Correlation time ≈ 1 s, as long as a batch: plain batch means would
    // cover the truth well under 95 %; the lag-1 correction must hold it up.
    let mu = 1000.0;
    let runs = 400;
    let mut covered = 0;
    for seed in 0..runs {
        let s = ar1_window(1000 + seed, mu, 0.99, 0.02, 10.0);
        let e = estimate_window(&s, 10.0, 30.0).expect("estimate");
        if (e.low()..=e.high()).contains(&mu) {
            covered += 1;
        }
    }
    let share = covered as f64 / runs as f64;
    assert!(share >= 0.85, "coverage {share}");
}

/// Coverage of the AR(1) rates above over 30 s windows, which are cut into
/// 30 one-second batches (`batches_for`): the batch is as long against the
/// correlation time as in the 10 s cases, with three times the batches.
#[test]
fn thirty_one_second_batches_keep_the_coverage() {
    assert_eq!(batches_for(30.0), MAX_BATCHES);
    assert_eq!(
        (batches_for(5.0), batches_for(10.9), batches_for(17.5)),
        (5, 10, 17)
    );
    let mu = 1000.0;
    let share = |phi: f64, sd: f64, seed0: u64| {
        let runs = 200;
        let covered = (0..runs)
            .filter(|i| {
                // Read at the driver's 250 ms ticks, as a cell reads its count.
                let s: Vec<_> = ar1_window(seed0 + i, mu, phi, sd, 30.0)
                    .into_iter()
                    .skip(24)
                    .step_by(25)
                    .collect();
                let e = estimate_window(&s, 30.0, 30.0).expect("estimate");
                e.batches == 30 && (e.low()..=e.high()).contains(&mu)
            })
            .count();
        covered as f64 / runs as f64
    };
    let mild = share(0.95, 0.05, 5000);
    let strong = share(0.99, 0.02, 9000);
    eprintln!("coverage over 30 one-second batches: {mild} and {strong}");
    assert!((0.90..=0.995).contains(&mild), "coverage {mild}");
    assert!(strong >= 0.85, "coverage {strong}");
}

#[test]
fn a_rate_drifting_ten_percent_over_thirty_seconds_does_not_close() {
    // The step time grows 10 % over 30 s: the rate falls by about 9 %.
    let rule = AutoStop {
        target_rel: 0.01,
        min_s: 5.0,
    };
    let rate = |_: usize, t: f64| 1000.0 / (1.0 + 0.1 * t / 30.0);
    let s = counts(30.0, 0.25, rate);
    for end in [5.0, 8.0, 12.0, 20.0, 29.75] {
        let upto: Vec<_> = s.iter().copied().filter(|p| p.0 <= end).collect();
        let e = estimate_window(&upto, end, 30.0).expect("estimate");
        assert!(e.drift_rel < -0.01, "at {end}: {e:?}");
        assert_eq!(decide(Some(&rule), end, 30.0, Some(&e)), None, "at {end}");
    }
    let e = estimate_window(&s, 30.0, 30.0).expect("estimate");
    assert!((e.drift_rel + 0.09).abs() < 0.01, "{e:?}");
    assert_eq!(
        decide(Some(&rule), 30.0, 30.0, Some(&e)),
        Some(StoppedBy::MaxDuration)
    );
}

/// Defect 6 of issue 35: over the window so far, a decline of 5 % per 30 s
/// shows 0.83 % at the 5 s minimum and passed a ±1 % target, closing the
/// cell 2.1 % from what its 30 s window would report. Judged over the
/// longest window the cell could run it is the 5 % it is, at every tick.
#[test]
fn a_five_percent_per_thirty_seconds_decline_does_not_stop_at_five_seconds() {
    let rule = AutoStop {
        target_rel: 0.01,
        min_s: 5.0,
    };
    let s = counts(30.0, 0.25, |_, t| 1000.0 * (1.0 - 0.05 * t / 30.0));
    for end in [5.0, 5.25, 8.0, 15.0, 29.75] {
        let upto: Vec<_> = s.iter().copied().filter(|p| p.0 <= end).collect();
        let e = estimate_window(&upto, end, 30.0).expect("estimate");
        assert!((e.drift_rel + 0.05).abs() < 0.005, "at {end}: {e:?}");
        assert_eq!(decide(Some(&rule), end, 30.0, Some(&e)), None, "at {end}");
    }
}

/// Batches are never shorter than a second: the 5 s minimum is cut into 5,
/// and a window under 3 s has no estimate (issue 35: 0.5 s batches at 5 s
/// were below the length the correction was checked at).
#[test]
fn batches_stay_at_least_one_second_long() {
    for tenths in 1..400 {
        let elapsed = tenths as f64 / 10.0;
        let k = batches_for(elapsed);
        if k > 0 {
            assert!(
                elapsed / k as f64 >= MIN_BATCH_S - 1e-6,
                "{elapsed} s in {k}"
            );
        }
    }
    let s = counts(2.75, 0.25, |_, _| 400.0);
    assert!(estimate_window(&s, 2.75, 30.0).is_none());
    let s = counts(5.0, 0.25, |_, _| 400.0);
    assert_eq!(estimate_window(&s, 5.0, 30.0).map(|e| e.batches), Some(5));
}

#[test]
fn too_few_batches_or_no_tokens_give_no_estimate() {
    assert!(estimate(&[1.0, 2.0]).is_none());
    assert!(estimate(&[0.0; 10]).is_none());
    assert!(estimate_window(&[], 5.0, 30.0).is_none());
    assert!(batch_rates(&[(1.0, 10)], 0.0, 10).is_empty());
}

#[test]
fn stopped_by_words() {
    assert_eq!(StoppedBy::Ci.as_str(), "ci");
    assert_eq!(StoppedBy::MaxDuration.as_str(), "max_duration");
    assert_eq!(
        serde_json::to_string(&StoppedBy::MaxDuration).expect("json"),
        "\"max_duration\""
    );
}

proptest! {
    #[test]
    fn mean_is_the_window_rate_and_the_interval_contains_it(
        rates in proptest::collection::vec(1.0f64..5000.0, 8..60),
        dt in 0.05f64..0.5,
    ) {
        let mut total = 0.0;
        let samples: Vec<(f64, u64)> = rates
            .iter()
            .enumerate()
            .map(|(i, r)| {
                total += r * dt;
                ((i + 1) as f64 * dt, total.round() as u64)
            })
            .collect();
        let elapsed = rates.len() as f64 * dt;
        if let Some(e) = estimate_window(&samples, elapsed, 30.0) {
            let direct = samples.last().map_or(0.0, |s| s.1 as f64) / elapsed;
            prop_assert!((e.mean - direct).abs() <= 1e-6 * direct.max(1.0));
            prop_assert!(e.half_width >= 0.0 && e.low() <= e.mean && e.mean <= e.high());
        }
    }

    #[test]
    fn never_closes_before_the_minimum_or_past_the_maximum(
        elapsed in 0.0f64..60.0,
        min_s in 0.0f64..20.0,
        max_s in 1.0f64..40.0,
    ) {
        let rule = AutoStop { target_rel: 0.01, min_s };
        let settled = RateEstimate { mean: 100.0, half_width: 0.0, lag1: 0.0, drift_rel: 0.0, drift_half_width: 0.0, batches: 10 };
        let d = decide(Some(&rule), elapsed, max_s, Some(&settled));
        if elapsed >= max_s {
            prop_assert_eq!(d, Some(StoppedBy::MaxDuration));
        } else if elapsed < min_s {
            prop_assert_eq!(d, None);
        } else {
            prop_assert_eq!(d, Some(StoppedBy::Ci));
        }
    }
}

#[test]
fn cell_keys_round_trip_and_old_cells_read_without_them() {
    use crate::result::CellResult;
    let mut c = CellResult::default();
    c.ext.stopped_by = Some(StoppedBy::Ci);
    c.ext.rate_ci95 = Some([99.5, 100.5]);
    c.ext.rate_ci_method = Some(METHOD.into());
    c.ext.rate_drift_pct = Some(-0.25);
    let v = c.to_json();
    assert_eq!(v["stopped_by"], "ci");
    assert_eq!(v["rate_ci95"], serde_json::json!([99.5, 100.5]));
    let back: CellResult = serde_json::from_value(v.clone()).expect("reads");
    assert_eq!(back.ext.stopped_by, Some(StoppedBy::Ci));
    assert_eq!(back.ext.rate_ci95, Some([99.5, 100.5]));
    assert_eq!(back.ext.rate_drift_pct, Some(-0.25));
    let mut old = v;
    for k in [
        "stopped_by",
        "rate_ci95",
        "rate_ci_method",
        "rate_drift_pct",
    ] {
        old.as_object_mut().expect("object").remove(k);
    }
    let back: CellResult = serde_json::from_value(old).expect("old cell reads");
    assert_eq!(back.ext.stopped_by, None);
    assert_eq!(back.ext.rate_ci95, None);
}
