//! The live progress of a trace replay (`--trace`) or a session run
//! (`--sessions`), for the dashboard's replay view: how many requests were
//! due, sent and completed against the schedule, how many are in flight,
//! and the elapsed time against the schedule's span. Plain data.

/// Which replay runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReplayKind {
    /// A trace replayed at its own times.
    #[default]
    Trace,
    /// Multi-turn sessions.
    Sessions,
}

/// Where a replay stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayProgress {
    /// Trace or sessions.
    pub kind: ReplayKind,
    /// Requests the replay will schedule (sessions: sessions × turns).
    pub scheduled: u64,
    /// Requests whose scheduled time has come.
    pub due: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests that completed.
    pub completed: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Requests open now.
    pub in_flight: u64,
    /// Seconds since the replay's start.
    pub elapsed: f64,
    /// Seconds the schedule spans (the last request's due time); `None`
    /// for sessions, whose schedule follows the replies.
    pub total: Option<f64>,
    /// Sessions: how many run.
    pub sessions: u64,
    /// Sessions: turns per session.
    pub turns: u32,
    /// Sessions whose every turn has ended.
    pub sessions_done: u64,
}

impl ReplayProgress {
    /// Share of the scheduled requests that have ended (completed or
    /// failed), 0–1.
    pub fn fraction_done(&self) -> f64 {
        if self.scheduled == 0 {
            return 0.0;
        }
        ((self.completed + self.errors) as f64 / self.scheduled as f64).clamp(0.0, 1.0)
    }

    /// Requests due but not yet sent: `--max-in-flight` holding them back,
    /// or a client that cannot keep up with the schedule.
    pub fn behind(&self) -> u64 {
        self.due.saturating_sub(self.sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_and_backlog() {
        let p = ReplayProgress {
            scheduled: 10,
            due: 6,
            sent: 4,
            completed: 2,
            errors: 1,
            ..ReplayProgress::default()
        };
        assert!((p.fraction_done() - 0.3).abs() < 1e-12);
        assert_eq!(p.behind(), 2);
        assert_eq!(ReplayProgress::default().fraction_done(), 0.0);
    }
}
