//! The window stage of a trace reader: the trace's clock → the replay's.
//!
//! Trace time is counted from the first request's timestamp. Requests
//! before `--trace-start` are dropped, reading stops after
//! `--trace-duration` or `--trace-limit`, and a request is due `(t − start)
//! ÷ --trace-speed` seconds after the replay starts. Timestamps must not go
//! backwards (a streamed replay cannot send a request it has passed): such a
//! row is refused with its line, unless [`sorted`] loaded the whole file.

use std::io::BufRead;

use super::{Rows, TraceCounts, TraceError, TraceFormat, TraceRequest};

/// Requests of a trace on the replay's clock.
pub struct Window<I> {
    rows: I,
    speed: f64,
    start_s: f64,
    end_s: f64,
    limit: u64,
    origin: Option<f64>,
    last: f64,
    last_line: u64,
    yielded: u64,
    done: bool,
}

impl<I: Iterator<Item = Result<TraceRequest, TraceError>>> Window<I> {
    /// Applies `opts`' window and time scale to requests in time order.
    pub fn new(rows: I, opts: &super::TraceOptions) -> Self {
        let speed = if opts.speed > 0.0 && opts.speed.is_finite() {
            opts.speed
        } else {
            1.0
        };
        Self {
            rows,
            speed,
            start_s: opts.start_s.max(0.0),
            end_s: opts
                .duration_s
                .map_or(f64::INFINITY, |d| opts.start_s.max(0.0) + d),
            limit: opts.limit.unwrap_or(u64::MAX),
            origin: None,
            last: f64::NEG_INFINITY,
            last_line: 0,
            yielded: 0,
            done: false,
        }
    }

    /// Requests handed out so far.
    pub fn yielded(&self) -> u64 {
        self.yielded
    }

    /// The row stage under it.
    pub fn rows(&self) -> &I {
        &self.rows
    }
}

impl<I: Iterator<Item = Result<TraceRequest, TraceError>>> Iterator for Window<I> {
    type Item = Result<TraceRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.yielded < self.limit {
            let mut r = match self.rows.next()? {
                Ok(r) => r,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            if r.at_s < self.last {
                self.done = true;
                return Some(Err(TraceError::at(
                    r.line,
                    format!(
                        "timestamp goes backwards (before the one on line {}); sort the file or \
                         pass --trace-sort",
                        self.last_line
                    ),
                )));
            }
            self.last = r.at_s;
            self.last_line = r.line;
            let origin = *self.origin.get_or_insert(r.at_s);
            let t = r.at_s - origin;
            if t < self.start_s {
                continue;
            }
            if t >= self.end_s {
                self.done = true;
                return None;
            }
            r.at_s = (t - self.start_s) / self.speed;
            self.yielded += 1;
            return Some(Ok(r));
        }
        None
    }
}

/// `--trace-sort`: loads every row, sorts by time (file order among equal
/// times), then applies the window. Memory: the whole trace (about 100 bytes
/// per request plus 8 per hash id, plus literal prompts).
pub fn sorted<R: BufRead>(
    mut rows: Rows<R>,
) -> Result<(Vec<TraceRequest>, TraceCounts, Option<TraceFormat>), TraceError> {
    let mut all: Vec<TraceRequest> = rows.by_ref().collect::<Result<_, _>>()?;
    all.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let opts = rows.options().clone();
    let windowed = Window::new(all.into_iter().map(Ok), &opts).collect::<Result<Vec<_>, _>>()?;
    Ok((windowed, rows.counts(), rows.format()))
}

#[cfg(test)]
mod tests {
    use super::super::TraceOptions;
    use super::*;

    fn mooncake(times_ms: &[u64]) -> String {
        times_ms
            .iter()
            .map(|t| {
                format!("{{\"timestamp\": {t}, \"input_length\": 10, \"output_length\": 2}}\n")
            })
            .collect()
    }

    fn window(text: &str, opts: TraceOptions) -> Vec<Result<TraceRequest, TraceError>> {
        Window::new(Rows::new(text.as_bytes(), None, opts.clone()), &opts).collect()
    }

    #[test]
    fn start_duration_limit_and_speed() {
        let text = mooncake(&[1000, 2000, 3000, 5000, 9000]);
        let times = |o: TraceOptions| -> Vec<f64> {
            window(&text, o)
                .into_iter()
                .map(|r| r.unwrap().at_s)
                .collect()
        };
        assert_eq!(
            times(TraceOptions::default()),
            vec![0.0, 1.0, 2.0, 4.0, 8.0]
        );
        let fast = TraceOptions {
            speed: 2.0,
            ..TraceOptions::default()
        };
        assert_eq!(times(fast), vec![0.0, 0.5, 1.0, 2.0, 4.0]);
        let cut = TraceOptions {
            start_s: 1.0,
            duration_s: Some(3.0),
            ..TraceOptions::default()
        };
        // trace times 0, 1, 2, 4, 8: [1, 4) kept, the end excluded
        assert_eq!(times(cut), vec![0.0, 1.0]);
        let few = TraceOptions {
            limit: Some(2),
            ..TraceOptions::default()
        };
        assert_eq!(times(few), vec![0.0, 1.0]);
    }

    #[test]
    fn backwards_timestamps_are_refused_unless_sorted() {
        let text = mooncake(&[0, 2000, 1000, 3000]);
        let got = window(&text, TraceOptions::default());
        assert_eq!(got.len(), 3);
        let e = got[2].as_ref().unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.reason.contains("line 2"), "{e}");
        let opts = TraceOptions {
            sort: true,
            ..TraceOptions::default()
        };
        let (all, counts, format) = sorted(Rows::new(text.as_bytes(), None, opts)).expect("sorted");
        let lines: Vec<u64> = all.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 3, 2, 4]);
        assert_eq!(all[3].at_s, 3.0);
        assert_eq!((counts.rows, format), (4, Some(TraceFormat::Mooncake)));
    }
}
