//! Every number a frame carries is checked before it is used: a count the
//! process could not honour (`concurrency: 4e9`), a duration `Duration`
//! cannot hold (`idle_timeout_s: 1e300`), a time far outside any run, an
//! index out of its list. A frame that fails ends that member (or, on a
//! follower, following) with the reason — never a panic, never an order
//! carried out in part. Frames are authenticated first (`shard/seal.rs`),
//! so this guards against a buggy or mismatched peer as much as a hostile one.

use super::batch::BatchOrder;
use super::rate::RateOrder;
use super::session_wire::{SessionOrder, SessionShare};
use super::wire::{Msg, ShardCellData};

/// Most streams or workers one shard is asked to run (far above a real cell).
pub(crate) const MAX_STREAMS: u64 = 100_000;
/// Most requests in one shard's part of a batch or a schedule.
const MAX_REQUESTS: u64 = 100_000_000;
/// Longest `--stream-idle-timeout` an order may carry (a week).
const MAX_IDLE_S: f64 = 7.0 * 86_400.0;
/// Latest Unix time accepted (year 2286); a run's times are far below.
const MAX_UNIX: f64 = 1e10;
/// Latest time on a run clock (seconds since the process started; a year).
const MAX_RUN_S: f64 = 366.0 * 86_400.0;

/// The first number of `m` out of its range, named (Ok: all in range).
pub(crate) fn check(m: &Msg) -> Result<(), String> {
    match m {
        Msg::CellStart {
            concurrency,
            idle_timeout_s,
            ..
        } => {
            count("concurrency", u64::from(*concurrency), MAX_STREAMS)?;
            idle("idle_timeout_s", *idle_timeout_s)
        }
        Msg::RateStart(o) => rate(o),
        Msg::BatchStart(o) => batch(o),
        Msg::SessionStart(o) => sessions(o),
        Msg::Window { start, end, .. } => {
            unix("window start", *start)?;
            unix("window end", *end)?;
            ordered("window", *start, *end)
        }
        Msg::Pong { clock, .. } => unix("clock", *clock),
        // Its token counts are read one after the other while tokens
        // arrive: no order between them is checked.
        Msg::Status { producing, .. } => count("producing", u64::from(*producing), MAX_STREAMS),
        Msg::CellDone(d) => done(d),
        _ => Ok(()),
    }
}

fn rate(o: &RateOrder) -> Result<(), String> {
    unix("t0", o.t0)?;
    unix("limit", o.limit)?;
    ordered("schedule", o.t0, o.limit)?;
    count("requests", o.requests.len() as u64, MAX_REQUESTS)?;
    count("max_in_flight", o.max_in_flight, MAX_STREAMS)?;
    idle("idle_timeout_s", o.idle_timeout_s)?;
    if o.body_of.len() != o.requests.len() {
        return Err("body_of does not give one body per request".into());
    }
    for &(_, due) in &o.requests {
        span("due time", due, MAX_RUN_S)?;
    }
    Ok(())
}

/// Whether every request of a rate order names a body the follower holds.
/// Checked after the bodies sent ahead in [`Msg::RateBodies`] chunks are
/// joined to the order: on the wire the order alone may hold none of them.
pub(crate) fn rate_bodies(o: &RateOrder) -> Result<(), String> {
    if o.body_of.iter().any(|&b| b as usize >= o.bodies.len()) {
        return Err("body_of names a body that is not there".into());
    }
    Ok(())
}

fn batch(o: &BatchOrder) -> Result<(), String> {
    unix("start", o.start)?;
    count("workers", u64::from(o.workers), MAX_STREAMS)?;
    count("requests", o.requests, MAX_REQUESTS)?;
    idle("idle_timeout_s", o.idle_timeout_s)
}

fn done(d: &ShardCellData) -> Result<(), String> {
    count("concurrency", u64::from(d.concurrency), MAX_REQUESTS)?;
    unix("origin_unix", d.origin_unix)?;
    if let Some((s, e)) = d.window_unix {
        unix("window start", s)?;
        unix("window end", e)?;
    }
    span("producing_mean", d.producing_mean, MAX_STREAMS as f64)?;
    if let Some(c) = d.client_cpu_share {
        span("client_cpu_share", c, 1e6)?;
    }
    for o in &d.outcomes {
        span("request start", o.track.start(), MAX_RUN_S)?;
        if let Some(t) = o.done_at {
            span("request end", t, MAX_RUN_S)?;
        }
    }
    for &t in &d.ends {
        span("request end", t, MAX_RUN_S)?;
    }
    if let Some(r) = &d.rate {
        for &(_, t) in &r.scheduled {
            span("due time", t, MAX_RUN_S)?;
        }
    }
    if let Some(s) = &d.sessions {
        session_share(s)?;
    }
    Ok(())
}

