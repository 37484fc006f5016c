//! The time limits of one response on the lean reader, and the one timer
//! that watches them all.
//!
//! The timer is not moved on each read: when it fires, the limits are
//! checked against the latest read and token, and it is set again to the
//! nearest one still ahead. A limit that comes closer (the idle limit armed
//! by a token, a drain, an error body's wait) moves it earlier at once.

use std::time::Duration;

use tokio::time::Instant;

/// No byte for this long ends the response (as reqwest's read timeout).
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(600);
/// How long to wait for the end of a body after its `[DONE]`.
const DRAIN: Duration = Duration::from_millis(500);
/// How long an error answer's body is waited for.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(10);

/// The deadlines of one response; `None` is a limit not running.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The latest read from the socket (the read timeout runs from it).
    pub(super) last_read: Instant,
    /// No token yet: the first-token limit.
    awaiting_first: Option<Instant>,
    /// The idle limit, armed again by every token.
    idle: Option<Instant>,
    /// An error answer's body: its own wait, instead of the token limits.
    error_body: Option<Instant>,
    /// `[DONE]` arrived: the wait for the body's terminator.
    drain: Option<Instant>,
}

/// The limit that ran out, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    /// The body's end did not follow `[DONE]` in time.
    Drain,
    /// An error answer's body did not end in time.
    ErrorBody,
    /// No first token in time.
    FirstToken,
    /// No token for the idle limit.
    Idle,
    /// Nothing read for [`READ_TIMEOUT`].
    Read,
}

impl Limits {
    /// The limits as the request is sent.
    pub(super) fn new(now: Instant, first_deadline: Option<Instant>) -> Limits {
        Limits {
            last_read: now,
            awaiting_first: first_deadline,
            idle: None,
            error_body: None,
            drain: None,
        }
    }

    /// When the nearest limit runs out.
    pub(super) fn earliest(&self) -> Instant {
        [self.awaiting_first, self.idle, self.error_body, self.drain]
            .into_iter()
            .flatten()
            .fold(self.last_read + READ_TIMEOUT, Instant::min)
    }

    /// The limit that has run out at `now`, if any.
    pub(super) fn expired(&self, now: Instant) -> Option<Expired> {
        let past = |d: Option<Instant>| d.is_some_and(|d| now >= d);
        if past(self.drain) {
            Some(Expired::Drain)
        } else if past(self.error_body) {
            Some(Expired::ErrorBody)
        } else if past(self.awaiting_first) {
            Some(Expired::FirstToken)
        } else if past(self.idle) {
            Some(Expired::Idle)
        } else if now >= self.last_read + READ_TIMEOUT {
            Some(Expired::Read)
        } else {
            None
        }
    }

    /// The body finished after `[DONE]` is being read.
    pub(super) fn draining(&self) -> bool {
        self.drain.is_some()
    }

    /// A token (or chunk) arrived at the latest read: the first-token limit
    /// is met and the idle limit starts again.
    pub(super) fn on_token(&mut self, idle_timeout: Option<Duration>) {
        self.awaiting_first = None;
        self.idle = idle_timeout.map(|limit| self.last_read + limit);
    }

    /// The answer is an error whose body is being read: no token limits
    /// for it, its own wait (set once).
    pub(super) fn on_error_body(&mut self) {
        if self.error_body.is_none() {
            self.awaiting_first = None;
            self.idle = None;
            self.error_body = Some(self.last_read + ERROR_BODY_WAIT);
        }
    }

    /// `[DONE]` arrived: wait a little for the body's terminator (reading
    /// it keeps the connection for the next request), no token limits.
    pub(super) fn start_drain(&mut self, now: Instant) {
        self.drain = Some(now + DRAIN);
        self.awaiting_first = None;
        self.idle = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_run_out_in_the_checked_order_and_the_timer_takes_the_nearest() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut l = Limits::new(t0, Some(t0 + s(5)));
        assert_eq!(l.earliest(), t0 + s(5));
        assert_eq!(l.expired(t0 + s(4)), None);
        assert_eq!(l.expired(t0 + s(5)), Some(Expired::FirstToken));
        l.last_read = t0 + s(1);
        l.on_token(Some(s(2)));
        assert_eq!(l.earliest(), t0 + s(3));
        assert_eq!(l.expired(t0 + s(3)), Some(Expired::Idle));
        l.start_drain(t0 + s(1));
        assert!(l.draining());
        assert_eq!(l.earliest(), t0 + s(1) + DRAIN);
        assert_eq!(l.expired(t0 + s(3)), Some(Expired::Drain));
        let mut quiet = Limits::new(t0, None);
        assert_eq!(quiet.earliest(), t0 + READ_TIMEOUT);
        assert_eq!(quiet.expired(t0 + READ_TIMEOUT), Some(Expired::Read));
        quiet.on_error_body();
        assert_eq!(quiet.expired(t0 + s(10)), Some(Expired::ErrorBody));
    }
}
