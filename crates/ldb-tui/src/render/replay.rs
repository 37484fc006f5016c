//! The replay view inside CURRENT: a trace replay's or session run's
//! progress against its schedule — requests due, sent, completed, failed
//! and in flight, elapsed against the schedule's span, and for sessions the
//! sessions and turns done.

use ldb_core::live::replay::{ReplayKind, ReplayProgress};
use ratatui::text::{Line, Span};

use crate::format;
use crate::theme;

fn warn_if(v: u64) -> ratatui::style::Style {
    if v > 0 { theme::warn() } else { theme::text() }
}

/// The lines of the view, `width` columns wide.
pub fn lines(p: &ReplayProgress, width: usize, finished: bool) -> Vec<Line<'static>> {
    let title = match p.kind {
        ReplayKind::Trace => "TRACE REPLAY ".to_string(),
        ReplayKind::Sessions => format!("SESSIONS {} × {} turns ", p.sessions, p.turns),
    };
    let clock = match p.total {
        Some(t) => format!("{} of {}", format::duration(p.elapsed), format::duration(t)),
        None => format::duration(p.elapsed),
    };
    let mut out = vec![Line::from(vec![
        Span::styled(title, theme::title()),
        Span::styled(if finished { "DONE" } else { "RUNNING" }, theme::active()),
        Span::raw(format!("  elapsed {clock}")),
    ])];
    let frac = p.fraction_done();
    let bar_w = width.saturating_sub(24).clamp(8, 30);
    out.push(Line::from(vec![
        Span::styled(format::bar(frac, bar_w), theme::value()),
        Span::raw(format!(
            " {:>3.0}%  ended {}/{}",
            frac * 100.0,
            p.completed + p.errors,
            p.scheduled
        )),
    ]));
    let behind = p.behind();
    out.push(Line::from(vec![
        Span::raw(format!(
            "scheduled {}  due {}  sent {}",
            p.scheduled, p.due, p.sent
        )),
        Span::styled(
            if behind > 0 {
                format!(" ({behind} waiting)")
            } else {
                String::new()
            },
            theme::warn(),
        ),
    ]));
    out.push(Line::from(vec![
        Span::raw(format!("completed {}  errors ", p.completed)),
        Span::styled(p.errors.to_string(), warn_if(p.errors)),
        Span::raw(format!("  in flight {}", p.in_flight)),
    ]));
    if p.kind == ReplayKind::Sessions {
        out.push(Line::raw(format!(
            "sessions done {}/{}  turns done {}/{}",
            p.sessions_done,
            p.sessions,
            p.completed,
            p.sessions * u64::from(p.turns)
        )));
    }
    out
}

/// The plain mode's progress line (logs and CI).
pub fn plain_line(p: &ReplayProgress) -> String {
    let (what, unit) = match p.kind {
        ReplayKind::Trace => ("trace replay".to_string(), ""),
        ReplayKind::Sessions => (
            format!("sessions {}/{} done", p.sessions_done, p.sessions),
            "turns ",
        ),
    };
    let clock = match p.total {
        Some(t) => format!("{:.0}/{:.0}s", p.elapsed, t),
        None => format!("{:.0}s", p.elapsed),
    };
    format!(
        "{what} {} {clock} {unit}ended {}/{} due {} sent {} completed {} errors {} in flight {}",
        format::ascii_bar(p.fraction_done(), 10),
        p.completed + p.errors,
        p.scheduled,
        p.due,
        p.sent,
        p.completed,
        p.errors,
        p.in_flight
    )
}

#[cfg(test)]
mod tests {
    use ldb_core::live::{LiveSnapshot, Phase};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::model::Model;

    fn screen(snap: LiveSnapshot) -> String {
        let model = Model::new(snap, (150, 40), true);
        let mut t = Terminal::new(TestBackend::new(150, 40)).expect("terminal");
        t.draw(|f| crate::render::render(f, &model)).expect("drawn");
        let buf = t.backend().buffer();
        let w = usize::from(buf.area.width);
        let cells: Vec<&str> = buf.content().iter().map(|c| c.symbol()).collect();
        cells.chunks(w).map(|r| r.concat() + "\n").collect()
    }

    #[test]
    fn a_trace_replay_shows_its_progress_against_the_schedule() {
        let snap = LiveSnapshot {
            phase: Phase::Burst,
            replay: Some(ReplayProgress {
                kind: ReplayKind::Trace,
                scheduled: 200,
                due: 120,
                sent: 117,
                completed: 100,
                errors: 2,
                in_flight: 15,
                elapsed: 30.0,
                total: Some(60.0),
                ..ReplayProgress::default()
            }),
            ..LiveSnapshot::default()
        };
        let s = screen(snap);
        for want in [
            "TRACE REPLAY RUNNING",
            "elapsed 30s of 1m 00s",
            "51%  ended 102/200",
            "scheduled 200  due 120  sent 117 (3 waiting)",
            "completed 100  errors 2  in flight 15",
        ] {
            assert!(s.contains(want), "{want} missing:\n{s}");
        }
    }

    #[test]
    fn sessions_show_turns_and_sessions_done() {
        let snap = LiveSnapshot {
            phase: Phase::Done,
            replay: Some(ReplayProgress {
                kind: ReplayKind::Sessions,
                scheduled: 32,
                due: 32,
                sent: 32,
                completed: 32,
                sessions: 8,
                turns: 4,
                sessions_done: 8,
                elapsed: 12.0,
                ..ReplayProgress::default()
            }),
            ..LiveSnapshot::default()
        };
        let s = screen(snap);
        for want in [
            "SESSIONS 8 × 4 turns DONE",
            "sessions done 8/8  turns done 32/32",
            "100%",
        ] {
            assert!(s.contains(want), "{want} missing:\n{s}");
        }
        assert!(!s.contains("waiting"), "{s}");
    }

    #[test]
    fn plain_mode_prints_the_progress_while_the_replay_runs() {
        use std::time::{Duration, Instant};
        let mut snap = LiveSnapshot {
            phase: Phase::Burst,
            replay: Some(ReplayProgress {
                scheduled: 10,
                due: 5,
                sent: 5,
                completed: 4,
                in_flight: 1,
                elapsed: 2.0,
                total: Some(4.0),
                ..ReplayProgress::default()
            }),
            ..LiveSnapshot::default()
        };
        let mut p = crate::plain::PlainPrinter::new(Duration::from_secs(5));
        let lines = p.lines(&snap, Instant::now(), "12:00:00");
        assert_eq!(
            lines,
            [
                "12:00:00 trace replay [####------] 2/4s ended 4/10 due 5 sent 5 completed 4 \
              errors 0 in flight 1"
            ]
        );
        snap.phase = Phase::Done;
        let mut p = crate::plain::PlainPrinter::new(Duration::from_secs(5));
        assert!(p.lines(&snap, Instant::now(), "12:00:01").is_empty());
    }
}
