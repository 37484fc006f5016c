//! When does a sustained-decode cell start measuring?
//!
//! The clock starts when the C streams launch (not before the scout). Each tick
//! the runner reports what it knows; the detector answers with a decision.
//!
//! - **Ready**: over the last `stable_seconds` (3 s): with metrics, the server
//!   reached C running and all C streams produced at some point, the queue was
//!   empty on average (≤ 0.5), and either the server ran ≥ 0.95·C on average
//!   with ≥ 90% of the streams producing on average, or no request waited at
//!   all and ≥ 75% of the streams produced on average (then a dip below C is
//!   a stream between two of its requests);
//!   without metrics, all C producing at some point and ≥ 90% on average.
//!   Averages, not every single scrape, because short requests finish and
//!   restart all the time.
//! - **Capacity plateau**: the server never reached C. With metrics: the
//!   highest running count seen stays below C for `plateau_seconds` with a
//!   non-empty queue and every admitted request producing. Without metrics: fewer than C
//!   streams producing, no increase for `plateau_seconds`, after the first
//!   token. The window then starts at once, flagged capacity-limited.
//!   Progress is a higher running count *or* another stream's first token.
//!   While streams still wait for their first token and one stream's prefill
//!   is known to take long (`with_prefill_estimate`), the hold is at least 1.5
//!   prefills: a server that prefills long uncached prompts one at a time
//!   admits a stream every prefill, which is a slow ramp, not a plateau.
//! - **Timeout**: neither within the limit; the window starts anyway.
//!
//! A gap between two observations longer than the freeze gap
//! (`with_freeze_gap`) means the benchmark itself was not running: tokens
//! piled up unread in its sockets and would be counted inside a window opened
//! now. So the holds start again after such a gap, and no decision is taken on
//! the observation right after it; the next passes read the backlog first.

/// What the runner knows at one tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Seconds since the streams launched.
    pub elapsed: f64,
    /// Fresh scheduler state from a scrape taken in this cell (None without metrics).
    pub running: Option<f64>,
    /// Waiting requests from the same scrape.
    pub waiting: Option<f64>,
    /// Streams that have their first token and have not finished.
    pub producing: u32,
    /// Any token arrived since the streams launched.
    pub any_tokens: bool,
}

/// The detector's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Keep waiting.
    Wait,
    /// Start the window: the server runs the requested concurrency.
    Ready(String),
    /// Start the window: the server stays below the requested concurrency.
    Plateau {
        /// Why, in words.
        reason: String,
        /// The concurrency the server actually runs.
        running: f64,
    },
    /// Start the window after the readiness limit.
    Timeout(String),
}

/// Readiness state of one cell.
#[derive(Debug, Clone)]
pub struct Readiness {
    concurrency: u32,
    limit: f64,
    stable_seconds: f64,
    plateau_seconds: f64,
    /// Observations of the last `stable_seconds` (bounded by the tick rate).
    recent: std::collections::VecDeque<Observation>,
    best_running: f64,
    best_producing: u32,
    progress_at: f64,
    prefill_estimate: f64,
    /// Longest normal spacing of observations, s (0 = never a freeze).
    freeze_gap: f64,
    /// Elapsed time of the previous observation (the streams' launch, 0, at first).
    last_elapsed: f64,
    /// Observation gaps longer than `freeze_gap` so far, and the longest.
    freezes: u32,
    longest_freeze: f64,
}

impl Readiness {
    /// Detector for `concurrency` streams with a readiness limit of `limit` s.
    pub fn new(concurrency: u32, limit: f64) -> Self {
        Readiness {
            concurrency,
            limit,
            stable_seconds: 3.0,
            plateau_seconds: 5.0,
            recent: std::collections::VecDeque::new(),
            best_running: -1.0,
            best_producing: 0,
            progress_at: 0.0,
            prefill_estimate: 0.0,
            freeze_gap: 0.0,
            last_elapsed: 0.0,
            freezes: 0,
            longest_freeze: 0.0,
        }
    }

    /// Treat a gap between observations longer than `seconds` as the
    /// benchmark not running (see the module notes). 0 turns it off.
    pub fn with_freeze_gap(mut self, seconds: f64) -> Self {
        self.freeze_gap = if seconds.is_finite() {
            seconds.max(0.0)
        } else {
            0.0
        };
        self
    }

    /// How many observation gaps were longer than the freeze gap, and the
    /// longest of them, seconds.
    pub fn freezes(&self) -> (u32, f64) {
        (self.freezes, self.longest_freeze)
    }

