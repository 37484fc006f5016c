//! The leader–follower protocol on the wire: serde_json messages, one per
//! frame of `tokio-util`'s `LengthDelimitedCodec`, over one TCP connection
//! per follower.
//!
//! Why this and not an RPC framework: the conversation is a handful of
//! typed messages in both directions (joins, clock pings, cell orders,
//! status, results), length framing is the one thing a byte stream lacks,
//! and JSON frames need no code generation and can be read in a packet
//! capture when a cluster misbehaves. A frame is capped so a stranger
//! cannot make the leader buffer gigabytes before the join is checked.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use ldb_client::stream::StreamOutcome;
use ldb_core::chunk::Timings;
use ldb_core::gaps::GapCounts;
use ldb_core::window::RequestTrack;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use super::check::check;
use super::seal::{OVERHEAD, Seal, SealError};

/// Largest frame accepted before a join: a join is a few hundred bytes.
pub(crate) const JOIN_FRAME_LIMIT: usize = 64 * 1024;
/// Largest frame between members (either way, after the join): one
/// cell's tracks of 10,000 streams, or a trace part of tens of MB. Both
/// sides read at most this, and queue at most a few frames (`leader.rs`,
/// `follower.rs`), so a member's memory for the protocol stays bounded.
pub(crate) const MEMBER_FRAME_LIMIT: usize = 512 * 1024 * 1024;

/// Every message of the protocol (`type` names it on the wire).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Msg {
    /// Follower → leader, first frame: who it is and what it will run.
    Join {
        /// Protocol and program version.
        version: String,
        /// `--shards` of the follower.
        shards: u32,
        /// `--shard-index` of the follower.
        index: u32,
        /// Digest of the benchmark flags that must match.
        flags_digest: String,
        /// The follower's fresh nonce (32 bytes, hex): the leader's proof
        /// is bound to it.
        nonce: String,
    },
    /// Leader → follower: the leader's proof of the secret (checked by the
    /// follower before it sends its own), and its challenge.
    Challenge {
        /// The leader's fresh nonce (32 bytes, hex).
        nonce: String,
        /// HMAC-SHA-256 of both nonces and the join, leader's label, hex.
        proof: String,
    },
    /// Follower → leader: HMAC-SHA-256 of both nonces and the join,
    /// follower's label.
    Proof {
        /// The MAC, hex.
        mac: String,
    },
    /// Leader → follower: joined.
    Welcome,
    /// Leader → follower: not joined, and why (then the connection closes).
    Refused {
        /// One line.
        reason: String,
    },
    /// Leader → follower: a clock question.
    Ping {
        /// Sequence number.
        seq: u64,
    },
    /// Follower → leader: the answer, with the follower's clock.
    Pong {
        /// The ping's sequence number.
        seq: u64,
        /// Follower's Unix clock when it answered.
        clock: f64,
    },
    /// Leader → follower: run `concurrency` streams of `body` for cell `cell`.
    CellStart {
        /// Cell number (counts up over the run).
        cell: u64,
        /// Streams of this follower.
        concurrency: u32,
        /// The request body (JSON text).
        body: String,
        /// `--stream-idle-timeout`, seconds (none: unlimited).
        idle_timeout_s: Option<f64>,
    },
    /// Leader → follower: the first bodies of a large open-loop order, in
    /// frames of a few MB ahead of its `RateStart` (which carries the rest),
    /// so that no one frame of a trace's part keeps either side silent
    /// longer than the liveness limit while it is encoded, sent and read.
    RateBodies {
        /// Cell number of the order they belong to.
        cell: u64,
        /// The next bodies of the order's list, in order.
        bodies: Vec<String>,
    },
    /// Leader → follower: send these requests of an open-loop cell.
    RateStart(Box<super::rate::RateOrder>),
    /// Leader → follower: run this part of a finite batch.
    BatchStart(Box<super::batch::BatchOrder>),
    /// Leader → follower: run these sessions (`--sessions`,
    /// `--trace-sessions`), each whole on this follower.
    SessionStart(Box<super::session_wire::SessionOrder>),
    /// Follower → leader, four times a second: alive, and how its streams are doing.
    Status {
        /// The cell its streams belong to (none between cells).
        cell: Option<u64>,
        /// Streams producing tokens.
        producing: u32,
        /// Tokens received so far in the cell.
        tokens: u64,
        /// Tokens counted inside the cell's window so far (the leader's
        /// `--duration auto` rule reads the sum over the shards).
        #[serde(default)]
        window_tokens: u64,
    },
    /// Leader → follower: the one window, on the follower's clock (Unix s).
    Window {
        /// Cell number.
        cell: u64,
        /// Window start.
        start: f64,
        /// Window end.
        end: f64,
    },
    /// Leader → follower: stop the cell's streams now and send the results.
    CellEnd {
        /// Cell number.
        cell: u64,
    },
    /// Follower → leader: the cell's requests.
    CellDone(Box<ShardCellData>),
    /// Leader → follower: the run is over; write your record and exit.
    Finish,
    /// Leader → follower: alive (between cells, when nothing else is sent).
    Heartbeat,
}

