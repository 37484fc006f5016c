//! What a replay is asked to do, and the check of a trace file before the
//! run starts (so a bad row is one line with its file and line number, and
//! exit 2, before any request is sent).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;

use ldb_core::replay::session::ThinkTime;
use ldb_core::trace::{Rows, TraceCounts, TraceFormat, TraceOptions, Window, sorted};
use sha2::{Digest, Sha256};

/// A replay.
#[derive(Debug, Clone)]
pub enum ReplayConfig {
    /// `--trace FILE`.
    Trace(TraceConfig),
    /// `--sessions N`.
    Sessions(SessionConfig),
}

/// `--trace` and its options.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// The file.
    pub path: PathBuf,
    /// What the check before the run found.
    pub scan: TraceScan,
    /// Filters and time scale.
    pub options: TraceOptions,
    /// Built prompts counted with the server's tokenizer before the replay.
    pub tokenize_checks: usize,
    /// `--prompt-corpus`: the text prompts are cut from (else the word list).
    pub corpus: Option<super::PromptCorpus>,
    /// `--trace-sessions`: rows sharing a `session_id` are the turns of one
    /// conversation (`trace_sessions.rs`).
    pub sessions: bool,
    /// `--trace-sessions` through a router (`router.rs`).
    pub router: super::router::RouterOptions,
}

/// `--sessions` and its options.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Sessions, all started at once (their first turns spread over the
    /// first think time).
    pub sessions: u64,
    /// Turns per session.
    pub turns: u32,
    /// New user tokens per turn.
    pub user_tokens: u64,
    /// The wait between a reply and the next turn.
    pub think_time: ThinkTime,
    /// `--prompt-corpus`: the text user messages are cut from.
    pub corpus: Option<super::PromptCorpus>,
    /// Through a router: the session and replica headers (`router.rs`).
    pub router: super::router::RouterOptions,
    /// With `--tools`: a reply that calls a tool is followed by a turn that
    /// carries the call and its result (None: no tool loop).
    pub tool_loop: Option<ToolLoop>,
}

/// The sessions' tool loop (`--tool-latency`, `--tool-result-tokens`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolLoop {
    /// The tool's run time: the wait between a reply that called a tool
    /// and the turn with its result (like think time, not server time).
    pub latency: ThinkTime,
    /// Tokens of the synthetic tool result.
    pub result_tokens: u64,
}

impl std::fmt::Display for ReplayConfig {
    /// The replay as `--dry-run` shows it instead of a matrix plan.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayConfig::Trace(t) => {
                let o = &t.options;
                let how = if t.sessions { " as sessions" } else { "" };
                writeln!(f, "Replay plan: trace {}{how}", t.path.display())?;
                writeln!(
                    f,
                    "  format {}, sha256 {}",
                    t.scan.format.map_or("?", |x| x.name()),
                    t.scan.sha256
                )?;
                writeln!(
                    f,
                    "  {} requests over {:.1} s (speed ×{}, start {} s{}{}); rows read {}, \
                     filtered {}, bad skipped {}",
                    t.scan.requests,
                    t.scan.span_s,
                    o.speed,
                    o.start_s,
                    o.duration_s
                        .map_or(String::new(), |d| format!(", duration {d} s")),
                    o.limit.map_or(String::new(), |n| format!(", limit {n}")),
                    t.scan.counts.rows,
                    t.scan.counts.filtered,
                    t.scan.counts.bad_skipped
                )?;
                write!(
                    f,
                    "  prompts checked with /tokenize before the replay: {}",
                    t.tokenize_checks
                )
            }
            ReplayConfig::Sessions(s) => write!(
                f,
                "Replay plan: {} sessions × {} turns, {} user tokens per turn, think time {:?}",
                s.sessions, s.turns, s.user_tokens, s.think_time
            ),
        }
    }
}

