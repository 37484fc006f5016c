//! The auto-stop rule as a cell runs it — checked at every 250 ms tick,
//! closing at the first pass — judged by simulation against known truth.
//!
//! A fixed-length window's interval covering the true mean 95 % of the time
//! says little about a rule that looks 100 times and stops at the first
//! look that happens to be narrow: each look is another chance to stop on
//! an interval that is too short. So the rule itself is run here on
//! synthetic rates whose truth is known:
//!
//! * stationary AR(1) rates (correlation times 0.2 s and 1 s, the two the
//!   unit tests name) at noise levels that make a ±1 % interval reachable
//!   after about 3, 8, 15 and 30 s — from stopping at the minimum to
//!   running to the maximum: the closing intervals must cover the true mean
//!   in at least 93 % of the windows (at the 1 s correlation time, as long
//!   as a batch, 85 %: what the estimator holds on fixed windows);
//! * the same rates with a linear decline of 5 % over 30 s (and 10 %): a
//!   window must not close early on them in more than 5 % of the runs.
//!
//! `sequential_rule_in_ci` runs a small, seeded version on every test run
//! (about a second); `sequential_rule_bench` (`#[ignore]`d) runs the full
//! table that docs/performance.md §5 quotes:
//!
//! ```text
//! cargo test -p ldb-core --lib autostop::sequential -- --ignored --nocapture
//! ```

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::tests::normal;
use super::*;

/// The driver's tick, seconds.
const TICK_S: f64 = 0.25;
/// The rate is generated in steps of this, seconds (a fifth of a tick:
/// finer than the shortest correlation time simulated, coarse enough for
/// thousands of windows in a debug build).
const STEP_S: f64 = 0.05;
/// The true mean rate, tokens per second.
const MU: f64 = 1000.0;

/// One synthetic server.
#[derive(Debug, Clone, Copy)]
struct Series {
    /// Correlation time of the rate's noise, seconds.
    tau_s: f64,
    /// Relative long-run standard deviation: the window mean over T seconds
    /// has a relative standard deviation of `long_sd · √(STEP_S / T)`.
    long_sd: f64,
    /// Linear change of the rate over 30 s, relative (−0.05: a 5 % decline).
    drift_per_30s: f64,
}

impl Series {
    /// The noise level at which a ±`target` interval (1.96 σ) is reached
    /// after `secs` seconds of a fixed window.
    fn reaching(tau_s: f64, target: f64, secs: f64, drift_per_30s: f64) -> Series {
        Series {
            tau_s,
            long_sd: target / 1.96 * (secs / STEP_S).sqrt(),
            drift_per_30s,
        }
    }

    /// Cumulative token counts at every tick up to `max_s`.
    fn ticks(&self, seed: u64, max_s: f64) -> Vec<(f64, u64)> {
        let mut rng = StdRng::seed_from_u64(seed);
        let phi = (-STEP_S / self.tau_s).exp();
        // Innovation sd giving the long-run sd: σ_L = σ_ε / (1 − φ).
        let sd = self.long_sd * (1.0 - phi);
        let mut x = sd / (1.0 - phi * phi).sqrt() * normal(&mut rng);
        let per_tick = (TICK_S / STEP_S).round() as usize;
        let ticks = (max_s / TICK_S).round() as usize;
        let mut total = 0.0;
        let mut out = Vec::with_capacity(ticks);
        for i in 1..=ticks * per_tick {
            let t = i as f64 * STEP_S;
            x = phi * x + sd * normal(&mut rng);
            let trend = 1.0 + self.drift_per_30s * t / 30.0;
            total += MU * trend * (1.0 + x) * STEP_S;
            if i % per_tick == 0 {
                out.push((t, total.round() as u64));
            }
        }
        out
    }
}

/// Where one window closed.
#[derive(Debug, Clone, Copy)]
struct Close {
    at_s: f64,
    by: StoppedBy,
    /// The closing interval holds the true mean.
    covered: bool,
}

/// Run the rule tick by tick over one window, as `window_stop.rs` does.
fn run_window(samples: &[(f64, u64)], rule: &AutoStop, max_s: f64) -> Close {
    let mut last = None;
    for (i, &(t, _)) in samples.iter().enumerate() {
        last = estimate_window(&samples[..=i], t, max_s);
        if let Some(by) = decide(Some(rule), t, max_s, last.as_ref()) {
            return close(t, by, last);
        }
    }
    close(max_s, StoppedBy::MaxDuration, last)
}

fn close(at_s: f64, by: StoppedBy, e: Option<RateEstimate>) -> Close {
    let covered = e.is_some_and(|e| (e.low()..=e.high()).contains(&MU));
    Close { at_s, by, covered }
}

