//! The lean stream reader: streamed completions from a plain `http://`
//! server over bare tokio sockets and a sans-I/O HTTP/1.1 decoder
//! (`ldb_core::http1`), instead of reqwest/hyper.
//!
//! Why: at a thousand streams of one token per chunk the general client
//! costs about as much again as the kernel's own work (issue 14; see
//! docs/performance.md). Per chunk hyper's connection task decodes the body
//! and hands a frame to the request task over a channel (two task polls and
//! a wake), and the read timeout re-arms a timer on every frame. Here one
//! task per request waits for its socket to be readable, reads into a
//! buffer shared by every stream on that worker thread, and runs the
//! chunked decoder, the SSE splitter and the chunk parser on the bytes in
//! place: no copy of a read, no allocation per token, one timer per request
//! that is only moved when it fires. Per stream only the start of an
//! unfinished SSE line is kept, so memory does not grow when the server
//! delivers in bursts.
//!
//! Everything the reqwest path guarantees holds here too: chunked and
//! `Content-Length` bodies and bodies until close, keep-alive reuse (a
//! pooled connection that the server closed meanwhile is retried once on a
//! fresh one) and `Connection: close`, a 64 KiB / 100-field head limit, the
//! 30 s connect and 600 s read timeouts, the SSE line cap, the idle and
//! first-token limits, error bodies read into one-line reasons, redirects
//! reported instead of followed, and the API key header.
//! `LDB_STREAM_READER=reqwest` switches back to the general client for
//! diagnosis.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::task::Poll;

use bytes::Bytes;
use ldb_core::failure::{FailureKind, RequestError};
use ldb_core::http1::{BodyDecoder, HeadReader, Http1Error};
use ldb_core::sse::SseDecoder;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::stream::{
    StreamEnv, StreamOutcome, conclude, idle_stall, line_overflow, no_first_token, on_payload,
};
use crate::woken::WokenOnly;

mod limits;
mod target;
use limits::{Expired, Limits};
pub use target::Target;

/// Which reader streams use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The lean HTTP/1.1 reader (plain `http://` only).
    Lean,
    /// reqwest, as for `https://`.
    Reqwest,
}

/// The environment variable that chooses the reader.
pub const READER_ENV: &str = "LDB_STREAM_READER";

/// The reader `LDB_STREAM_READER` asks for: `reqwest` (or `hyper`) for the
/// general client, anything else (unset, `lean`) for the lean one.
pub fn reader_from_env() -> Reader {
    match std::env::var(READER_ENV) {
        Ok(v) if v.eq_ignore_ascii_case("reqwest") || v.eq_ignore_ascii_case("hyper") => {
            Reader::Reqwest
        }
        _ => Reader::Lean,
    }
}

/// How much of an error answer's body is kept (its wait is in `limits`).
const ERROR_BODY_BYTES: usize = 1024 * 1024;
/// The read buffer shared by the streams of one worker thread.
const SCRATCH_BYTES: usize = 16 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; SCRATCH_BYTES]);
}

/// Where a request's response stands.
enum Phase {
    /// Waiting for (the rest of) the head.
    Head(HeadReader),
    /// A 200 answer's body: the event stream.
    Body(BodyDecoder),
    /// Any other status: its body, kept for the failure reason.
    ErrorBody {
        status: u16,
        location: Option<String>,
        dec: BodyDecoder,
        text: Vec<u8>,
    },
}

/// What one read led to.
enum Step {
    /// Read on.
    More,
    /// The response is over (body complete, or a failure recorded).
    End,
    /// A reused connection was closed before it answered: send again on a
    /// fresh one.
    Retry,
}

/// Per-request state of the lean reader.
struct Lean<'e> {
    env: &'e StreamEnv,
    url: String,
    out: StreamOutcome,
    sse: SseDecoder,
    done: bool,
    producing: bool,
    phase: Phase,
    reused: bool,
    got_bytes: bool,
    /// The connection may carry the next request once this one is read.
    keep: bool,
    /// The body ended (framing complete).
    body_done: bool,
    /// Bytes arrived after the end of the body: the connection is out of step.
    trailing: bool,
}