/// A trace file checked before the run.
#[derive(Debug, Clone, Default)]
pub struct TraceScan {
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Its format (given or detected).
    pub format: Option<TraceFormat>,
    /// Requests in the window.
    pub requests: u64,
    /// Rows read, skipped, filtered.
    pub counts: TraceCounts,
    /// Replay seconds from the first to the last request in the window.
    pub span_s: f64,
    /// Requests in the window that offer tools or carry calls, results or
    /// reasoning (the chat API's shapes).
    pub chat_only_rows: u64,
}

fn open(path: &std::path::Path) -> Result<BufReader<File>, String> {
    File::open(path)
        .map(|f| BufReader::with_capacity(1 << 16, f))
        .map_err(|e| format!("--trace {}: {e}", path.display()))
}

/// Hashes the file and reads every row of the window once (streamed; the
/// whole file only under `--trace-sort`). Errors are one line naming the
/// file and line.
pub fn scan(
    path: &std::path::Path,
    format: Option<TraceFormat>,
    opts: &TraceOptions,
) -> Result<TraceScan, String> {
    let mut hasher = Sha256::new();
    let mut f = open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("--trace {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let sha256: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let at =
        |e: ldb_core::trace::TraceError| format!("{}:{}: {}", path.display(), e.line, e.reason);
    let rows = Rows::new(open(path)?, format, opts.clone());
    let mut chat_only_rows = 0u64;
    let (requests, span_s, counts, format) = if opts.sort {
        let (all, counts, format) = sorted(rows).map_err(at)?;
        let span = all.last().map_or(0.0, |r| r.at_s);
        chat_only_rows = all.iter().filter(|r| r.chat_only()).count() as u64;
        (all.len() as u64, span, counts, format)
    } else {
        let mut w = Window::new(rows, opts);
        let mut span = 0.0f64;
        for r in w.by_ref() {
            let r = r.map_err(at)?;
            span = span.max(r.at_s);
            chat_only_rows += u64::from(r.chat_only());
        }
        (w.yielded(), span, w.rows().counts(), w.rows().format())
    };
    if requests == 0 {
        return Err(format!(
            "--trace {}: no request to replay ({} rows read, {} filtered out, {} bad rows skipped)",
            path.display(),
            counts.rows,
            counts.filtered,
            counts.bad_skipped
        ));
    }
    Ok(TraceScan {
        sha256,
        format,
        requests,
        counts,
        span_s,
        chat_only_rows,
    })
}

/// The window's requests in order, streamed (or loaded and sorted).
pub(crate) fn requests(
    cfg: &TraceConfig,
) -> Result<Box<dyn Iterator<Item = ldb_core::trace::TraceRequest> + Send>, String> {
    let rows = Rows::new(open(&cfg.path)?, cfg.scan.format, cfg.options.clone());
    if cfg.options.sort {
        let (all, _, _) = sorted(rows).map_err(|e| e.to_string())?;
        return Ok(Box::new(all.into_iter()));
    }
    // The file was checked before the run: a row that fails now (the file
    // changed under us) ends the replay early.
    Ok(Box::new(
        Window::new(rows, &cfg.options).map_while(Result::ok),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_hashes_counts_and_names_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(
            &p,
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n\
             {\"timestamp\": 500, \"input_length\": 10, \"output_length\": 2}\n",
        )
        .unwrap();
        let s = scan(&p, None, &TraceOptions::default()).unwrap();
        assert_eq!((s.requests, s.span_s), (2, 0.5));
        assert_eq!(s.sha256.len(), 64);
        assert_eq!(s.format, Some(TraceFormat::Mooncake));
        std::fs::write(
            &p,
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\nbad\n",
        )
        .unwrap();
        let e = scan(&p, None, &TraceOptions::default()).unwrap_err();
        assert!(
            e.ends_with("t.jsonl:2: not a Mooncake row: expected value at line 1 column 1"),
            "{e}"
        );
        std::fs::write(&p, "\n").unwrap();
        let e = scan(&p, None, &TraceOptions::default()).unwrap_err();
        assert!(e.contains("no request to replay"), "{e}");
    }
}