    /// Seconds one stream's uncached prefill is expected to take (0 = unknown).
    pub fn with_prefill_estimate(mut self, seconds: f64) -> Self {
        self.prefill_estimate = if seconds.is_finite() {
            seconds.max(0.0)
        } else {
            0.0
        };
        self
    }

    /// Override the stability and plateau holds (tests, short cells).
    pub fn with_holds(mut self, stable: f64, plateau: f64) -> Self {
        self.stable_seconds = stable;
        self.plateau_seconds = plateau;
        self
    }

    /// True when the last `stable_seconds` of observations show the server
    /// running the requested concurrency. Short requests finish and restart
    /// all the time, so single scrapes dip below C for a moment; the test is
    /// on the span: C reached, mean running ≥ 0.95·C, the queue empty on
    /// average (≤ 0.5 requests), and ≥ 90% of the streams producing on average.
    fn held(&self) -> bool {
        let (Some(first), Some(last)) = (self.recent.front(), self.recent.back()) else {
            return false;
        };
        if last.elapsed - first.elapsed < self.stable_seconds {
            return false;
        }
        let c = f64::from(self.concurrency);
        let n = self.recent.len() as f64;
        let mean = |f: fn(&Observation) -> f64| self.recent.iter().map(f).sum::<f64>() / n;
        let all_once = self.recent.iter().any(|o| o.producing >= self.concurrency);
        let producing_mean = mean(|o| f64::from(o.producing));
        match (last.running, last.waiting) {
            (Some(_), Some(_)) => {
                let max_run = self
                    .recent
                    .iter()
                    .filter_map(|o| o.running)
                    .fold(0.0, f64::max);
                // With no request ever waiting, a running count below C is a
                // stream between two requests (client side), not the server.
                let no_queue = self.recent.iter().all(|o| o.waiting.unwrap_or(0.0) <= 0.0);
                let full =
                    mean(|o| o.running.unwrap_or(0.0)) >= 0.95 * c && producing_mean >= 0.9 * c;
                all_once
                    && max_run >= c
                    && mean(|o| o.waiting.unwrap_or(0.0)) <= 0.5
                    && (full || (no_queue && producing_mean >= 0.75 * c))
            }
            _ => all_once && producing_mean >= 0.9 * c,
        }
    }

    /// Feed one observation.
    pub fn observe(&mut self, o: Observation) -> Decision {
        if self.froze_before(&o) {
            return Decision::Wait;
        }
        self.remember(o);
        if self.held() {
            return Decision::Ready(self.ready_reason(&o));
        }
        if let Some(plateau) = self.plateau(&o) {
            return plateau;
        }
        if o.elapsed >= self.limit {
            return Decision::Timeout(self.timeout_reason(&o));
        }
        Decision::Wait
    }

    /// True when `o` comes after a freeze gap; the holds then start again
    /// from `o`.
    fn froze_before(&mut self, o: &Observation) -> bool {
        let gap = o.elapsed - self.last_elapsed;
        self.last_elapsed = o.elapsed;
        if self.freeze_gap > 0.0 && gap > self.freeze_gap {
            // Nothing was observed across the gap: neither stability nor a
            // plateau can be claimed over it, and the unread backlog must be
            // drained before any window opens.
            self.freezes += 1;
            self.longest_freeze = self.longest_freeze.max(gap);
            self.recent.clear();
            self.recent.push_back(*o);
            self.progress_at = o.elapsed;
            return true;
        }
        false
    }

    /// Add `o` to the recent span, dropping what is older than the hold.
    fn remember(&mut self, o: Observation) {
        self.recent.push_back(o);
        // Keep the newest observation that is at least `stable_seconds` old,
        // so the span covers the whole hold whatever the tick spacing.
        while self
            .recent
            .get(1)
            .is_some_and(|second| o.elapsed - second.elapsed >= self.stable_seconds)
        {
            self.recent.pop_front();
        }
    }

    /// What a Ready decision reports about the server and the streams.
    fn ready_reason(&self, o: &Observation) -> String {
        match (o.running, o.waiting) {
            (Some(r), Some(w)) => format!(
                "running_reqs={}/{}, queue_reqs={}, active_streams={}/{}, stable={:.1}s",
                r, self.concurrency, w, o.producing, self.concurrency, self.stable_seconds
            ),
            _ => format!(
                "metrics_unavailable, active_streams={}/{}, stable={:.1}s",
                o.producing, self.concurrency, self.stable_seconds
            ),
        }
    }