/// The outcome of many windows of one series.
#[derive(Debug, Clone, Copy)]
struct Tally {
    runs: usize,
    /// Windows closed on the interval before the maximum.
    early: usize,
    /// Of those, how many intervals held the true mean.
    early_covered: usize,
    /// All closing intervals that held the true mean.
    covered: usize,
    /// Mean length of the windows, seconds.
    mean_len_s: f64,
}

impl Tally {
    fn coverage(&self) -> f64 {
        self.covered as f64 / self.runs as f64
    }
    fn early_share(&self) -> f64 {
        self.early as f64 / self.runs as f64
    }
    fn early_coverage(&self) -> Option<f64> {
        (self.early > 0).then(|| self.early_covered as f64 / self.early as f64)
    }
}

fn tally(series: Series, rule: &AutoStop, max_s: f64, runs: usize, seed0: u64) -> Tally {
    let mut t = Tally {
        runs,
        early: 0,
        early_covered: 0,
        covered: 0,
        mean_len_s: 0.0,
    };
    for i in 0..runs {
        let c = run_window(&series.ticks(seed0 + i as u64, max_s), rule, max_s);
        t.mean_len_s += c.at_s / runs as f64;
        t.covered += usize::from(c.covered);
        if c.by == StoppedBy::Ci {
            t.early += 1;
            t.early_covered += usize::from(c.covered);
        }
    }
    t
}

const RULE: AutoStop = AutoStop {
    target_rel: 0.01,
    min_s: 5.0,
};
const MAX_S: f64 = 30.0;

/// Small and seeded: the stationary case where windows close early most
/// often (±1 % reachable after 8 s, correlation 0.2 s) and a 5 %/30 s
/// decline at the noise that lets a steady rate close soonest.
#[test]
fn sequential_rule_in_ci() {
    let steady = tally(Series::reaching(0.2, 0.01, 8.0, 0.0), &RULE, MAX_S, 80, 1);
    assert!(steady.early_share() > 0.5, "{steady:?}");
    assert!(steady.coverage() >= 0.93, "{steady:?}");
    let drifting = tally(Series::reaching(0.2, 0.01, 3.0, -0.05), &RULE, MAX_S, 60, 7);
    assert!(drifting.early_share() <= 0.05, "{drifting:?}");
}

/// The full table (docs/methodology.md §6.4.1): 200 windows per row
/// (`LDB_RUNS` for more). Steady rates whose correlation time is a fifth of
/// a batch must keep ≥ 93 % coverage; at a correlation time as long as a
/// batch the estimator itself holds only ≥ 85 % on fixed windows (the unit
/// tests), and that is what is asked of it here.
#[test]
#[ignore = "Monte Carlo bench, minutes in a debug build; run with --ignored --nocapture"]
fn sequential_rule_bench() {
    let runs: usize = std::env::var("LDB_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    eprintln!("tau_s reach_s drift/30s  early%  cover%  cover_early%  mean_len_s");
    let (mut worst_cover, mut worst_cover_long): (f64, f64) = (1.0, 1.0);
    let mut worst_early: f64 = 0.0;
    for tau in [0.2, 1.0] {
        for drift in [0.0, -0.05, -0.10] {
            for reach in [3.0, 8.0, 15.0, 30.0] {
                let s = Series::reaching(tau, RULE.target_rel, reach, drift);
                let t = tally(s, &RULE, MAX_S, runs, 100_000 * (reach as u64) + 17);
                // Coverage of a true mean only means something without a trend.
                let pct = |c: Option<f64>| match c {
                    Some(c) if drift == 0.0 => format!("{:.1}", c * 100.0),
                    _ => "—".to_string(),
                };
                eprintln!(
                    "{tau:>5} {reach:>7} {:>8.0}% {:>7.1} {:>7} {:>13} {:>11.1}",
                    drift * 100.0,
                    t.early_share() * 100.0,
                    pct(Some(t.coverage())),
                    pct(t.early_coverage()),
                    t.mean_len_s
                );
                if drift == 0.0 && tau < 1.0 {
                    worst_cover = worst_cover.min(t.coverage());
                } else if drift == 0.0 {
                    worst_cover_long = worst_cover_long.min(t.coverage());
                } else {
                    worst_early = worst_early.max(t.early_share());
                }
            }
        }
    }
    eprintln!(
        "worst coverage (steady, 0.2 s) {worst_cover:.3}, (steady, 1 s) {worst_cover_long:.3}; \
         most early stops (drifting) {worst_early:.3}"
    );
    assert!(worst_cover >= 0.93);
    assert!(worst_cover_long >= 0.85);
    assert!(worst_early <= 0.05);
}
