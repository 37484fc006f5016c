//! One streaming chat request, measured chunk by chunk.
//!
//! Arrival times are taken once per socket read (all events in one read share
//! it). The window bounds are read from shared atomics so that the runner can
//! open and close the window while streams run. Cancelling drops the response,
//! which closes the connection; servers free the request on disconnect.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ldb_core::chunk::{ChunkInfo, is_done};
use ldb_core::gaps::GapHistogram;
use ldb_core::sse::SseDecoder;
use ldb_core::window::{ChunkEvent, RequestTrack, WindowBounds};
use tokio_util::sync::CancellationToken;

use crate::error::ClientError;
use crate::http::Http;
use ldb_core::failure::{FailureKind, RequestError};

mod texts;
pub use texts::ChannelTexts;

pub use crate::clock::RunClock;
pub use shared_window::SharedWindow;

mod shared_window;

/// Counters shared by all streams of a cell (for the live view and readiness).
#[derive(Debug, Default)]
pub struct CellCounters {
    /// Tokens received (all, not only in the window).
    pub tokens: AtomicU64,
    /// Tokens received inside the window.
    pub window_tokens: AtomicU64,
    /// Streams that have a first token and have not ended.
    pub producing: AtomicI64,
    /// Requests started.
    pub started: AtomicU64,
    /// Requests that failed.
    pub failed: AtomicU64,
    /// Gaps between consecutive tokens inside the window.
    pub gaps: GapHistogram,
    /// Tokens by the second they arrived in (replays start it).
    pub arrivals: crate::token_seconds::TokenSeconds,
    /// The cell's per-second client series (sustained cells start it).
    pub timeline: ldb_core::timeline::TimelineCounter,
    /// Each stream's arrivals once the interference probe starts it.
    pub tail: crate::token_tail::TokenTail,
}

/// Everything a stream needs besides its payload.
#[derive(Clone)]
pub struct StreamEnv {
    /// Server access.
    pub http: Http,
    /// Run clock.
    pub clock: RunClock,
    /// Window bounds.
    pub window: Arc<SharedWindow>,
    /// Cell counters.
    pub counters: Arc<CellCounters>,
    /// Cancelled at window end (or skip/stop).
    pub cancel: CancellationToken,
    /// Where to keep the tail of the generated text (output viewer), if anywhere.
    pub text_sink: Option<Arc<Mutex<String>>>,
    /// Where to keep the whole reasoning and content, apart (completion
    /// statistics score the answer), if anywhere.
    pub texts: Option<Arc<Mutex<ChannelTexts>>>,
    /// Path of the completion route (the client's API's, from [`StreamEnv::new`]).
    pub path: &'static str,
    /// Fail a request whose tokens stop for this long after its first one
    /// (`--stream-idle-timeout`); `None`: wait as long as the cell does.
    pub idle_timeout: Option<Duration>,
    /// Fail a request that has produced no token this long after it was
    /// sent (the answer's head, comments and empty events do not count);
    /// `None`: the caller bounds the wait (a sustained cell cancels its
    /// streams at the window's end).
    pub first_token_timeout: Option<Duration>,
    /// The stream's slot in its pool (0 outside one): which list of
    /// [`CellCounters::tail`] its tokens go to.
    pub slot: u32,
}

impl StreamEnv {
    /// A stream environment with the defaults most callers want: a window
    /// and counters of its own, a fresh cancellation token, no text sinks,
    /// the chat route, and no idle or first-token limit. Callers change
    /// what differs with struct-update syntax (`..StreamEnv::new(h, c)`).
    pub fn new(http: Http, clock: RunClock) -> StreamEnv {
        let path = http.api().path();
        StreamEnv {
            http,
            clock,
            window: Arc::new(SharedWindow::default()),
            counters: Arc::new(CellCounters::default()),
            cancel: CancellationToken::new(),
            text_sink: None,
            texts: None,
            path,
            idle_timeout: None,
            first_token_timeout: None,
            slot: 0,
        }
    }
}

/// The first-token limit of the requests no cell window bounds (burst
/// requests, the scout and prefill probes): long enough for a queue behind
/// many long requests or a huge prompt's prefill on a slow server, short
/// enough that a server sending only keep-alives cannot hold a run forever.
pub const FIRST_TOKEN_LIMIT: Duration = Duration::from_secs(1800);