/// What a shard measured in one cell: the leader's input, and a follower's
/// record on disk (`docs/shards.md`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShardCellData {
    /// Cell number (coordinated) or position on the grid (offline).
    pub cell: u64,
    /// The cell's total concurrency.
    pub total_concurrency: u32,
    /// Streams of this shard.
    pub concurrency: u32,
    /// The cell's context.
    pub context: u64,
    /// The window on this shard's clock, Unix seconds (none: never opened).
    pub window_unix: Option<(f64, f64)>,
    /// This shard's run clock origin, Unix seconds on its clock: a track's
    /// time `t` happened at `origin_unix + t`.
    pub origin_unix: f64,
    /// Every request of the shard's streams.
    pub outcomes: Vec<WireOutcome>,
    /// Token gaps inside the window.
    pub gaps: GapCounts,
    /// Mean producing streams over the window.
    pub producing_mean: f64,
    /// CPU share of the shard's process over the window.
    pub client_cpu_share: Option<f64>,
    /// The shard's process limited its share.
    pub client_limited: bool,
    /// An open-loop cell's part (`--request-rate`): when each request was
    /// due, and what held requests back; absent for a sustained cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<super::rate::RateShare>,
    /// A finite batch's part: per outcome (same order), when it ended
    /// (`[DONE]`, error or cut) on the shard's run clock; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ends: Vec<f64>,
    /// A session run's part: every turn of its sessions; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Box<super::session_wire::SessionShare>>,
}

/// One request as it travels (`StreamOutcome` with serde).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireOutcome {
    /// The measurements.
    pub track: RequestTrack,
    /// Request id.
    pub request_id: Option<String>,
    /// Cut by cancellation.
    pub cancelled: bool,
    /// llama.cpp timings.
    pub timings: Option<Timings>,
    /// `[DONE]` arrival (run clock).
    pub done_at: Option<f64>,
    /// Prompt tokens served from the cache.
    pub cached_tokens: Option<u64>,
}

impl From<&StreamOutcome> for WireOutcome {
    fn from(o: &StreamOutcome) -> Self {
        WireOutcome {
            track: o.track.clone(),
            request_id: o.request_id.clone(),
            cancelled: o.cancelled,
            timings: o.timings,
            done_at: o.done_at,
            cached_tokens: o.cached_tokens,
        }
    }
}

impl WireOutcome {
    /// The outcome on another clock: every time moved by `dt` seconds.
    pub fn into_outcome(mut self, dt: f64) -> StreamOutcome {
        self.track.shift_times(dt);
        StreamOutcome {
            track: self.track,
            request_id: self.request_id,
            cancelled: self.cancelled,
            timings: self.timings,
            done_at: self.done_at.map(|t| t + dt),
            cached_tokens: self.cached_tokens,
        }
    }
}

/// Why a frame was not a message (a class and our own words, never the
/// peer's bytes: they may be a stranger's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WireError {
    /// Nothing within the wait (seconds).
    Silent(f64),
    /// The peer closed the connection.
    Closed,
    /// Over the size limit, or the stream broke mid-frame.
    Frame,
    /// Not a message of the protocol.
    NotAMessage,
    /// A sealed frame refused (`shard/seal.rs`).
    Seal(SealError),
    /// A number out of range (`shard/check.rs`).
    Range(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Silent(s) => write!(f, "nothing received in {s:.0} s"),
            WireError::Closed => f.write_str("connection closed"),
            WireError::Frame => f.write_str("bad frame (over the size limit, or broken)"),
            WireError::NotAMessage => f.write_str("bad message (not one of the protocol)"),
            WireError::Seal(e) => write!(f, "{e}"),
            WireError::Range(e) => write!(f, "a number out of range: {e}"),
        }
    }
}

/// One received frame as a message: its seal opened (after the join), its
/// JSON read, its numbers checked. Pure, so the fuzz loop drives it.
pub(crate) fn decode(seal: Option<&mut Seal>, frame: &[u8]) -> Result<Msg, WireError> {
    let payload = match seal {
        Some(s) => s.open(frame).map_err(WireError::Seal)?,
        None => frame,
    };
    let m: Msg = serde_json::from_slice(payload).map_err(|_| WireError::NotAMessage)?;
    check(&m).map_err(WireError::Range)?;
    Ok(m)
}

/// Receiving half of a connection.
pub(crate) struct Reader {
    frames: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    seal: Option<Seal>,
}
/// Sending half of a connection.
pub(crate) struct Writer {
    frames: FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>,
    seal: Option<Seal>,
}

