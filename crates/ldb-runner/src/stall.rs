//! Watching the cell driver's own lateness. The driver wakes every tick; a
//! pass that comes much later than one tick after the previous one means this
//! process was not running (starved of CPU, frozen, or blocked), so tokens
//! piled up unread in the sockets and the client's window count is wrong.

/// The longest gap between the driver's passes, beyond the tick, seconds.
#[derive(Debug, Clone)]
pub(crate) struct StallWatch {
    tick: f64,
    last: f64,
    worst: f64,
}

impl StallWatch {
    /// Start watching at `now` (run-clock seconds), for passes every `tick`.
    pub(crate) fn new(now: f64, tick: f64) -> Self {
        StallWatch {
            tick,
            last: now,
            worst: 0.0,
        }
    }

    /// The driver ran at `now`.
    pub(crate) fn pass(&mut self, now: f64) {
        self.worst = self.worst.max(now - self.last - self.tick);
        self.last = now;
    }

    /// The longest lateness seen (0 when every pass was on time).
    pub(crate) fn worst(&self) -> f64 {
        self.worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_time_passes_are_no_stall() {
        let mut w = StallWatch::new(10.0, 0.25);
        for i in 1..=40 {
            w.pass(10.0 + f64::from(i) * 0.25);
        }
        assert!(w.worst().abs() < 1e-9, "{}", w.worst());
    }

    #[test]
    fn the_longest_late_pass_counts_beyond_the_tick() {
        let mut w = StallWatch::new(0.0, 0.25);
        w.pass(0.25);
        w.pass(3.25); // 3 s gap: 2.75 s late
        w.pass(3.5);
        w.pass(4.5); // 1 s gap: 0.75 s late
        assert!((w.worst() - 2.75).abs() < 1e-9, "{}", w.worst());
    }

    #[test]
    fn early_passes_never_go_negative() {
        let mut w = StallWatch::new(0.0, 0.25);
        w.pass(0.01);
        assert_eq!(w.worst(), 0.0);
    }
}