    /// Note progress, then a Plateau decision when the highest level the
    /// server has admitted so far stays below C with requests left waiting.
    fn plateau(&mut self, o: &Observation) -> Option<Decision> {
        let c = f64::from(self.concurrency);
        let admitted = o.running.unwrap_or(f64::from(o.producing));
        if admitted > self.best_running {
            self.best_running = admitted;
            self.progress_at = o.elapsed;
        }
        if o.producing > self.best_producing {
            self.best_producing = o.producing;
            self.progress_at = o.elapsed;
        }
        let hold = if o.producing < self.concurrency {
            self.plateau_seconds.max(1.5 * self.prefill_estimate)
        } else {
            self.plateau_seconds
        };
        let queue = match (o.running, o.waiting) {
            (Some(_), Some(w)) => w > 0.0,
            _ => true,
        };
        let admitted_producing = f64::from(o.producing) >= admitted && admitted >= 1.0;
        if !(self.best_running < c
            && o.any_tokens
            && queue
            && admitted_producing
            && o.elapsed - self.progress_at >= hold)
        {
            return None;
        }
        let best = self.best_running;
        let reason = match o.waiting {
            Some(w) => format!(
                "capacity_plateau running_reqs={}/{}, queue_reqs={}, held={:.1}s",
                best, self.concurrency, w, hold
            ),
            None => format!(
                "capacity_plateau active_streams={}/{}, held={:.1}s",
                best, self.concurrency, hold
            ),
        };
        Some(Decision::Plateau {
            reason,
            running: best,
        })
    }

    /// The first unmet condition, named for a Timeout decision.
    fn timeout_reason(&self, o: &Observation) -> String {
        let c = f64::from(self.concurrency);
        let all_producing = o.producing >= self.concurrency;
        if o.running.is_none() {
            "metrics_unavailable".to_string()
        } else if o.running.unwrap_or(0.0) < c {
            format!(
                "running_reqs={}/{}",
                o.running.unwrap_or(0.0),
                self.concurrency
            )
        } else if o.waiting.unwrap_or(0.0) > 0.0 {
            format!("queue_reqs={}", o.waiting.unwrap_or(0.0))
        } else if !all_producing {
            format!("active_streams={}/{}", o.producing, self.concurrency)
        } else if !o.any_tokens {
            "no_generation".to_string()
        } else {
            "not_stable".to_string()
        }
    }
}

