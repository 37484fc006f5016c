//! Plain mode: full lines for logs and CI, no terminal control.
//!
//! Each new event is printed once as `HH:MM:SS message`; while a cell's
//! measurement window (or a long prefill) runs, a progress line is printed
//! at most every `every` seconds.

use std::io::Write;
use std::time::{Duration, Instant};

use ldb_core::live::{CellStage, LiveSnapshot, Phase};
use ldb_core::tokens::format_context;

use crate::format;
use crate::model::{prefill_clock, running_prefill};

/// Turns successive snapshots into new output lines.
#[derive(Debug, Clone)]
pub struct PlainPrinter {
    every: Duration,
    seen: Vec<String>,
    last_progress: Option<(Instant, String)>,
    /// The running prefill row's clocks and when they were first seen, so
    /// its elapsed time and ETA count on between snapshots.
    prefill_stamp: Option<(PrefillKey, Instant)>,
}

type PrefillKey = (u64, f64, Option<f64>);

impl PlainPrinter {
    /// A printer that repeats progress lines at most every `every`.
    pub fn new(every: Duration) -> Self {
        PlainPrinter {
            every,
            seen: Vec::new(),
            last_progress: None,
            prefill_stamp: None,
        }
    }

    /// Lines to print for `snap` observed at `now`: new events, then a
    /// progress line when one is due. `clock` is the local `HH:MM:SS` used to
    /// stamp lines that do not carry a time already.
    pub fn lines(&mut self, snap: &LiveSnapshot, now: Instant, clock: &str) -> Vec<String> {
        let mut out = self.events(snap, clock);
        let key = running_prefill(snap).map(|(_, r)| (r.context, r.elapsed, r.eta));
        let since = match (key, &self.prefill_stamp) {
            (Some(k), Some((old, at))) if *old == k => now.duration_since(*at).as_secs_f64(),
            (Some(k), _) => {
                self.prefill_stamp = Some((k, now));
                0.0
            }
            (None, _) => {
                self.prefill_stamp = None;
                0.0
            }
        };
        if let Some((key, line)) = progress(snap, since) {
            let due = match &self.last_progress {
                Some((at, k)) => *k != key || now.duration_since(*at) >= self.every,
                None => true,
            };
            if due {
                out.push(format!("{clock} {line}"));
                self.last_progress = Some((now, key));
            }
        }
        out
    }

    /// Only the events of `snap` not printed yet.
    pub fn events(&mut self, snap: &LiveSnapshot, clock: &str) -> Vec<String> {
        let fresh = new_events(&self.seen, &snap.events);
        let out = snap.events[snap.events.len() - fresh..]
            .iter()
            .map(|e| stamp(e, clock))
            .collect();
        self.seen.clone_from(&snap.events);
        out
    }
}

/// How many entries at the end of `now` are new since `before`.
///
/// The runner keeps a bounded tail, so `now` is `before` with some entries
/// dropped from the front and new ones appended. The longest suffix of
/// `before` that `now` starts with is what was already printed.
pub fn new_events(before: &[String], now: &[String]) -> usize {
    let max = before.len().min(now.len());
    for k in (1..=max).rev() {
        if before[before.len() - k..] == now[..k] {
            return now.len() - k;
        }
    }
    now.len()
}

fn stamp(event: &str, clock: &str) -> String {
    let b = event.as_bytes();
    let stamped = b.len() >= 8
        && b[2] == b':'
        && b[5] == b':'
        && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit());
    if stamped {
        event.to_owned()
    } else {
        format!("{clock} {event}")
    }
}

