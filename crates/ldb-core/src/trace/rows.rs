//! The row stage of a trace reader: lines of a [`BufRead`] → requests on the
//! trace's own clock (seconds), in file order. Empty lines are ignored; the
//! format is detected from the first non-empty line unless given; bad rows
//! end the stream with their error, or are counted and skipped under
//! `--trace-skip-bad`.

use std::io::{BufRead, Read as _};

use super::burstgpt::{self, Columns};
use super::{TraceCounts, TraceError, TraceFormat, TraceOptions, TraceRequest, detect};

/// Requests of a trace in file order (times not yet shifted or scaled).
pub struct Rows<R: BufRead> {
    input: R,
    format: Option<TraceFormat>,
    opts: TraceOptions,
    columns: Columns,
    line_no: u64,
    counts: TraceCounts,
    failed: bool,
    buf: String,
}

impl<R: BufRead> Rows<R> {
    /// A reader; `format` `None` detects it from the first non-empty line.
    pub fn new(input: R, format: Option<TraceFormat>, opts: TraceOptions) -> Self {
        Self {
            input,
            format,
            opts,
            columns: Columns::default(),
            line_no: 0,
            counts: TraceCounts::default(),
            failed: false,
            buf: String::new(),
        }
    }

    /// The format (known after the first non-empty line).
    pub fn format(&self) -> Option<TraceFormat> {
        self.format
    }

    /// What happened to the rows so far.
    pub fn counts(&self) -> TraceCounts {
        self.counts
    }

    /// The options it reads with.
    pub fn options(&self) -> &TraceOptions {
        &self.opts
    }

    /// The next non-empty line, or `None` at the end.
    fn next_line(&mut self) -> Option<Result<String, TraceError>> {
        loop {
            self.buf.clear();
            // Read at most one byte past the cap, so a file of one endless
            // line is refused without being held (issue 34).
            let cap = super::MAX_TRACE_LINE_BYTES as u64 + 1;
            match (&mut self.input).take(cap).read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(TraceError::at(
                        self.line_no + 1,
                        format!("cannot read: {e}"),
                    )));
                }
            }
            self.line_no += 1;
            if self.buf.len() > super::MAX_TRACE_LINE_BYTES {
                return Some(Err(TraceError::at(
                    self.line_no,
                    format!(
                        "longer than {} MiB; a trace line holds one request",
                        super::MAX_TRACE_LINE_BYTES >> 20
                    ),
                )));
            }
            let line = self.buf.trim();
            if !line.is_empty() {
                return Some(Ok(line.to_string()));
            }
        }
    }

    /// One line → a request (`Ok(None)`: a header or a filtered row).
    fn parse(&mut self, line: &str) -> Result<Option<TraceRequest>, TraceError> {
        let n = self.line_no;
        let format = match self.format {
            Some(f) => f,
            None => {
                let f = detect(line).ok_or_else(|| {
                    TraceError::at(
                        n,
                        "not a known trace format (Mooncake JSONL, BurstGPT CSV or our JSONL); \
                         name it with --trace-format",
                    )
                })?;
                self.format = Some(f);
                if f == TraceFormat::Burstgpt
                    && let Some(c) = burstgpt::header(line)
                {
                    self.columns = c;
                    return Ok(None);
                }
                f
            }
        };
        self.counts.rows += 1;
        let parsed = match format {
            TraceFormat::Mooncake => super::mooncake::parse(n, line).map(Some),
            TraceFormat::Jsonl => super::jsonl::parse(n, line).map(Some),
            TraceFormat::Burstgpt => {
                if n == 1
                    && let Some(c) = burstgpt::header(line)
                {
                    self.counts.rows -= 1;
                    self.columns = c;
                    return Ok(None);
                }
                burstgpt::parse(n, line, &self.columns, &self.opts)
            }
        }?;
        if let Some(r) = &parsed {
            within_token_cap(r)?;
        }
        if parsed.is_none() {
            self.counts.filtered += 1;
        }
        Ok(parsed)
    }
}

