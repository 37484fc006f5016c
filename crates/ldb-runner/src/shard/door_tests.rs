//! The whole handshake over real sockets, in one process: a follower joins
//! a leader over IPv6 loopback (the leader listens where it is told), its
//! sealed frames carry the clock exchange and the finish, and a second
//! join for the same index is refused; a mute door holds a follower no
//! longer than its join timeout.

use std::time::Duration;

use ldb_client::Http;

use super::follower::{FollowEnd, FollowerSettings, follow};
use super::leader::{LeaderSettings, ShardLeader};

const SECRET: &str = "0123456789abcdef0123456789abcdef";

fn follower(coordinator: String) -> FollowerSettings {
    FollowerSettings {
        coordinator,
        shards: 2,
        index: 1,
        secret: SECRET.into(),
        flags_digest: "d".into(),
        join_wait: Duration::from_secs(10),
        clock_offset_s: 0.0,
    }
}

async fn run(s: FollowerSettings) -> FollowEnd {
    let http = Http::new("http://127.0.0.1:9", None, 1).expect("client");
    follow(&s, http, None, |_| {}).await.0
}

#[tokio::test]
async fn a_follower_joins_over_ipv6_and_a_second_join_for_its_index_is_refused() {
    let settings = LeaderSettings {
        shards: 2,
        secret: SECRET.into(),
        flags_digest: "d".into(),
        join_wait: Duration::from_secs(10),
        stop_on_loss: false,
    };
    let Ok(leader) = ShardLeader::bind("[::1]:0", settings).await else {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    };
    let at = leader.local_addr();
    assert!(at.is_ipv6(), "{at}");
    let first = tokio::spawn(run(follower(at.to_string())));
    leader.wait_for_members().await.expect("joined");
    assert_eq!(leader.live_members(), [1]);
    assert!(leader.clock(1).is_some(), "the sealed clock exchange ran");
    let second = run(follower(at.to_string())).await;
    assert!(
        matches!(&second, FollowEnd::Refused(r) if r.contains("has joined already")),
        "{second:?}"
    );
    leader.finish().await;
    let end = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("ends")
        .expect("task");
    assert_eq!(end, FollowEnd::Finished);
}

#[tokio::test]
async fn a_door_that_accepts_and_says_nothing_holds_a_follower_no_longer_than_its_join_timeout() {
    let mute = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let at = mute.local_addr().expect("addr");
    // Accept every connection and keep it open without a word.
    let _keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = mute.accept().await {
            held.push(s);
        }
    });
    let s = FollowerSettings {
        join_wait: Duration::from_secs(1),
        ..follower(at.to_string())
    };
    let t0 = std::time::Instant::now();
    let end = run(s).await;
    assert!(matches!(end, FollowEnd::Unreachable(_)), "{end:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}