/// Automatic readiness limit: 60 s, plus the time to prefill every stream's
/// uncached prompt at the measured prefill speed (×2 margin), for long contexts.
pub fn auto_limit(concurrency: u32, context: u64, prefill_tok_s: Option<f64>) -> f64 {
    let base: f64 = if context >= 131_072 {
        180.0
    } else if context >= 65_536 {
        120.0
    } else {
        60.0
    };
    match prefill_tok_s {
        Some(rate) if rate > 0.0 => {
            // Streams share the scout's cached prefix, but admission of each
            // still costs a short prefill; allow the full prompt once plus a
            // share per stream.
            let one = context as f64 / rate;
            base.max(30.0 + 2.0 * one + 0.25 * one * f64::from(concurrency))
        }
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t: f64, r: Option<f64>, w: Option<f64>, p: u32) -> Observation {
        Observation {
            elapsed: t,
            running: r,
            waiting: w,
            producing: p,
            any_tokens: p > 0,
        }
    }

    #[test]
    fn ready_after_three_stable_seconds() {
        let mut d = Readiness::new(4, 60.0);
        assert_eq!(d.observe(obs(0.5, Some(4.0), Some(0.0), 0)), Decision::Wait);
        assert_eq!(d.observe(obs(1.0, Some(4.0), Some(0.0), 4)), Decision::Wait);
        assert_eq!(d.observe(obs(3.5, Some(4.0), Some(0.0), 4)), Decision::Wait);
        match d.observe(obs(4.0, Some(4.0), Some(0.0), 4)) {
            Decision::Ready(r) => assert!(r.starts_with("running_reqs=4/4, queue_reqs=0")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_freeze_restarts_the_stability_hold() {
        // Stable before a 14 s freeze (the CI case): the observations on each
        // side span more than the hold, but nothing was seen across the gap.
        let mut d = Readiness::new(1, 60.0).with_freeze_gap(1.0);
        for i in 0..=4 {
            let t = 1.0 + f64::from(i) * 0.25;
            assert_eq!(d.observe(obs(t, Some(1.0), Some(0.0), 1)), Decision::Wait);
        }
        assert_eq!(
            d.observe(obs(16.0, Some(1.0), Some(0.0), 1)),
            Decision::Wait
        );
        let mut t = 16.0;
        while t < 18.7 {
            t += 0.25;
            assert_eq!(
                d.observe(obs(t, Some(1.0), Some(0.0), 1)),
                Decision::Wait,
                "ready at {t} s, only {:.2} s after the freeze",
                t - 16.0
            );
        }
        assert!(matches!(
            d.observe(obs(19.0, Some(1.0), Some(0.0), 1)),
            Decision::Ready(_)
        ));
        assert_eq!(d.freezes(), (1, 14.0));
    }

    #[test]
    fn without_a_freeze_gap_sparse_observations_still_hold() {
        let mut d = Readiness::new(1, 60.0);
        d.observe(obs(1.0, Some(1.0), Some(0.0), 1));
        assert!(matches!(
            d.observe(obs(16.0, Some(1.0), Some(0.0), 1)),
            Decision::Ready(_)
        ));
        assert_eq!(d.freezes(), (0, 0.0));
    }

    #[test]
    fn no_timeout_or_plateau_on_the_pass_right_after_a_freeze() {
        let mut d = Readiness::new(4, 10.0).with_freeze_gap(1.0);
        d.observe(obs(0.5, Some(2.0), Some(2.0), 2));
        // past the limit, but right after a freeze: read the backlog first
        assert_eq!(
            d.observe(obs(12.0, Some(2.0), Some(2.0), 2)),
            Decision::Wait
        );
        assert!(matches!(
            d.observe(obs(12.25, Some(2.0), Some(2.0), 2)),
            Decision::Timeout(_)
        ));
        // a plateau needs its whole hold after the freeze
        let mut d = Readiness::new(4, 120.0).with_freeze_gap(1.0);
        d.observe(obs(0.5, Some(2.0), Some(2.0), 2));
        assert_eq!(
            d.observe(obs(10.0, Some(2.0), Some(2.0), 2)),
            Decision::Wait
        );
        let mut t = 10.0;
        while t < 14.7 {
            t += 0.25;
            assert_eq!(
                d.observe(obs(t, Some(2.0), Some(2.0), 2)),
                Decision::Wait,
                "{t}"
            );
        }
        assert!(matches!(
            d.observe(obs(15.0, Some(2.0), Some(2.0), 2)),
            Decision::Plateau { .. }
        ));
    }

    #[test]
    fn a_sustained_queue_blocks_readiness_until_it_clears() {
        let mut d = Readiness::new(2, 60.0);
        d.observe(obs(0.0, Some(2.0), Some(0.0), 2));
        d.observe(obs(1.0, Some(2.0), Some(2.0), 2));
        d.observe(obs(2.0, Some(2.0), Some(2.0), 2));
        assert_eq!(d.observe(obs(3.5, Some(2.0), Some(0.0), 2)), Decision::Wait);
        assert!(matches!(
            d.observe(obs(6.5, Some(2.0), Some(0.0), 2)),
            Decision::Ready(_)
        ));
    }

    #[test]
    fn churn_of_short_requests_still_counts_as_ready() {
        let mut d = Readiness::new(16, 60.0);
        let mut last = Decision::Wait;
        for i in 0..20 {
            let t = f64::from(i) * 0.25;
            let (r, w, p) = if i % 3 == 0 {
                (15.0, 1.0, 15)
            } else {
                (16.0, 0.0, 16)
            };
            last = d.observe(obs(t, Some(r), Some(w), p));
            if last != Decision::Wait {
                break;
            }
        }
        assert!(matches!(last, Decision::Ready(_)), "{last:?}");
    }

    #[test]
    fn uneven_tick_spacing_still_reaches_ready() {
        let mut d = Readiness::new(1, 60.0);
        let mut t = 0.0;
        let mut last = Decision::Wait;
        while t < 10.0 && last == Decision::Wait {
            t += 0.2503;
            last = d.observe(obs(t, Some(1.0), Some(0.0), 1));
        }
        assert!(
            matches!(last, Decision::Ready(_)) && t < 3.6,
            "{last:?} at {t}"
        );
    }

    #[test]
    fn restart_gaps_without_a_queue_do_not_block_readiness() {
        // 2 streams of short requests: one is often between requests.
        let mut d = Readiness::new(2, 60.0);
        let mut last = Decision::Wait;
        for i in 0..20 {
            let (r, p) = if i % 2 == 0 { (1.0, 1) } else { (2.0, 2) };
            last = d.observe(obs(f64::from(i) * 0.25, Some(r), Some(0.0), p));
            if last != Decision::Wait {
                break;
            }
        }
        assert!(matches!(last, Decision::Ready(_)), "{last:?}");
    }

    #[test]
    fn a_server_that_reached_c_is_never_a_plateau() {
        let mut d = Readiness::new(4, 60.0);
        d.observe(obs(0.5, Some(4.0), Some(0.0), 4));
        for i in 1..40 {
            let o = obs(0.5 + f64::from(i) * 0.25, Some(3.0), Some(1.0), 3);
            assert_eq!(d.observe(o), Decision::Wait);
        }
    }

    #[test]
    fn plateau_below_c_with_a_queue_is_detected_early() {
        let mut d = Readiness::new(4, 60.0);
        assert_eq!(d.observe(obs(1.0, Some(1.0), Some(3.0), 1)), Decision::Wait);
        assert_eq!(d.observe(obs(5.0, Some(1.0), Some(3.0), 1)), Decision::Wait);
        match d.observe(obs(6.0, Some(1.0), Some(3.0), 1)) {
            Decision::Plateau { running, .. } => assert_eq!(running, 1.0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_slow_staggered_ramp_is_not_a_plateau() {
        // C=4, 32k uncached prompts at 4k tok/s: 8 s of prefill each, one at
        // a time; a stream starts producing every 8 s, the rest wait.
        let mut d = Readiness::new(4, 120.0).with_prefill_estimate(32768.0 / 4096.0);
        let mut t = 8.0;
        for producing in 1..4u32 {
            for _ in 0..32 {
                let waiting = f64::from(4 - producing);
                let o = obs(t, Some(f64::from(producing)), Some(waiting), producing);
                assert_eq!(d.observe(o), Decision::Wait, "t={t}");
                t += 0.25;
            }
        }
        // A real plateau is still found, after 1.5 prefills without progress.
        let mut d = Readiness::new(4, 120.0).with_prefill_estimate(8.0);
        assert_eq!(d.observe(obs(8.0, Some(2.0), Some(2.0), 2)), Decision::Wait);
        assert_eq!(
            d.observe(obs(19.0, Some(2.0), Some(2.0), 2)),
            Decision::Wait
        );
        match d.observe(obs(20.0, Some(2.0), Some(2.0), 2)) {
            Decision::Plateau { running, reason } => {
                assert_eq!(running, 2.0);
                assert!(reason.contains("held=12.0s"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // Without metrics the same ramp waits too.
        let mut d = Readiness::new(4, 120.0).with_prefill_estimate(8.0);
        assert_eq!(d.observe(obs(8.0, None, None, 1)), Decision::Wait);
        assert_eq!(d.observe(obs(15.9, None, None, 1)), Decision::Wait);
        assert_eq!(d.observe(obs(16.0, None, None, 2)), Decision::Wait);
    }

    #[test]
    fn timeout_reports_the_first_failing_condition() {
        let mut d = Readiness::new(2, 10.0).with_holds(3.0, 1e9);
        assert_eq!(
            d.observe(obs(10.0, Some(1.0), Some(0.0), 1)),
            Decision::Timeout("running_reqs=1/2".into())
        );
        let mut d = Readiness::new(2, 10.0);
        assert_eq!(
            d.observe(obs(11.0, None, None, 0)),
            Decision::Timeout("metrics_unavailable".into())
        );
    }

    #[test]
    fn without_metrics_all_streams_producing_is_ready() {
        let mut d = Readiness::new(2, 60.0);
        d.observe(obs(1.0, None, None, 2));
        assert!(
            matches!(d.observe(obs(4.0, None, None, 2)), Decision::Ready(r) if r.starts_with("metrics_unavailable"))
        );
    }

    #[test]
    fn auto_limit_scales_with_prefill_speed() {
        assert_eq!(auto_limit(1, 0, None), 60.0);
        assert_eq!(auto_limit(1, 65_536, None), 120.0);
        // 128k at 1,000 tok/s: one cold prefill ≈ 131 s.
        assert!(auto_limit(4, 131_072, Some(1000.0)) > 300.0);
    }
}