/// (identity, text) of the progress line for what runs now, if anything.
fn progress(snap: &LiveSnapshot, since: f64) -> Option<(String, String)> {
    if let Some((i, row)) = running_prefill(snap) {
        let ctx = format_context(row.context);
        let (elapsed, left) = prefill_clock(row, since);
        let mut line = format!("prefill ctx={ctx} running {}", format::duration(elapsed));
        match (row.eta, left) {
            (Some(total), Some(left)) if left >= 0.0 => {
                let frac = elapsed / (row.elapsed + total).max(1e-9);
                line.push_str(&format!(
                    " eta ~{} {}",
                    format::duration(left),
                    format::ascii_bar(frac, 10)
                ));
            }
            (Some(total), Some(_)) => line.push_str(&format!(
                " (estimate ~{} exceeded)",
                format::duration(row.elapsed + total)
            )),
            _ => {}
        }
        return Some((format!("prefill {i}"), line));
    }
    if let (None, Some(p), false) = (&snap.current, &snap.replay, snap.phase == Phase::Done) {
        return Some(("replay".into(), crate::render::replay::plain_line(p)));
    }
    let c = snap.current.as_ref()?;
    let cell = format!("C={} ctx={}", c.concurrency, format_context(c.context));
    let running = format!(
        "running {}/{}",
        format::opt(c.running, 0, ""),
        c.concurrency
    );
    let window = c.stage == CellStage::Window;
    let key = format!("cell {} {} {window}", c.context, c.concurrency);
    if !window {
        // Scout, ramp-up or drain: say what it waits on, so a long ramp-up
        // does not look like a hang in the log.
        let line = format!(
            "{cell} {} {} {running} queued {}",
            c.stage.label(),
            format::duration(c.stage_elapsed),
            format::opt(c.queued, 0, ""),
        );
        return Some((key, line));
    }
    let frac = if c.window_total > 0.0 {
        c.window_elapsed / c.window_total
    } else {
        0.0
    };
    let tps = c
        .tps_trace
        .last()
        .map_or_else(|| "-".to_owned(), |v| format::tps(*v, true));
    let ci = c
        .rate_ci
        .as_ref()
        .map_or_else(String::new, |ci| format!(" {}", format::rate_ci(ci)));
    let line = format!(
        "{cell} {} {} {:.0}/{:.0}s {tps} tok/s {running}{ci}",
        c.stage.label(),
        format::ascii_bar(frac, 10),
        c.window_elapsed,
        c.window_total,
    );
    Some((key, line))
}

/// Write `lines` to `out`; false once the output is gone (closed pipe).
pub fn emit(out: &mut (impl Write + ?Sized), lines: &[String]) -> bool {
    for line in lines {
        if writeln!(out, "{line}").is_err() {
            return false;
        }
    }
    out.flush().is_ok()
}