/// Most tokens a turn may ask for or carry (far above any model's context).
const MAX_TOKENS: u64 = 1 << 40;
/// Roles a session's message may take.
const ROLES: &[&str] = &["system", "user", "assistant", "tool"];

fn sessions(o: &SessionOrder) -> Result<(), String> {
    unix("t0", o.t0)?;
    unix("limit", o.limit)?;
    ordered("sessions", o.t0, o.limit)?;
    count("sessions", o.sessions.len() as u64, MAX_REQUESTS)?;
    count("context", o.context, MAX_TOKENS)?;
    idle("idle_timeout_s", o.idle_timeout_s)?;
    if let Some((_, tokens)) = o.tool_loop {
        count("tool result tokens", tokens, MAX_TOKENS)?;
    }
    let turns: usize = o.sessions.iter().map(|s| s.turns.len()).sum();
    count("turns", turns as u64, MAX_REQUESTS)?;
    for t in o.sessions.iter().flat_map(|s| &s.turns) {
        if t.after_reply.is_some() == t.at.is_some() {
            return Err("a turn is due either after a reply or at a time".into());
        }
        for d in t.after_reply.iter().chain(&t.at) {
            if *d < 0.0 {
                return Err(format!("due time {d} is negative"));
            }
            span("due time", *d, MAX_RUN_S)?;
        }
        count("max_tokens", t.max_tokens, MAX_TOKENS)?;
        count("built_tokens", t.built_tokens, MAX_TOKENS)?;
        if t.adds.iter().any(|m| !ROLES.contains(&m.role.as_str())) {
            return Err(format!("a message's role is not one of {ROLES:?}"));
        }
    }
    Ok(())
}

fn session_share(s: &SessionShare) -> Result<(), String> {
    count("turns", s.turns.len() as u64, MAX_REQUESTS)?;
    if s.caches.len() != s.turns.len() {
        return Err("caches do not give one entry per turn".into());
    }
    count("most_in_flight", s.most_in_flight, MAX_REQUESTS)?;
    for t in &s.turns {
        let r = &t.request;
        for v in [
            Some(r.scheduled),
            Some(r.sent),
            r.first_token,
            r.first_answer,
            r.completed_at,
        ]
        .into_iter()
        .flatten()
        {
            span("turn time", v, MAX_RUN_S)?;
        }
        span("tool wait", t.tool_wait, MAX_RUN_S)?;
        count("turn", u64::from(t.turn), MAX_REQUESTS)?;
    }
    for sp in &s.spans {
        span("turn start", sp.sent, MAX_RUN_S)?;
        span("turn end", sp.end, MAX_RUN_S)?;
    }
    Ok(())
}

fn count(name: &str, v: u64, most: u64) -> Result<(), String> {
    if v > most {
        return Err(format!("{name} {v} is above {most}"));
    }
    Ok(())
}

fn idle(name: &str, v: Option<f64>) -> Result<(), String> {
    match v {
        Some(s) if !(s.is_finite() && s > 0.0 && s <= MAX_IDLE_S) => Err(format!(
            "{name} {s} is not a duration in (0, {MAX_IDLE_S}] s"
        )),
        _ => Ok(()),
    }
}

fn unix(name: &str, t: f64) -> Result<(), String> {
    if !(t.is_finite() && t > 0.0 && t <= MAX_UNIX) {
        return Err(format!("{name} {t} is not a Unix time"));
    }
    Ok(())
}

/// `v` within [−`most`, `most`] (run-clock times may precede the origin).
fn span(name: &str, v: f64, most: f64) -> Result<(), String> {
    if !(v.is_finite() && v.abs() <= most.abs()) {
        return Err(format!("{name} {v} is out of range"));
    }
    Ok(())
}