impl Lean<'_> {
    fn fail(&mut self, e: RequestError) -> Step {
        self.out.track.mark_error(e);
        Step::End
    }

    fn fail_client(&mut self, e: ClientError) -> Step {
        self.fail(e.into())
    }

    fn head_error(&mut self, e: &Http1Error) -> Step {
        let e = ClientError::Decode {
            url: self.url.clone(),
            detail: e.to_string(),
        };
        self.fail_client(e)
    }

    fn broken(&mut self, why: &str) -> Step {
        let msg = format!("stream broken after the answer began ({}): {why}", self.url);
        self.fail(RequestError::new(FailureKind::StreamBroken, msg))
    }

    /// Bytes from the socket.
    fn on_bytes(&mut self, mut bytes: &[u8], t: f64) -> Step {
        self.got_bytes = true;
        if let Phase::Head(reader) = &mut self.phase {
            match reader.feed(bytes) {
                Ok(None) => return Step::More,
                Ok(Some((head, used))) => {
                    bytes = &bytes[used..];
                    self.keep &= !head.close;
                    let dec = BodyDecoder::new(head.framing);
                    self.phase = if head.status == 200 {
                        // the live view tells "connecting" from "waiting for
                        // the first token" by this
                        if let Some(texts) = &self.env.texts {
                            texts.lock().unwrap_or_else(|p| p.into_inner()).responded = true;
                        }
                        Phase::Body(dec)
                    } else {
                        Phase::ErrorBody {
                            status: head.status,
                            location: head.location,
                            dec,
                            text: Vec::new(),
                        }
                    };
                }
                Err(e) => return self.head_error(&e),
            }
        }
        match &mut self.phase {
            Phase::Head(_) => Step::More,
            Phase::Body(dec) => {
                let window = self.env.window.get();
                let (env, out, done, producing, sse) = (
                    self.env,
                    &mut self.out,
                    &mut self.done,
                    &mut self.producing,
                    &mut self.sse,
                );
                let fed = dec.feed(bytes, |b| {
                    if !sse.overflowed() {
                        sse.feed(b, |p| on_payload(env, out, done, producing, t, window, p));
                    }
                });
                self.body_done = dec.is_done();
                match fed {
                    Ok(n) => self.trailing |= n < bytes.len(),
                    Err(e) => return self.broken(&e.to_string()),
                }
                if self.sse.overflowed() {
                    line_overflow(&mut self.out);
                    return Step::End;
                }
                if self.body_done || (self.done && self.out.track.error().is_some()) {
                    Step::End
                } else {
                    Step::More
                }
            }
            Phase::ErrorBody { dec, text, .. } => {
                let fed = dec.feed(bytes, |b| {
                    let room = ERROR_BODY_BYTES.saturating_sub(text.len());
                    text.extend_from_slice(&b[..b.len().min(room)]);
                });
                let full = text.len() >= ERROR_BODY_BYTES;
                if fed.is_err() || dec.is_done() || full {
                    self.keep = false;
                    self.error_status();
                    Step::End
                } else {
                    Step::More
                }
            }
        }
    }

    /// Record the failure of a non-200 answer from what of its body arrived.
    /// A limit of the response ran out: the connection is given up and the
    /// request ends with the matching outcome.
    fn on_expired(&mut self, limit: Expired) -> Step {
        self.keep = false;
        match limit {
            Expired::Drain => {}
            Expired::ErrorBody => self.error_status(),
            Expired::FirstToken => no_first_token(self.env, &mut self.out),
            Expired::Idle => idle_stall(self.env, &mut self.out),
            Expired::Read if matches!(self.phase, Phase::Head(_)) => {
                let e = ClientError::Timeout {
                    url: self.url.clone(),
                };
                self.out.track.mark_error(e.into());
            }
            Expired::Read => return self.broken("timed out"),
        }
        Step::End
    }

    fn error_status(&mut self) {
        let Phase::ErrorBody {
            status,
            location,
            text,
            ..
        } = &mut self.phase
        else {
            return;
        };
        let status = *status;
        let e = if (300..400).contains(&status) {
            // Never followed: a POST redirected is not the request we mean
            // to measure, and the user should point --url at the real server.
            ClientError::Status {
                url: self.url.clone(),
                status,
                detail: format!(
                    "redirect to {} not followed; give the final address as --url",
                    location.as_deref().unwrap_or("(no Location)")
                ),
            }
        } else {
            let body = String::from_utf8_lossy(text);
            ClientError::from_status(&self.url, status, &body)
        };
        self.out.track.mark_error(e.into());
    }

    /// The connection ended (read 0 or an error): `why` is `None` for a
    /// clean end of file.
    fn on_end(&mut self, why: Option<std::io::Error>) -> Step {
        self.keep = false;
        match &mut self.phase {
            Phase::Head(_) => {
                if self.reused && !self.got_bytes {
                    return Step::Retry;
                }
                let detail = why.map_or_else(
                    || "connection closed before the answer's head".to_string(),
                    |e| e.to_string(),
                );
                let e = ClientError::Connect {
                    url: self.url.clone(),
                    detail,
                };
                self.fail_client(e)
            }
            Phase::Body(dec) => {
                if self.done {
                    // [DONE] arrived; whatever ends the connection after it
                    // loses nothing.
                    return Step::End;
                }
                if let Some(e) = why {
                    return self.broken(&e.to_string());
                }
                match dec.finish() {
                    Ok(()) => {
                        self.body_done = true;
                        Step::End
                    }
                    Err(e) => self.broken(&e.to_string()),
                }
            }
            Phase::ErrorBody { .. } => {
                self.error_status();
                Step::End
            }
        }
    }
}

