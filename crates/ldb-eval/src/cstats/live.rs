//! What the live view of the completion-stats mode shows, and the events
//! that change it. The runner sends [`CsEvent`]s; [`CsLive::apply`] is the
//! only place the view's state changes, so it is tested without a terminal.

use std::collections::{BTreeMap, VecDeque};

use super::active::ActiveSet;
use super::run::{CsRun, Phase};
use ldb_core::live::HardwareLive;
use ldb_core::stats::summarize;

/// What the run tells the display.
#[derive(Debug, Clone)]
pub enum CsEvent {
    /// A line for the log (startup, level verdicts).
    Note(String),
    /// A batch begins.
    Batch {
        /// Its phase.
        phase: Phase,
        /// Its concurrency.
        concurrency: usize,
        /// Requests it will send at most.
        count: usize,
    },
    /// A request finished.
    Run(Box<CsRun>),
    /// A level's summary is known.
    Level {
        /// Concurrency.
        concurrency: usize,
        /// Its phase.
        phase: Phase,
        /// Completed runs.
        completed: usize,
        /// Requests sent.
        attempted: usize,
        /// Aggregate gen tok/s.
        rate: f64,
        /// It became the best level.
        improved: bool,
    },
    /// A stop was asked for: the requests in flight are being cancelled.
    Stopping,
    /// The requests in flight now (sent a few times a second while a batch
    /// runs; an empty set when it ends).
    Active(Box<ActiveSet>),
}

/// Completed requests listed.
pub const RECENT_ROWS: usize = 8;

/// One row of the live "Concurrency Results" table.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveLevel {
    /// Concurrency.
    pub concurrency: usize,
    /// Phase.
    pub phase: Phase,
    /// Completed / sent.
    pub completed: usize,
    /// Sent.
    pub attempted: usize,
    /// Aggregate gen tok/s.
    pub rate: f64,
    /// It became the best level.
    pub improved: bool,
}

/// The live view's state.
#[derive(Debug, Clone, Default)]
pub struct CsLive {
    /// Panel title (the task's).
    pub title: String,
    /// Current phase.
    pub phase: Option<Phase>,
    /// Concurrency of the current batch.
    pub concurrency: usize,
    /// Requests of the current batch.
    pub batch_total: usize,
    /// Finished requests of the current batch.
    pub batch_done: usize,
    /// Best level so far and its rate.
    pub best: Option<(usize, f64)>,
    /// The scout's outcome, once known.
    pub scout: Option<String>,
    /// The latest notes (oldest first).
    pub notes: VecDeque<String>,
    /// The latest finished measured requests (newest last).
    pub recent: VecDeque<CsRun>,
    /// Levels done so far.
    pub levels: Vec<LiveLevel>,
    /// Completed measured runs: tokens, gen tok/s, TTFT.
    pub tokens: Vec<f64>,
    /// Per-run gen tok/s of completed runs.
    pub gen_rates: Vec<f64>,
    /// TTFT of completed runs.
    pub ttfts: Vec<f64>,
    /// Measured requests finished (any outcome).
    pub finished: usize,
    /// Failed requests.
    pub errors: usize,
    /// Score labels of completed runs.
    pub labels: BTreeMap<String, usize>,
    /// A stop was asked for.
    pub stopping: bool,
    /// The requests in flight.
    pub active: ActiveSet,
    /// The latest hardware sample, when telemetry runs.
    pub hardware: Option<HardwareLive>,
}

impl CsLive {
    /// A view for the task titled `title`.
    pub fn new(title: &str) -> CsLive {
        CsLive {
            title: title.to_owned(),
            ..CsLive::default()
        }
    }

    /// Take one event into the view.
    pub fn apply(&mut self, ev: CsEvent) {
        match ev {
            CsEvent::Note(n) => {
                self.notes.push_back(n);
                while self.notes.len() > 3 {
                    self.notes.pop_front();
                }
            }
            CsEvent::Batch {
                phase,
                concurrency,
                count,
            } => {
                self.phase = Some(phase);
                self.concurrency = concurrency;
                self.batch_total = count;
                self.batch_done = 0;
            }
            CsEvent::Run(r) => self.run(*r),
            CsEvent::Level {
                concurrency,
                phase,
                completed,
                attempted,
                rate,
                improved,
            } => {
                if improved || (phase != Phase::Probe && self.best.is_none()) {
                    self.best = Some((concurrency, rate));
                }
                self.levels.push(LiveLevel {
                    concurrency,
                    phase,
                    completed,
                    attempted,
                    rate,
                    improved,
                });
            }
            CsEvent::Stopping => self.stopping = true,
            CsEvent::Active(a) => self.active = *a,
        }
    }

