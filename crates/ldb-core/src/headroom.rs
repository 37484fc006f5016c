//! Was the benchmark itself the bottleneck of a window?
//!
//! A client that cannot keep up reports a lower rate and later tokens without
//! saying so. Two signs, each measured over the window:
//!
//! - **event-loop lag**: a timer on the benchmark's runtime is due every
//!   10 ms; how late it fires is how long a token that has arrived waits
//!   before the client reads it (a runtime with more ready work than CPU, or
//!   a process that is not scheduled). Its 99th percentile above
//!   [`LOOP_LAG_LIMIT_S`] means latencies carry the client's own delay.
//! - **CPU share**: the CPU time of the benchmark's threads over the window,
//!   divided by the window and the CPUs it may run on. Above
//!   [`CPU_SHARE_LIMIT`] the client has no room left to read faster.
//!
//! Either one marks the cell `client_limited`. Parsing and arithmetic only;
//! the runner takes the samples.

use crate::stats::percentile_sorted;

/// Event-loop lag p99 (seconds) above which the client limited the window.
/// Five times the probe's period: far above a busy but healthy machine's
/// scheduling delay (a few ms), well below a human-visible stutter.
pub const LOOP_LAG_LIMIT_S: f64 = 0.05;

/// CPU share above which the client limited the window.
pub const CPU_SHARE_LIMIT: f64 = 0.9;

/// The client's headroom over one window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Headroom {
    /// CPU seconds of the benchmark's threads / (window × usable CPUs), 0–1.
    pub cpu_share: Option<f64>,
    /// 99th percentile of the event-loop timer's lateness, seconds.
    pub loop_lag_p99_s: Option<f64>,
}

impl Headroom {
    /// From the window's CPU seconds, its length, the CPUs the process may
    /// use and the lag probe's samples (seconds, any order).
    pub fn measure(cpu_s: Option<f64>, window_s: f64, cpus: usize, lag: &[f64]) -> Headroom {
        let cpu_share = cpu_s
            .filter(|_| window_s > 0.0 && cpus > 0)
            .map(|s| (s / (window_s * cpus as f64)).clamp(0.0, 1.0));
        let loop_lag_p99_s = if lag.is_empty() {
            None
        } else {
            let mut v: Vec<f64> = lag.iter().copied().filter(|x| x.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            (!v.is_empty()).then(|| percentile_sorted(&v, 99.0).max(0.0))
        };
        Headroom {
            cpu_share,
            loop_lag_p99_s,
        }
    }

    /// The client, not the server, limited the window.
    pub fn limited(&self) -> bool {
        self.loop_lag_p99_s.is_some_and(|l| l > LOOP_LAG_LIMIT_S)
            || self.cpu_share.is_some_and(|s| s > CPU_SHARE_LIMIT)
    }

    /// "its event loop ran 120 ms late at p99, it used 95 % of its CPUs":
    /// the signs that fired, for a warning; `None` when none did.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(l) = self.loop_lag_p99_s.filter(|l| *l > LOOP_LAG_LIMIT_S) {
            parts.push(format!(
                "its event loop ran {:.0} ms late at p99 (limit {:.0} ms)",
                l * 1e3,
                LOOP_LAG_LIMIT_S * 1e3
            ));
        }
        if let Some(s) = self.cpu_share.filter(|s| *s > CPU_SHARE_LIMIT) {
            parts.push(format!(
                "it used {:.0} % of the CPUs it may run on",
                s * 100.0
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_client_is_not_limited() {
        let lag: Vec<f64> = (0..1000).map(|i| f64::from(i % 3) * 1e-3).collect();
        let h = Headroom::measure(Some(0.4), 10.0, 2, &lag);
        assert_eq!(h.cpu_share, Some(0.02));
        assert!(h.loop_lag_p99_s.expect("lag") <= 0.002);
        assert!(!h.limited());
        assert_eq!(h.describe(), None);
    }

    #[test]
    fn a_late_event_loop_marks_the_window() {
        // 2 % of the ticks 80 ms late: the p99 is one of them
        let lag: Vec<f64> = (0..1000)
            .map(|i| if i % 50 == 0 { 0.08 } else { 0.001 })
            .collect();
        let h = Headroom::measure(Some(1.0), 10.0, 2, &lag);
        assert!(h.limited(), "{h:?}");
        let d = h.describe().expect("describes");
        assert!(d.contains("80 ms late at p99"), "{d}");
        // 0.5 % late only: p99 is on time
        let rare: Vec<f64> = (0..1000)
            .map(|i| if i % 200 == 0 { 0.5 } else { 0.001 })
            .collect();
        assert!(!Headroom::measure(None, 10.0, 2, &rare).limited());
    }

    #[test]
    fn a_saturated_cpu_marks_the_window() {
        let h = Headroom::measure(Some(19.0), 10.0, 2, &[]);
        assert_eq!(h.cpu_share, Some(0.95));
        assert!(h.limited());
        assert!(h.describe().expect("d").contains("95 %"));
        // more CPU time than the window holds (threads that ended, rounding): capped
        assert_eq!(
            Headroom::measure(Some(50.0), 10.0, 2, &[]).cpu_share,
            Some(1.0)
        );
    }

    #[test]
    fn unknowns_stay_unknown() {
        let h = Headroom::measure(None, 0.0, 0, &[]);
        assert_eq!(h, Headroom::default());
        assert!(!h.limited());
        assert_eq!(Headroom::measure(Some(1.0), 0.0, 2, &[]).cpu_share, None);
        assert_eq!(
            Headroom::measure(None, 1.0, 2, &[f64::NAN]).loop_lag_p99_s,
            None
        );
    }
}