/// The lean reader's `run_stream` (same contract).
pub(crate) async fn run_stream_lean(
    env: &StreamEnv,
    target: &Target,
    body: Bytes,
) -> StreamOutcome {
    let start = env.clock.now();
    env.counters.started.fetch_add(1, Ordering::Relaxed);
    let close = crate::http::is_generation_path(env.path) && env.http.closes_completions();
    let mut st = Lean {
        env,
        url: env.http.url(env.path),
        out: StreamOutcome::begin(start),
        sse: SseDecoder::new(),
        done: false,
        producing: false,
        phase: Phase::Head(HeadReader::new()),
        reused: false,
        got_bytes: false,
        keep: !close,
        body_done: false,
        trailing: false,
    };
    // Polled only when the token wakes it: see `crate::woken`.
    let cancel_wait = std::pin::pin!(env.cancel.cancelled());
    let mut cancelled = WokenOnly::new(cancel_wait);
    let sent_at = Instant::now();
    let first_deadline = env.first_token_timeout.map(|d| sent_at + d);
    let req = target.request(env.path, &body, close);
    // At most two tries: a pooled connection the server closed meanwhile
    // gets one fresh retry (as hyper does for a reused connection).
    let mut sock = None;
    for attempt in 0..2 {
        st.phase = Phase::Head(HeadReader::new());
        st.got_bytes = false;
        let pooled = if attempt == 0 {
            target.checkout()
        } else {
            None
        };
        st.reused = pooled.is_some();
        let conn = async {
            let mut s = match pooled {
                Some(s) => s,
                None => target.connect().await?,
            };
            s.write_all(&req).await?;
            Ok::<_, std::io::Error>(s)
        };
        let r = tokio::select! {
            biased;
            _ = &mut cancelled => {
                st.out.cancelled = true;
                return conclude(env, st.out, st.sse, st.done, st.producing);
            }
            _ = sleep_until_opt(first_deadline) => {
                no_first_token(env, &mut st.out);
                return conclude(env, st.out, st.sse, st.done, st.producing);
            }
            r = conn => r,
        };
        match r {
            Ok(mut s) => {
                match read_response(&mut st, &mut s, &mut cancelled, first_deadline).await {
                    Step::Retry => continue,
                    _ => sock = Some(s),
                }
                break;
            }
            Err(_) if st.reused => continue,
            Err(e) => {
                let err = if e.kind() == std::io::ErrorKind::TimedOut {
                    ClientError::Timeout {
                        url: st.url.clone(),
                    }
                } else {
                    ClientError::Connect {
                        url: st.url.clone(),
                        detail: e.to_string(),
                    }
                };
                st.out.track.mark_error(err.into());
                break;
            }
        }
    }
    if let Some(s) = sock
        && st.keep
        && st.body_done
        && !st.trailing
        && !st.out.cancelled
        && st.out.track.error().is_none()
    {
        target.checkin(s);
    }
    conclude(env, st.out, st.sse, st.done, st.producing)
}

