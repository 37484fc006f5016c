//! The leader's door. Anyone on the network can reach the coordinator port,
//! so: at most [`HANDSHAKE_SLOTS`] handshakes at once (more are closed at
//! once), one deadline for a whole handshake, accept errors backed off,
//! both sides prove the secret (the leader first, bound to the joiner's own
//! nonce; then the joiner, checked before anything else it said is read),
//! then the version, the shard count, the index and the flags are matched
//! and the member is added in one step under the members' lock (two joins
//! for one index cannot both pass). A refusal is counted by address and
//! class (`refusals.rs`), never logged with the stranger's bytes.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::auth::{self, Binding, Side};
use super::leader::{Claims, Shared};
use super::refusals::Refusal;
use super::wire::{JOIN_FRAME_LIMIT, MEMBER_FRAME_LIMIT, Msg, WireError, framed};

/// The whole handshake, from accept to welcome, must finish within this.
pub(crate) const HANDSHAKE_LIMIT: Duration = Duration::from_secs(5);
/// Handshakes in progress at most; a connection beyond is closed at once
/// (so idle strangers cannot hold the descriptors the streams need, and a
/// follower that finds the door busy tries again).
pub(crate) const HANDSHAKE_SLOTS: usize = 32;
/// Longest pause after failing accepts (out of descriptors, say).
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Test only: the version a shard announces instead of its own (the
/// mismatch test cannot build a second program version).
const TEST_VERSION_ENV: &str = "LDB_TEST_SHARD_VERSION";

/// The version a shard announces: protocol and program must both match.
pub(crate) fn version() -> String {
    std::env::var(TEST_VERSION_ENV)
        .unwrap_or_else(|_| format!("shard-protocol-2/{}", env!("CARGO_PKG_VERSION")))
}

/// Accept connections for the rest of the run.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(HANDSHAKE_SLOTS));
    let mut backoff = Duration::ZERO;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => {
                backoff = Duration::ZERO;
                x
            }
            Err(_) => {
                // Failing accepts return at once: pause, longer each time,
                // instead of spinning a core.
                backoff = (backoff * 2).clamp(Duration::from_millis(10), ACCEPT_BACKOFF_MAX);
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            shared.refused(peer.ip(), Refusal::Busy);
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(HANDSHAKE_LIMIT, handshake(stream, &shared)).await;
            drop(slot);
            match r {
                Err(_) => shared.refused(peer.ip(), Refusal::Timeout),
                Ok(Err(why)) => shared.refused(peer.ip(), why),
                Ok(Ok(index)) => shared.note(format!("shard {index} joined")),
            }
        });
    }
}

/// A join as the door reads it.
pub(crate) struct JoinMsg {
    pub version: String,
    pub shards: u32,
    pub index: u32,
    pub flags_digest: String,
    pub nonce: String,
}

/// The first message as a well-formed join (its nonce fresh-looking, its
/// strings short), else [`Refusal::NotAJoin`].
pub(crate) fn as_join(m: Msg) -> Result<JoinMsg, Refusal> {
    let Msg::Join {
        version,
        shards,
        index,
        flags_digest,
        nonce,
    } = m
    else {
        return Err(Refusal::NotAJoin);
    };
    if !auth::is_nonce(&nonce) || flags_digest.len() > 128 || version.len() > 256 {
        return Err(Refusal::NotAJoin);
    }
    Ok(JoinMsg {
        version,
        shards,
        index,
        flags_digest,
        nonce,
    })
}

/// One connection's handshake: the member's index when it joined.
async fn handshake(stream: TcpStream, shared: &Arc<Shared>) -> Result<u32, Refusal> {
    let (mut reader, mut writer) = framed(stream, JOIN_FRAME_LIMIT);
    let frame_err = |e: WireError| match e {
        WireError::NotAMessage | WireError::Range(_) => Refusal::NotAJoin,
        _ => Refusal::BadFrame,
    };
    let first = reader.recv(HANDSHAKE_LIMIT).await.map_err(frame_err)?;
    let JoinMsg {
        version,
        shards,
        index,
        flags_digest,
        nonce: follower_nonce,
    } = as_join(first)?;
    let secret = &shared.settings.secret;
    let leader_nonce = auth::nonce();
    let b = Binding {
        follower_nonce: &follower_nonce,
        leader_nonce: &leader_nonce,
        index,
        flags_digest: &flags_digest,
    };
    let challenge = Msg::Challenge {
        nonce: leader_nonce.clone(),
        proof: auth::proof(secret, Side::Leader, &b),
    };
    writer
        .send(&challenge)
        .await
        .map_err(|_| Refusal::BadFrame)?;
    let mac = match reader.recv(HANDSHAKE_LIMIT).await {
        Ok(Msg::Proof { mac }) => mac,
        Ok(_) => return Err(Refusal::NotAJoin),
        // A follower whose secret differs stops here: our proof failed.
        Err(WireError::Closed) => return Err(Refusal::NoProof),
        Err(e) => return Err(frame_err(e)),
    };
    if !auth::verify(secret, Side::Follower, &b, &mac) {
        return Err(Refusal::WrongSecret);
    }
    // From here the joiner holds the secret: every frame is sealed.
    let (to_member, from_member) = auth::session_keys(secret, &b);
    writer.seal(to_member);
    reader.seal(from_member);
    let claims = Claims {
        version: &version,
        shards,
        index,
        flags_digest: &flags_digest,
    };
    match shared.try_join(&claims) {
        Ok(queue) => {
            reader.allow(MEMBER_FRAME_LIMIT);
            shared.run_member(index, reader, writer, queue);
            Ok(index)
        }
        Err((class, reason)) => {
            let _ = writer.send(&Msg::Refused { reason }).await;
            Err(class)
        }
    }
}