/// Refuses a row asking for more than [`super::MAX_TRACE_ROW_TOKENS`] in
/// or out, before any prompt is built for it: the model's context is not
/// known here, and a prompt of 10¹² tokens would exhaust memory first.
fn within_token_cap(r: &TraceRequest) -> Result<(), TraceError> {
    let cap = super::MAX_TRACE_ROW_TOKENS;
    for (what, n) in [
        ("input", r.prompt.built_tokens()),
        ("output", r.output_tokens),
    ] {
        if n > cap {
            return Err(TraceError::at(
                r.line,
                format!("{n} {what} tokens is over the {cap}-token limit of a trace row"),
            ));
        }
    }
    Ok(())
}

impl<R: BufRead> Iterator for Rows<R> {
    type Item = Result<TraceRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let line = match self.next_line()? {
                Ok(l) => l,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            match self.parse(&line) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => {}
                // A format that cannot be detected is never skippable.
                Err(e) if self.opts.skip_bad && self.format.is_some() => {
                    self.counts.bad_skipped += 1;
                    let _ = e;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, skip_bad: bool) -> Rows<&[u8]> {
        Rows::new(
            text.as_bytes(),
            None,
            TraceOptions {
                skip_bad,
                ..TraceOptions::default()
            },
        )
    }

    #[test]
    fn bad_rows_stop_with_their_line_or_are_counted() {
        let text = "\n{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\nnope\n\
                    {\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n";
        let got: Vec<_> = rows(text, false).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap().line, 2);
        assert_eq!(got[1].as_ref().unwrap_err().line, 3);
        let mut r = rows(text, true);
        let ok: Vec<_> = r.by_ref().map(|x| x.unwrap().line).collect();
        assert_eq!(ok, vec![2, 4]);
        assert_eq!(r.counts().bad_skipped, 1);
        assert_eq!(r.counts().rows, 3);
        assert_eq!(r.format(), Some(TraceFormat::Mooncake));
    }

    #[test]
    fn burstgpt_header_is_not_a_row_and_filters_count() {
        let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                    0,ChatGPT,10,5,15,Conversation log\n1,GPT-4,10,0,10,API log\n";
        let mut r = rows(text, false);
        let got: Vec<_> = r.by_ref().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(r.counts().rows, 2);
        assert_eq!(r.counts().filtered, 1);
    }

    #[test]
    fn a_row_over_the_token_cap_is_refused_with_its_line_before_any_prompt() {
        let text = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n\
                    {\"timestamp\": 1, \"input_length\": 1000000000000, \"output_length\": 2}\n\
                    {\"timestamp\": 2, \"input_length\": 10, \"output_length\": 99999999999}\n\
                    {\"timestamp\": 3, \"input_length\": 10, \"output_length\": 2}\n";
        let got: Vec<_> = rows(text, false).collect();
        let e = got[1].as_ref().unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("1000000000000 input tokens"), "{e}");
        let mut r = rows(text, true);
        let ok: Vec<_> = r.by_ref().map(|x| x.unwrap().line).collect();
        assert_eq!(ok, vec![1, 4]);
        assert_eq!(r.counts().bad_skipped, 2);
    }

    #[test]
    fn a_line_over_the_length_cap_is_refused_unread() {
        let mut text =
            String::from("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n");
        text.push_str(&"x".repeat(super::super::MAX_TRACE_LINE_BYTES + 10));
        text.push('\n');
        let got: Vec<_> = rows(&text, true).collect();
        assert_eq!(got.len(), 2);
        let e = got[1].as_ref().unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("longer than"), "{e}");
    }

    #[test]
    fn an_unknown_format_is_refused_even_when_skipping() {
        let got: Vec<_> = rows("hello\n", true).collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().unwrap_err().line, 1);
        assert_eq!(rows("\n\n", false).count(), 0);
    }
}