    fn run(&mut self, r: CsRun) {
        self.batch_done += 1;
        if r.phase == Phase::PrefillScout {
            self.scout = Some(match (r.ok, r.prompt_tokens, r.ttft) {
                (true, Some(p), Some(t)) if t > 0.0 => {
                    format!("{p} prompt tok, TTFT {t:.2}s ({:.0} tok/s)", p as f64 / t)
                }
                (true, _, t) => format!("TTFT {:.2}s", t.unwrap_or(0.0)),
                (false, _, _) => format!("failed: {}", r.error.clone().unwrap_or_default()),
            });
            return;
        }
        self.finished += 1;
        if !r.ok && !r.cancelled {
            self.errors += 1;
        }
        if r.completed() {
            self.tokens.push(r.completion_tokens as f64);
            self.gen_rates.push(r.gen_tok_s);
            self.ttfts.push(r.ttft.unwrap_or(0.0));
            if let Some(l) = &r.score_label {
                *self.labels.entry(l.clone()).or_default() += 1;
            }
        }
        self.recent.push_back(r);
        while self.recent.len() > RECENT_ROWS {
            self.recent.pop_front();
        }
    }

    /// Completed measured runs.
    pub fn completed(&self) -> usize {
        self.tokens.len()
    }

    /// `(avg, p50, p90)` of completion tokens, gen tok/s and TTFT.
    pub fn stats(&self) -> [(f64, f64, f64); 3] {
        [&self.tokens, &self.gen_rates, &self.ttfts].map(|v| {
            let s = summarize(v.iter().copied());
            (s.avg, s.p50, s.p90)
        })
    }

    /// `PASS a / FAIL b`, `EXACT a / NEAR b / FAIL c`, with `/ TRUNC t`, or `-`.
    pub fn score_text(&self) -> String {
        let n = |l: &str| self.labels.get(l).copied().unwrap_or(0);
        if self.labels.is_empty() {
            return "-".into();
        }
        let trunc = if n("truncated") > 0 {
            format!(" / TRUNC {}", n("truncated"))
        } else {
            String::new()
        };
        if n("exact") + n("near") > 0 {
            format!(
                "EXACT {} / NEAR {} / FAIL {}{trunc}",
                n("exact"),
                n("near"),
                n("fail")
            )
        } else {
            format!("PASS {} / FAIL {}{trunc}", n("pass"), n("fail"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cstats::summary::tests::run;

    #[test]
    fn runs_levels_and_scout_update_the_view() {
        let mut v = CsLive::new("Completion Token Statistics");
        v.apply(CsEvent::Batch {
            phase: Phase::Probe,
            concurrency: 2,
            count: 2,
        });
        v.apply(CsEvent::Run(Box::new(run(100, 2.0, 2.5, Some("pass")))));
        let mut failed = run(0, 0.0, 1.0, None);
        failed.ok = false;
        v.apply(CsEvent::Run(Box::new(failed)));
        assert_eq!(
            (v.batch_done, v.finished, v.errors, v.completed()),
            (2, 2, 1, 1)
        );
        assert_eq!(v.score_text(), "PASS 1 / FAIL 0");
        assert_eq!(v.stats()[0], (100.0, 100.0, 100.0));
        v.apply(CsEvent::Level {
            concurrency: 2,
            phase: Phase::Probe,
            completed: 1,
            attempted: 2,
            rate: 50.0,
            improved: true,
        });
        assert_eq!(v.best, Some((2, 50.0)));
        let mut scout = run(1, 0.0, 0.5, None);
        scout.phase = Phase::PrefillScout;
        scout.prompt_tokens = Some(1000);
        scout.ttft = Some(0.5);
        v.apply(CsEvent::Run(Box::new(scout)));
        assert_eq!(v.finished, 2, "the scout is not a measured run");
        assert!(v.scout.as_deref().unwrap().contains("2000 tok/s"));
        for _ in 0..20 {
            v.apply(CsEvent::Note("x".into()));
        }
        assert_eq!(v.notes.len(), 3);
    }
}