/// The local wall-clock time as `HH:MM:SS`.
pub fn clock() -> String {
    chrono::Local::now().format("%H:%M:%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo;

    fn ev(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn new_events_handles_appends_and_sliding_tails() {
        assert_eq!(new_events(&[], &ev(&["a", "b"])), 2);
        assert_eq!(new_events(&ev(&["a", "b"]), &ev(&["a", "b"])), 0);
        assert_eq!(new_events(&ev(&["a", "b"]), &ev(&["a", "b", "c"])), 1);
        // Bounded tail: `a` fell off the front while `c`, `d` arrived.
        assert_eq!(new_events(&ev(&["a", "b"]), &ev(&["b", "c", "d"])), 2);
        // Everything replaced.
        assert_eq!(new_events(&ev(&["a", "b"]), &ev(&["x", "y"])), 2);
    }

    #[test]
    fn events_print_once_with_a_stamp() {
        let mut p = PlainPrinter::new(Duration::from_secs(5));
        let mut s = LiveSnapshot {
            events: ev(&["10:00:01 startup done", "cell start C=1 ctx=0"]),
            ..LiveSnapshot::default()
        };
        let t0 = Instant::now();
        assert_eq!(
            p.lines(&s, t0, "11:11:11"),
            ev(&["10:00:01 startup done", "11:11:11 cell start C=1 ctx=0"])
        );
        assert!(p.lines(&s, t0, "11:11:12").is_empty());
        s.events.push("10:00:05 cell done".into());
        assert_eq!(p.lines(&s, t0, "11:11:13"), ev(&["10:00:05 cell done"]));
    }

    #[test]
    fn an_auto_window_shows_its_live_interval() {
        let mut p = PlainPrinter::new(Duration::from_secs(5));
        let mut s = demo::mid_decode();
        s.events.clear();
        if let Some(c) = s.current.as_mut() {
            c.rate_ci = Some(ldb_core::live::LiveRateCi {
                mean: 475.0,
                half_width: 9.5,
                drift_rel: 0.001,
                target_rel: 0.01,
                min_s: 5.0,
            });
        }
        let lines = p.lines(&s, Instant::now(), "12:00:00");
        assert_eq!(
            lines,
            ev(&[
                "12:00:00 C=4 ctx=32k measuring [######----] 6/10s 475.4 tok/s running 4/4 \
                  ci ±2.0% (target ±1%) drift +0.1%"
            ])
        );
    }

    #[test]
    fn progress_lines_are_rate_limited_per_cell() {
        let mut p = PlainPrinter::new(Duration::from_secs(5));
        let mut s = demo::mid_decode();
        s.events.clear();
        let t0 = Instant::now();
        let first = p.lines(&s, t0, "12:00:00");
        assert_eq!(
            first,
            ev(&["12:00:00 C=4 ctx=32k measuring [######----] 6/10s 475.4 tok/s running 4/4"])
        );
        assert!(
            p.lines(&s, t0 + Duration::from_secs(2), "12:00:02")
                .is_empty()
        );
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(5), "12:00:05").len(),
            1
        );
        // A new cell prints at once.
        if let Some(c) = s.current.as_mut() {
            c.concurrency = 8;
        }
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(6), "12:00:06").len(),
            1
        );
        // Leaving the window (drain) prints at once, then every 5 s.
        if let Some(c) = s.current.as_mut() {
            c.stage = CellStage::Drain;
            c.stage_elapsed = 1.0;
        }
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(7), "12:00:07"),
            ev(&["12:00:07 C=8 ctx=32k drain 1s running 4/8 queued 0"])
        );
        assert!(
            p.lines(&s, t0 + Duration::from_secs(8), "12:00:08")
                .is_empty()
        );
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(12), "12:00:12").len(),
            1
        );
    }

    #[test]
    fn prefill_progress_shows_the_eta() {
        let mut p = PlainPrinter::new(Duration::from_secs(5));
        let mut s = demo::prefill_running();
        s.events.clear();
        assert_eq!(
            p.lines(&s, Instant::now(), "12:00:00"),
            ev(&["12:00:00 prefill ctx=32k running 2s eta ~1s [######----]"])
        );
    }

    #[test]
    fn prefill_clock_counts_on_between_snapshots() {
        let mut p = PlainPrinter::new(Duration::from_secs(5));
        let mut s = demo::prefill_running();
        s.events.clear();
        if let Some(r) = s.prefill.get_mut(1) {
            // As the runner publishes it: an estimate at the start, no elapsed.
            r.elapsed = 0.0;
            r.eta = Some(20.0);
        }
        let t0 = Instant::now();
        p.lines(&s, t0, "12:00:00");
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(5), "12:00:05"),
            ev(&["12:00:05 prefill ctx=32k running 5s eta ~15s [###-------]"])
        );
        assert_eq!(
            p.lines(&s, t0 + Duration::from_secs(25), "12:00:25"),
            ev(&["12:00:25 prefill ctx=32k running 25s (estimate ~20s exceeded)"])
        );
    }

    #[test]
    fn emit_reports_a_closed_output() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        assert!(!emit(&mut Closed, &ev(&["x"])));
        let mut buf = Vec::new();
        assert!(emit(&mut buf, &ev(&["a", "b"])));
        assert_eq!(buf, b"a\nb\n");
    }
}