/// How one request ended.
#[derive(Debug)]
pub struct StreamOutcome {
    /// The measurements.
    pub track: RequestTrack,
    /// Chunk id (the request id; SGLang aborts take it).
    pub request_id: Option<String>,
    /// Cut by cancellation.
    pub cancelled: bool,
    /// The last chunk's llama.cpp timings, if any.
    pub timings: Option<ldb_core::chunk::Timings>,
    /// Run-clock time the `[DONE]` sentinel arrived (the request's completion).
    pub done_at: Option<f64>,
    /// Prompt tokens served from the cache, if reported.
    pub cached_tokens: Option<u64>,
}

/// How long to wait for the end of a body after its `[DONE]`.
const DRAIN: Duration = Duration::from_millis(500);

impl StreamOutcome {
    /// A request started at `start` with nothing measured yet.
    pub(crate) fn begin(start: f64) -> Self {
        StreamOutcome {
            track: RequestTrack::new(start),
            request_id: None,
            cancelled: false,
            timings: None,
            cached_tokens: None,
            done_at: None,
        }
    }
}

/// Send `body` (a JSON chat request with `stream: true`) and measure it.
///
/// Plain `http://` servers are read by the lean HTTP/1.1 reader
/// ([`crate::lean`]) unless `LDB_STREAM_READER=reqwest` chose the general
/// client; `https://` always goes through reqwest.
pub async fn run_stream(env: &StreamEnv, body: Bytes) -> StreamOutcome {
    if let Some(target) = env.http.lean_target() {
        return crate::lean::run_stream_lean(env, target, body).await;
    }
    let start = env.clock.now();
    env.counters.started.fetch_add(1, Ordering::Relaxed);
    let mut out = StreamOutcome::begin(start);
    let url = env.http.url(env.path);
    // One cancellation future for the whole request, not a new one (and a
    // new waiter registration) per chunk.
    let mut cancelled = std::pin::pin!(env.cancel.cancelled());
    let first_deadline = env
        .first_token_timeout
        .map(|d| tokio::time::Instant::now() + d);
    let Some(resp) = send_request(env, &url, body, &mut out, &mut cancelled, first_deadline).await
    else {
        return out;
    };
    read_events(env, &url, resp, out, &mut cancelled, first_deadline).await
}

