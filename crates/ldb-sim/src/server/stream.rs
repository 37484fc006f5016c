//! Turning engine chunks into an SSE body (with injected faults) or a complete response.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::frames::{Frames, Timings};
use crate::engine::{Chunk, Command, FinishReason};

/// Frees the request in the engine when the response is dropped before it finished
/// (client disconnect).
pub(crate) struct CancelGuard {
    pub id: u64,
    pub engine: mpsc::UnboundedSender<Command>,
    pub armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.engine.send(Command::Cancel(self.id));
        }
    }
}

/// Fault thresholds that apply to this stream (token counts; `None` = off).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamFaults {
    pub drop_at: Option<u32>,
    pub stall_at: Option<u32>,
    pub stall: Duration,
    pub malformed_at: Option<u32>,
    /// Front-end time per chunk (zero = off): chunks go out one at a time
    /// at most this often, however fast the engine generates.
    pub frontend_delay: Duration,
}

/// State of one streamed response.
pub(crate) struct StreamState {
    pub rx: mpsc::UnboundedReceiver<Chunk>,
    pub frames: Frames,
    pub guard: CancelGuard,
    pub faults: StreamFaults,
    pub start: Instant,
    pub first_at: Option<Instant>,
    pub done: bool,
    pub fail_next: bool,
    pub stall_next: bool,
}

/// How long an injected drop waits after the tokens before it.
const DROP_FLUSH_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// Largest body piece assembled from queued chunks before it is handed to hyper.
const MAX_PIECE: usize = 64 * 1024;

impl StreamState {
    fn timings(&self, chunk: &Chunk) -> Timings {
        let now = Instant::now();
        let first = self.first_at.unwrap_or(now);
        Timings {
            cache_n: chunk.cached,
            prompt_n: self.frames_prompt().saturating_sub(chunk.cached),
            prompt_ms: (first - self.start).as_secs_f64() * 1000.0,
            predicted_n: chunk.total,
            predicted_ms: (now - first).as_secs_f64() * 1000.0,
        }
    }

    fn frames_prompt(&self) -> u32 {
        self.frames.prompt_tokens()
    }

    /// Write every frame for one chunk; returns true when the stream is complete.
    fn write_chunk(&mut self, buf: &mut Vec<u8>, chunk: &Chunk) -> bool {
        if self.first_at.is_none() {
            self.first_at = Some(Instant::now());
            self.frames.role(buf);
        }
        if chunk.n > 0 {
            self.frames.tokens(buf, chunk);
        }
        let Some(reason) = chunk.finish else {
            return false;
        };
        self.guard.armed = false;
        let timings = self.timings(chunk);
        let usage = self.frames.include_usage;
        self.frames.finish(
            buf,
            reason,
            chunk.total,
            chunk.n,
            (!usage).then_some(&timings),
        );
        if usage {
            self.frames.usage(buf, chunk.total, Some(&timings));
        }
        Frames::done(buf);
        true
    }
}

type Item = Result<Bytes, std::io::Error>;

/// Produce the next body piece: all chunks that are ready, as one buffer. A fault threshold
/// ends the piece, so what came before a stall or a drop reaches the client first.
pub(crate) async fn next_piece(mut st: StreamState) -> Option<(Item, StreamState)> {
    if st.fail_next {
        st.done = true;
        st.fail_next = false;
        // hyper may still hold the piece before the drop in its write
        // buffer; an error returned at once can close the connection
        // without flushing it, and the client would then see the drop
        // before any of the tokens it should have had. One pause (a
        // `Pending` poll) lets hyper write them first.
        tokio::time::sleep(DROP_FLUSH_PAUSE).await;
        let err = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected drop");
        return Some((Err(err), st));
    }
    if st.stall_next {
        st.stall_next = false;
        tokio::time::sleep(st.faults.stall).await;
    }
    if st.done {
        return None;
    }
    let chunk = st.rx.recv().await?;
    let slow_frontend = !st.faults.frontend_delay.is_zero();
    if slow_frontend {
        tokio::time::sleep(st.faults.frontend_delay).await;
    }
    let mut buf = Vec::with_capacity(512);
    let mut finished = st.write_chunk(&mut buf, &chunk);
    let mut cut = check_faults(&mut st, &mut buf, chunk.total, finished);
    while !finished && !cut && !slow_frontend && buf.len() < MAX_PIECE {
        match st.rx.try_recv() {
            Ok(c) => {
                finished = st.write_chunk(&mut buf, &c);
                cut = check_faults(&mut st, &mut buf, c.total, finished);
            }
            Err(_) => break,
        }
    }
    st.done = finished;
    Some((Ok(Bytes::from(buf)), st))
}

/// Apply the fault thresholds crossed at `total` tokens; true when the piece must end here.
fn check_faults(st: &mut StreamState, buf: &mut Vec<u8>, total: u32, finished: bool) -> bool {
    let mut cut = false;
    if st.faults.malformed_at.is_some_and(|at| total >= at) {
        st.faults.malformed_at = None;
        buf.extend_from_slice(
            b"data: {\"id\":\"malformed\",\"choices\":[{\"delta\":{\"content\":\n\n",
        );
    }
    if st.faults.stall_at.is_some_and(|at| total >= at) {
        st.faults.stall_at = None;
        st.stall_next = true;
        cut = true;
    }
    if st.faults.drop_at.is_some_and(|at| total >= at) && !finished {
        st.faults.drop_at = None;
        st.fail_next = true;
        cut = true;
    }
    cut
}

/// Wait for the whole generation (non-streaming requests).
pub(crate) async fn collect(
    rx: &mut mpsc::UnboundedReceiver<Chunk>,
    guard: &mut CancelGuard,
) -> Option<(u32, u32, FinishReason)> {
    while let Some(c) = rx.recv().await {
        if let Some(reason) = c.finish {
            guard.armed = false;
            return Some((c.total, c.cached, reason));
        }
    }
    None
}
