//! The leader's door: every connection to the coordinator port must prove
//! the secret before anything else it says is read, and then match the
//! version, the shard count and the flags, name a free index, and come
//! before the plan started. A refusal is one logged line, on both sides.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use super::auth;
use super::leader::Shared;
use super::wire::{JOIN_FRAME_LIMIT, MEMBER_FRAME_LIMIT, Msg, framed};

/// The whole handshake must finish within this.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// Test only: the version a shard announces instead of its own (the
/// mismatch test cannot build a second program version).
const TEST_VERSION_ENV: &str = "LDB_TEST_SHARD_VERSION";

/// The version a shard announces: protocol and program must both match.
pub(crate) fn version() -> String {
    std::env::var(TEST_VERSION_ENV)
        .unwrap_or_else(|_| format!("shard-protocol-1/{}", env!("CARGO_PKG_VERSION")))
}

/// Accept connections for the rest of the run.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(why) = handshake(stream, &shared).await {
                shared.note(format!("shard join refused from {peer}: {why}"));
            }
        });
    }
}

async fn handshake(stream: TcpStream, shared: &Arc<Shared>) -> Result<(), String> {
    let (mut reader, mut writer) = framed(stream, JOIN_FRAME_LIMIT);
    let first = reader.recv(HANDSHAKE_LIMIT).await?;
    let Msg::Join {
        version,
        shards,
        index,
        flags_digest,
    } = first
    else {
        return Err("the first message was not a join".into());
    };
    let nonce = auth::nonce();
    writer
        .send(&Msg::Challenge {
            nonce: nonce.clone(),
        })
        .await?;
    let Msg::Proof { mac } = reader.recv(HANDSHAKE_LIMIT).await? else {
        return Err("no proof of the secret".into());
    };
    let verdict = if !auth::verify(&shared.settings.secret, &nonce, index, &flags_digest, &mac) {
        Err("wrong shard secret".to_string())
    } else {
        admit(shared, &version, shards, index, &flags_digest)
    };
    if let Err(reason) = verdict {
        let why = format!("index {index}: {reason}");
        let _ = writer
            .send(&Msg::Refused {
                reason: reason.clone(),
            })
            .await;
        return Err(why);
    }
    writer.send(&Msg::Welcome).await?;
    reader.allow(MEMBER_FRAME_LIMIT);
    shared.add_member(index, reader, writer);
    shared.note(format!("shard {index} joined"));
    Ok(())
}

/// The checks after the secret, in the order a user fixes them.
fn admit(
    shared: &Shared,
    version: &str,
    shards: u32,
    index: u32,
    flags_digest: &str,
) -> Result<(), String> {
    let s = &shared.settings;
    let mine = self::version();
    if version != mine {
        return Err(format!(
            "version {version} differs from the leader's {mine}"
        ));
    }
    if shards != s.shards {
        return Err(format!(
            "--shards {shards} differs from the leader's {}",
            s.shards
        ));
    }
    if index == 0 || index >= s.shards {
        return Err(format!(
            "--shard-index {index} is not a follower's index (1..{})",
            s.shards - 1
        ));
    }
    if flags_digest != s.flags_digest {
        return Err(
            "the benchmark flags differ from the leader's (compare them with --print-config)"
                .into(),
        );
    }
    if shared.started.load(Ordering::Acquire) {
        return Err("too late: the leader's plan has started".into());
    }
    if shared.has_member(index) {
        return Err(format!("index {index} has joined already"));
    }
    Ok(())
}