/// Send the request and wait for the answer's head. `Some` is a 200 answer
/// whose body is the event stream; `None` is a request that ended here
/// (cancelled, out of first-token time, refused, or answered with another
/// status), its outcome already recorded in `out`.
async fn send_request(
    env: &StreamEnv,
    url: &str,
    body: Bytes,
    out: &mut StreamOutcome,
    cancelled: &mut (impl Future<Output = ()> + Unpin),
    first_deadline: Option<tokio::time::Instant>,
) -> Option<reqwest::Response> {
    let send = env
        .http
        .request(reqwest::Method::POST, env.path)
        .header("content-type", "application/json")
        .body(body)
        .send();
    let resp = tokio::select! {
        biased;
        _ = cancelled => { out.cancelled = true; return None; }
        _ = sleep_until_opt(first_deadline) => {
            no_first_token(env, out);
            env.counters.failed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        r = send => r,
    };
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            out.track
                .mark_error(ClientError::from_reqwest(url, &e).into());
            env.counters.failed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let status = resp.status().as_u16();
    if status != 200 {
        let text = tokio::time::timeout(Duration::from_secs(10), resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        out.track
            .mark_error(ClientError::from_status(url, status, &text).into());
        env.counters.failed.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if let Some(texts) = &env.texts {
        let mut t = texts.lock().unwrap_or_else(|p| p.into_inner());
        (t.responded, t.noted) = (true, env.http.noted_value(resp.headers()));
    }
    Some(resp)
}

/// Read a 200 answer's event stream read by read until `[DONE]`, the end
/// of the body, a failure, a limit or cancellation, then conclude.
async fn read_events(
    env: &StreamEnv,
    url: &str,
    mut resp: reqwest::Response,
    mut out: StreamOutcome,
    cancelled: &mut (impl Future<Output = ()> + Unpin),
    first_deadline: Option<tokio::time::Instant>,
) -> StreamOutcome {
    let mut dec = SseDecoder::new();
    let mut producing = false;
    let mut done = false;
    // Armed at the first token, moved on by every later one: comments,
    // empty events and keep-alives do not count as life.
    let mut idle_deadline: Option<tokio::time::Instant> = None;
    // Until the first token, the first-token limit (when set) runs instead.
    let mut awaiting_first = first_deadline;
    loop {
        let idle = sleep_until_opt(idle_deadline);
        let next = tokio::select! {
            biased;
            _ = &mut *cancelled => { out.cancelled = true; break; }
            _ = sleep_until_opt(awaiting_first) => {
                no_first_token(env, &mut out);
                break;
            }
            _ = idle => {
                idle_stall(env, &mut out);
                break;
            }
            c = resp.chunk() => c,
        };
        let bytes = match next {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                out.track.mark_error(broken_read(url, &e));
                break;
            }
        };
        let t = env.clock.now();
        let window = env.window.get();
        // Only with a limit to move: the hot path stays as it was without one.
        let before = (env.idle_timeout.is_some() || awaiting_first.is_some())
            .then(|| (out.track.output_tokens(), out.track.chunks()));
        dec.feed(&bytes, |payload| {
            on_payload(env, &mut out, &mut done, &mut producing, t, window, payload)
        });
        if dec.overflowed() {
            line_overflow(&mut out);
            break;
        }
        if let Some(before) = before
            && (out.track.output_tokens(), out.track.chunks()) != before
        {
            awaiting_first = None;
            idle_deadline = env
                .idle_timeout
                .map(|limit| tokio::time::Instant::now() + limit);
        }
        if done {
            if out.track.error().is_none() {
                drain_body(&mut resp, cancelled).await;
            }
            break;
        }
    }
    conclude(env, out, dec, done, producing)
}

/// The failure of a body read after the answer began.
fn broken_read(url: &str, e: &reqwest::Error) -> RequestError {
    let why = if e.is_timeout() {
        "timed out".to_string()
    } else {
        crate::error::transport_detail(e)
    };
    RequestError::new(
        FailureKind::StreamBroken,
        format!("stream broken after the answer began ({url}): {why}"),
    )
}

/// Read what follows `[DONE]` (at most [`DRAIN`], or until cancelled).
///
/// The end of the body (the chunked terminator) normally follows [DONE] at
/// once. Reading it hands the connection back to the pool, so the next
/// request reuses it; dropping the response first would close it and open
/// a new one, and meanwhile the pool races a fresh connect against it, so a
/// saturated cell piles up extra connections and their buffers.
async fn drain_body(
    resp: &mut reqwest::Response,
    cancelled: &mut (impl Future<Output = ()> + Unpin),
) {
    tokio::select! {
        biased;
        _ = cancelled => {}
        _ = tokio::time::timeout(DRAIN, async {
            while let Ok(Some(_)) = resp.chunk().await {}
        }) => {}
    }
}

/// The first-token limit ran out.
pub(crate) fn no_first_token(env: &StreamEnv, out: &mut StreamOutcome) {
    let secs = env.first_token_timeout.unwrap_or_default().as_secs_f64();
    out.track.mark_error(RequestError::new(
        FailureKind::Stalled,
        format!("no token within {secs:.0} s of sending the request (first-token limit)"),
    ));
}

/// `--stream-idle-timeout` ran out after a token.
pub(crate) fn idle_stall(env: &StreamEnv, out: &mut StreamOutcome) {
    let secs = env.idle_timeout.unwrap_or_default().as_secs_f64();
    out.track.mark_error(RequestError::new(
        FailureKind::Stalled,
        format!("no token for {secs:.0} s after the last one (--stream-idle-timeout)"),
    ));
}

/// The SSE decoder met a line over its cap.
pub(crate) fn line_overflow(out: &mut StreamOutcome) {
    out.track.mark_error(RequestError::new(
        FailureKind::BadResponse,
        format!(
            "an SSE line longer than {} MiB: not an event stream this client reads",
            ldb_core::sse::MAX_LINE_BYTES / (1024 * 1024)
        ),
    ));
}

/// After the body: deliver an unterminated last line, settle the window
/// accounting and the counters, and tell a clean end from a cut one. Shared
/// by both readers so that they judge a request alike.
pub(crate) fn conclude(
    env: &StreamEnv,
    mut out: StreamOutcome,
    mut dec: SseDecoder,
    mut done: bool,
    mut producing: bool,
) -> StreamOutcome {
    if !done && !out.cancelled && out.track.error().is_none() {
        let t = env.clock.now();
        let window = env.window.get();
        dec.finish(|p| on_payload(env, &mut out, &mut done, &mut producing, t, window, p));
    }
    if let Some(g) = out.track.settle(env.window.get()) {
        env.counters.gaps.record(g);
    }
    if producing {
        env.counters.producing.fetch_sub(1, Ordering::Relaxed);
    }
    if out.track.error().is_some() {
        env.counters.failed.fetch_add(1, Ordering::Relaxed);
    } else if !done && !out.cancelled {
        if out.track.finish_reason().is_some() {
            // The server said why it stopped and closed the body cleanly; the
            // missing [DONE] is a dialect difference, not a failure.
            out.track.mark_completed();
            out.done_at = Some(env.clock.now());
        } else {
            // The body ended without [DONE] or a finish reason: a dropped
            // connection, not a finish.
            out.track.mark_error(RequestError::new(
                FailureKind::Truncated,
                "stream ended without [DONE]",
            ));
            env.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    out
}

/// One SSE event's payload: `[DONE]`, a chunk to account, or a failure.
/// Runs per token; `t` is the arrival time of the read that carried it.
pub(crate) fn on_payload(
    env: &StreamEnv,
    out: &mut StreamOutcome,
    done: &mut bool,
    producing: &mut bool,
    t: f64,
    window: WindowBounds,
    payload: &[u8],
) {
    // An empty event (`data:` and nothing else) carries nothing: a keep-alive
    // in SSE's own terms, not a malformed chunk.
    if *done || payload.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    if is_done(payload) {
        *done = true;
        out.done_at = Some(t);
        if out.track.error().is_none() {
            out.track.mark_completed();
        }
        return;
    }
    let event = match env.http.api().parse_event(payload) {
        Ok(e) => e,
        Err(e) => {
            out.track
                .mark_error(RequestError::new(FailureKind::BadResponse, e.to_string()));
            *done = true;
            return;
        }
    };
    if event.unknown {
        env.http.note_unknown_event();
        return;
    }
    let chunk = event.chunk;
    if out.request_id.is_none()
        && let Some(id) = &chunk.id
    {
        out.request_id = Some(id.to_string());
    }
    if let Some(err) = chunk.error {
        out.track.mark_error(RequestError::new(
            FailureKind::MidStream,
            format!("server error mid-stream: {err}"),
        ));
        return;
    }
    if chunk.timings.is_some() {
        out.timings = chunk.timings;
    }
    if chunk.cached_tokens.is_some() {
        out.cached_tokens = chunk.cached_tokens;
    }
    if let Some(f) = &chunk.finish_reason {
        out.track.set_finish_reason(f);
    }
    count_tokens(env, out, producing, t, window, &chunk);
    // tested here, not inside: most runs keep no text, and then a token
    // costs no call
    if (chunk.text.is_some() || chunk.tool_call_name.is_some())
        && (env.text_sink.is_some() || env.texts.is_some())
    {
        texts::keep_text(env, t, &chunk);
    }
    if chunk.finish_reason.is_some() && *producing {
        // The request stopped generating; it no longer counts as producing.
        *producing = false;
        env.counters.producing.fetch_sub(1, Ordering::Relaxed);
    }
    if event.end {
        // The API's last event (Responses, Messages) is their `[DONE]`.
        *done = true;
        out.done_at = Some(t);
        if out.track.error().is_none() {
            out.track.mark_completed();
        }
    }
}

/// Account a chunk's tokens in the request's track (window, gaps) and in
/// the cell's counters, and mark the request producing at its first token.
#[inline]
fn count_tokens(
    env: &StreamEnv,
    out: &mut StreamOutcome,
    producing: &mut bool,
    t: f64,
    window: WindowBounds,
    chunk: &ChunkInfo<'_>,
) {
    let before = out.track.window_tokens;
    let effect = out.track.on_chunk(ChunkEvent::from_chunk(t, chunk), window);
    if let Some(g) = effect.gaps {
        env.counters.gaps.record(g);
    }
    let new = effect.new_tokens;
    if new > 0 {
        env.counters.tokens.fetch_add(new, Ordering::Relaxed);
        env.counters.arrivals.add(t, new);
        env.counters.tail.add(env.slot, t, new, !*producing);
    }
    let counted = out.track.window_tokens - before;
    env.counters.timeline.add(t, new, counted, window.start);
    if counted > 0 {
        env.counters
            .window_tokens
            .fetch_add(counted, Ordering::Relaxed);
    }
    if (chunk.has_tokens || (new > 0 && chunk.has_choices)) && !*producing {
        *producing = true;
        env.counters.producing.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sleep until `at`, or forever without one.
async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
