//! A follower's way in: reach the leader (retrying while it starts or
//! while its door is busy) and pass its door, the leader proving the
//! secret first (docs/shards.md, "Join"; docs/security.md).

use std::time::Duration;

use tokio::net::TcpStream;

use super::auth::{self, Binding, Side};
use super::follower::{FollowEnd, FollowerSettings};
use super::join::version;
use super::wire::{JOIN_FRAME_LIMIT, MEMBER_FRAME_LIMIT, Msg, Reader, WireError, Writer, framed};

/// Reach the leader (retrying while it starts, or while its door is busy)
/// and pass its door, all within `--shard-join-timeout`.
pub(super) async fn join(s: &FollowerSettings) -> Result<(Reader, Writer), FollowEnd> {
    let deadline = tokio::time::Instant::now() + s.join_wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let why = match tokio::time::timeout(left, TcpStream::connect(&s.coordinator)).await {
            // The handshake too ends by the deadline (a door that accepts
            // and says nothing does not hold the follower longer).
            Ok(Ok(stream)) => match tokio::time::timeout_at(deadline, handshake(s, stream)).await {
                Ok(Ok(rw)) => return Ok(rw),
                Ok(Err(Door::Final(end))) => return Err(end),
                Ok(Err(Door::Again(why))) => why,
                Err(_) => "the leader's door did not answer".into(),
            },
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer".into(),
        };
        if tokio::time::Instant::now() + JOIN_RETRY >= deadline {
            return Err(FollowEnd::Unreachable(format!(
                "cannot join the leader at {} within {:.0} s: {why}",
                s.coordinator,
                s.join_wait.as_secs_f64()
            )));
        }
        tokio::time::sleep(JOIN_RETRY).await;
    }
}

/// Pause between tries to reach the leader.
const JOIN_RETRY: Duration = Duration::from_millis(250);

/// How one try at the door ended, when not joined.
enum Door {
    /// Closed before the leader said anything (starting, or busy): try again.
    Again(String),
    /// Refused, or the leader failed to prove the secret: stop.
    Final(FollowEnd),
}

/// One try at the door. The leader proves the secret first (bound to our
/// fresh nonce); only then is our proof sent, so a party that is not our
/// leader gets nothing to guess the secret from and no order is obeyed.
async fn handshake(s: &FollowerSettings, stream: TcpStream) -> Result<(Reader, Writer), Door> {
    // Frames before the leader is proven are held to the join limit.
    let (mut reader, mut writer) = framed(stream, JOIN_FRAME_LIMIT);
    let lost = |e: String| Door::Final(FollowEnd::LeaderLost(format!("during the join: {e}")));
    let my_nonce = auth::nonce();
    let join = Msg::Join {
        version: version(),
        shards: s.shards,
        index: s.index,
        flags_digest: s.flags_digest.clone(),
        nonce: my_nonce.clone(),
    };
    writer.send(&join).await.map_err(Door::Again)?;
    let (leader_nonce, leader_proof) = match reader.recv(JOIN_STEP).await {
        Ok(Msg::Challenge { nonce, proof }) => (nonce, proof),
        Ok(_) => return Err(impostor(s)),
        // A busy door closes without a word: try again.
        Err(e @ (WireError::Closed | WireError::Frame)) => return Err(Door::Again(e.to_string())),
        Err(e) => return Err(lost(e.to_string())),
    };
    let b = Binding {
        follower_nonce: &my_nonce,
        leader_nonce: &leader_nonce,
        index: s.index,
        flags_digest: &s.flags_digest,
    };
    if !auth::is_nonce(&leader_nonce) || !auth::verify(&s.secret, Side::Leader, &b, &leader_proof) {
        return Err(impostor(s));
    }
    let mac = auth::proof(&s.secret, Side::Follower, &b);
    writer.send(&Msg::Proof { mac }).await.map_err(&lost)?;
    let (to_leader, from_leader) = {
        let (l2f, f2l) = auth::session_keys(&s.secret, &b);
        (f2l, l2f)
    };
    writer.seal(to_leader);
    reader.seal(from_leader);
    match reader.recv(JOIN_STEP).await {
        Ok(Msg::Welcome) => {
            reader.allow(MEMBER_FRAME_LIMIT);
            Ok((reader, writer))
        }
        Ok(Msg::Refused { reason }) => Err(Door::Final(FollowEnd::Refused(printable(&reason)))),
        Ok(_) => Err(lost("an unexpected answer".into())),
        Err(e) => Err(Door::Final(FollowEnd::Refused(format!(
            "the leader closed the join: {e}"
        )))),
    }
}

/// How long each answer of the leader's door may take.
const JOIN_STEP: Duration = Duration::from_secs(10);

/// The leader did not prove the secret: nothing more is said to it.
fn impostor(s: &FollowerSettings) -> Door {
    Door::Final(FollowEnd::Refused(format!(
        "the leader at {} did not prove the shard secret (its secret differs, or it is not \
         our leader); no proof and no request was sent",
        s.coordinator
    )))
}

/// A refusal's words as shown (control characters dropped, length capped):
/// they come from the leader, and a terminal must not act on them.
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(300).collect()
}