/// Read one response on `sock` until it ends, fails, or is cancelled.
async fn read_response(
    st: &mut Lean<'_>,
    sock: &mut TcpStream,
    cancelled: &mut WokenOnly<std::pin::Pin<&mut tokio_util::sync::WaitForCancellationFuture<'_>>>,
    first_deadline: Option<Instant>,
) -> Step {
    let env = st.env;
    let mut lim = Limits::new(Instant::now(), first_deadline);
    // One timer for every limit (see `limits`).
    let mut timer_at = lim.earliest();
    let mut timer = std::pin::pin!(tokio::time::sleep_until(timer_at));
    loop {
        let before = (st.out.track.output_tokens(), st.out.track.chunks());
        let step = tokio::select! {
            biased;
            _ = &mut *cancelled => {
                // Cancelled while draining the end of a finished body: the
                // request is done, only the connection is given up.
                st.keep = false;
                if !lim.draining() {
                    st.out.cancelled = true;
                }
                return Step::End;
            }
            _ = &mut timer => {
                if let Some(limit) = lim.expired(Instant::now()) {
                    return st.on_expired(limit);
                }
                timer_at = lim.earliest();
                timer.as_mut().reset(timer_at);
                continue;
            }
            // AsyncRead's poll_read rather than readiness + try_read: after
            // a read shorter than the buffer it marks the socket drained
            // (epoll is edge-triggered), where try_read needs one more
            // system call that fails with WouldBlock, per chunk. Each read
            // also spends tokio's cooperative budget, so a server flooding
            // this socket cannot keep the task from yielding: the runtime's
            // timers and the cell's cancellation still run.
            step = std::future::poll_fn(|cx| {
                SCRATCH.with(|scratch| {
                    let mut buf = scratch.borrow_mut();
                    let mut rb = ReadBuf::new(&mut buf[..]);
                    match std::pin::Pin::new(&mut *sock).poll_read(cx, &mut rb) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Err(e)) => Poll::Ready(st.on_end(Some(e))),
                        Poll::Ready(Ok(())) if rb.filled().is_empty() => Poll::Ready(st.on_end(None)),
                        Poll::Ready(Ok(())) => {
                            // one clock read serves both the limits and the stamp
                            lim.last_read = Instant::now();
                            Poll::Ready(st.on_bytes(rb.filled(), env.clock.at(lim.last_read.into_std())))
                        }
                    }
                })
            }) => step,
        };
        if (st.out.track.output_tokens(), st.out.track.chunks()) != before {
            lim.on_token(env.idle_timeout);
        }
        if matches!(st.phase, Phase::ErrorBody { .. }) {
            lim.on_error_body();
        }
        match step {
            Step::More if st.done && !lim.draining() => lim.start_drain(Instant::now()),
            Step::More => {}
            other => return other,
        }
        // A limit that now ends sooner than the timer moves it closer; a
        // limit that moved later is left for the timer to find.
        let want = lim.earliest();
        if want < timer_at {
            timer_at = want;
            timer.as_mut().reset(want);
        }
    }
}

/// Sleep until `at`, or forever without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