fn ordered(name: &str, start: f64, end: f64) -> Result<(), String> {
    if end < start || end - start > MAX_RUN_S {
        return Err(format!("{name} ends before it starts or lasts over a year"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_start(concurrency: u32, idle: Option<f64>) -> Msg {
        Msg::CellStart {
            cell: 1,
            concurrency,
            body: "{}".into(),
            idle_timeout_s: idle,
        }
    }

    #[test]
    fn orders_a_process_cannot_honour_are_refused() {
        assert!(check(&cell_start(4, Some(30.0))).is_ok());
        assert!(check(&cell_start(4, None)).is_ok());
        let e = check(&cell_start(4_000_000_000, None)).expect_err("4e9 streams");
        assert!(e.contains("concurrency"), "{e}");
        for bad in [1e300, -1.0, 0.0] {
            let e = check(&cell_start(4, Some(bad))).expect_err("idle");
            assert!(e.contains("idle_timeout_s"), "{e}");
        }
        let w = |start, end| Msg::Window {
            cell: 1,
            start,
            end,
        };
        assert!(check(&w(1.7e9, 1.7e9 + 4.0)).is_ok());
        assert!(check(&w(1.7e9, 1e300)).is_err());
        assert!(check(&w(1.7e9 + 4.0, 1.7e9)).is_err());
    }

    #[test]
    fn a_rate_order_is_checked_to_its_last_number() {
        let good = RateOrder {
            cell: 1,
            t0: 1.7e9,
            limit: 1.7e9 + 10.0,
            requests: vec![(0, 0.0), (1, 0.5)],
            bodies: vec!["{}".into()],
            body_of: vec![0, 0],
            max_in_flight: 2,
            idle_timeout_s: None,
        };
        assert!(check(&Msg::RateStart(Box::new(good.clone()))).is_ok());
        let bad = [
            RateOrder {
                max_in_flight: u64::MAX,
                ..good.clone()
            },
            RateOrder {
                body_of: vec![0],
                ..good.clone()
            },
            RateOrder {
                requests: vec![(0, 0.0), (1, 1e300)],
                ..good.clone()
            },
            RateOrder {
                limit: 1e300,
                ..good.clone()
            },
        ];
        for o in bad {
            assert!(
                check(&Msg::RateStart(Box::new(o.clone()))).is_err(),
                "{o:?}"
            );
        }
        // A body index past the order's own bodies passes the wire (the
        // bodies may have come ahead in chunks) and is refused once joined.
        let ahead = RateOrder {
            body_of: vec![0, 9],
            ..good.clone()
        };
        assert!(check(&Msg::RateStart(Box::new(ahead.clone()))).is_ok());
        assert!(rate_bodies(&ahead).is_err());
        assert!(rate_bodies(&good).is_ok());
    }

    #[test]
    fn a_result_with_impossible_times_is_refused() {
        let good = ShardCellData {
            origin_unix: 1.7e9,
            window_unix: Some((1.7e9, 1.7e9 + 4.0)),
            ..ShardCellData::default()
        };
        assert!(check(&Msg::CellDone(Box::new(good.clone()))).is_ok());
        let bad = ShardCellData {
            ends: vec![1e300],
            ..good
        };
        assert!(check(&Msg::CellDone(Box::new(bad))).is_err());
    }

    #[test]
    fn a_session_order_and_its_turns_are_checked() {
        use super::super::session_wire::{WireMessage, WireSession, WireTurn};
        let turn = WireTurn {
            after_reply: Some(0.5),
            adds: vec![WireMessage {
                role: "user".into(),
                content: "hi".into(),
                ..WireMessage::default()
            }],
            max_tokens: 16,
            ..WireTurn::default()
        };
        let good = SessionOrder {
            t0: 1.7e9,
            limit: 1.7e9 + 600.0,
            sessions: vec![WireSession {
                id: 1,
                turns: vec![turn.clone()],
            }],
            ..SessionOrder::default()
        };
        let msg = |o: &SessionOrder| Msg::SessionStart(Box::new(o.clone()));
        assert!(check(&msg(&good)).is_ok());
        let with_turn = |t: WireTurn| SessionOrder {
            sessions: vec![WireSession {
                id: 1,
                turns: vec![t],
            }],
            ..good.clone()
        };
        let bad = [
            SessionOrder {
                limit: 1.7e9 - 1.0,
                ..good.clone()
            },
            with_turn(WireTurn {
                after_reply: Some(-1.0),
                ..turn.clone()
            }),
            with_turn(WireTurn {
                after_reply: None,
                ..turn.clone()
            }),
            with_turn(WireTurn {
                max_tokens: u64::MAX,
                ..turn.clone()
            }),
            with_turn(WireTurn {
                adds: vec![WireMessage {
                    role: "root".into(),
                    ..WireMessage::default()
                }],
                ..turn.clone()
            }),
        ];
        for o in &bad {
            assert!(check(&msg(o)).is_err(), "{o:?}");
        }
        let share = SessionShare {
            turns: vec![Default::default()],
            caches: vec![Default::default()],
            ..SessionShare::default()
        };
        let done = |s: SessionShare| {
            Msg::CellDone(Box::new(ShardCellData {
                origin_unix: 1.7e9,
                sessions: Some(Box::new(s)),
                ..ShardCellData::default()
            }))
        };
        assert!(check(&done(share.clone())).is_ok());
        let mut late = share.clone();
        late.turns[0].request.completed_at = Some(1e300);
        assert!(check(&done(late)).is_err());
        let uneven = SessionShare {
            caches: Vec::new(),
            ..share
        };
        assert!(check(&done(uneven)).is_err());
    }
}