/// Split a connection into its framed halves, reading frames up to `limit`
/// (what this side sends is bounded by the member limit).
pub(crate) fn framed(stream: TcpStream, limit: usize) -> (Reader, Writer) {
    let _ = stream.set_nodelay(true);
    let (r, w) = stream.into_split();
    let codec = |max| {
        LengthDelimitedCodec::builder()
            .max_frame_length(max)
            .new_codec()
    };
    (
        Reader {
            frames: FramedRead::new(r, codec(limit)),
            seal: None,
        },
        Writer {
            frames: FramedWrite::new(w, codec(MEMBER_FRAME_LIMIT + OVERHEAD)),
            seal: None,
        },
    )
}

impl Reader {
    /// The next message; `Err` on a closed connection, a bad frame, or
    /// nothing within `within`.
    pub(crate) async fn recv(&mut self, within: Duration) -> Result<Msg, WireError> {
        match tokio::time::timeout(within, self.next()).await {
            Err(_) => Err(WireError::Silent(within.as_secs_f64())),
            Ok(None) => Err(WireError::Closed),
            Ok(Some(r)) => r,
        }
    }

    /// The next message, cancel-safe for `select!` (`None`: closed).
    pub(crate) async fn next(&mut self) -> Option<Result<Msg, WireError>> {
        Some(match self.frames.next().await? {
            Err(_) => Err(WireError::Frame),
            Ok(bytes) => decode(self.seal.as_mut(), &bytes),
        })
    }

    /// Raise the frame limit (after the join succeeded).
    pub(crate) fn allow(&mut self, limit: usize) {
        self.frames
            .decoder_mut()
            .set_max_frame_length(limit + OVERHEAD);
    }

    /// From now on every frame must be sealed with `key`.
    pub(crate) fn seal(&mut self, key: [u8; 32]) {
        self.seal = Some(Seal::new(key));
    }
}

impl Writer {
    /// Send one message (bounded: a peer that stops reading is lost).
    pub(crate) async fn send(&mut self, m: &Msg) -> Result<(), String> {
        let mut bytes = serde_json::to_vec(m).map_err(|e| e.to_string())?;
        if let Some(s) = self.seal.as_mut() {
            bytes = s.seal(&bytes);
        }
        match tokio::time::timeout(SEND_LIMIT, self.frames.send(bytes::Bytes::from(bytes))).await {
            Err(_) => Err("the peer stopped reading".into()),
            Ok(r) => r.map_err(|e: std::io::Error| e.to_string()),
        }
    }

    /// From now on every frame is sealed with `key`.
    pub(crate) fn seal(&mut self, key: [u8; 32]) {
        self.seal = Some(Seal::new(key));
    }
}

/// How long one send may wait for the peer to read.
const SEND_LIMIT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_type_tag() {
        let j = serde_json::to_value(Msg::Ping { seq: 3 }).expect("json");
        assert_eq!(j, serde_json::json!({"type": "ping", "seq": 3}));
        let back: Msg = serde_json::from_str(r#"{"type":"welcome"}"#).expect("reads");
        assert!(matches!(back, Msg::Welcome));
    }

    #[tokio::test]
    async fn a_frame_over_the_join_limit_is_refused() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let client = tokio::spawn(async move {
            let s = TcpStream::connect(addr).await.expect("connect");
            let (_r, mut w) = framed(s, MEMBER_FRAME_LIMIT);
            let big = "x".repeat(JOIN_FRAME_LIMIT + 1);
            let _ = w.send(&Msg::Refused { reason: big }).await;
        });
        let (s, _) = l.accept().await.expect("accept");
        let (mut r, _w) = framed(s, JOIN_FRAME_LIMIT);
        let got = r.recv(Duration::from_secs(5)).await;
        assert!(got.is_err(), "{got:?}");
        client.await.expect("client");
    }

    /// The halves of a connection opened under the join limit send frames
    /// above it once joined (a trace part of tens of MB): the limit on
    /// what this side sends is the member limit, never the join limit.
    #[tokio::test]
    async fn orders_over_the_join_limit_leave_after_the_join() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let big = "x".repeat(4 * JOIN_FRAME_LIMIT);
        let sent = big.clone();
        let leader = tokio::spawn(async move {
            let (s, _) = l.accept().await.expect("accept");
            let (_r, mut w) = framed(s, JOIN_FRAME_LIMIT);
            w.seal([3; 32]);
            w.send(&Msg::Refused { reason: sent }).await
        });
        let s = TcpStream::connect(addr).await.expect("connect");
        let (mut r, _w) = framed(s, JOIN_FRAME_LIMIT);
        r.seal([3; 32]);
        r.allow(MEMBER_FRAME_LIMIT);
        let got = r.recv(Duration::from_secs(5)).await;
        assert!(matches!(&got, Ok(Msg::Refused { reason }) if *reason == big));
        assert_eq!(leader.await.expect("leader"), Ok(()));
    }
}
