//! The coordinator port against hostile parties (docs/security.md,
//! "Coordinator port (shards)"): a leader flooded with idle connections and
//! bad joins still runs its cell with its follower and keeps none of the
//! strangers' bytes; a follower facing an impostor leader gives it no proof
//! and sends no request. Processes on loopback; the frames are written by
//! hand here (4-byte big-endian length, then JSON), as a stranger would.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{bin, sim, text, tmp, wait};

/// A secret strong enough for the door (128 bits of hex).
const SECRET: &str = "5f0e6c1d9a8b7c6d5e4f3a2b1c0d9e8f";
/// In every stranger's bytes: it must appear nowhere afterwards.
const MARK: &str = "EVILMARK";

fn flags(url: &str, coord: &str, index: u32, out: &Path) -> Vec<String> {
    let out = out.to_str().expect("path").to_string();
    [
        "--host",
        url,
        "--concurrency",
        "4",
        "--contexts",
        "0",
        "--skip-prefill",
        "--duration",
        "2",
        "--decode-warmup-seconds",
        "0",
        "--max-tokens",
        "500",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--shards",
        "2",
        "--shard-index",
        &index.to_string(),
        "--coordinator",
        coord,
        "--shard-join-timeout",
        "60",
        "--output",
        &out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn(args: &[String], log: &Path) -> Child {
    bin()
        .args(args)
        .env("LDB_SHARD_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("shard starts")
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

fn join_json(version: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({"type": "join", "version": version, "shards": 2, "index": 1,
        "flags_digest": digest, "nonce": "ab".repeat(32)})
    .to_string()
    .into_bytes()
}

/// One bad join of kind `k`, each carrying [`MARK`].
fn bad_join(addr: &str, k: usize) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(6)));
    let escape = format!("\u{1b}[2J\u{1b}]0;{MARK}\u{7}\n{MARK}\r\n");
    let _ = match k % 5 {
        // Garbage, no framing at all.
        0 => s.write_all(format!("GET / HTTP/1.1\r\n{MARK}\r\n\r\n").as_bytes()),
        // A frame claiming 2 GiB.
        1 => s
            .write_all(&[0x7f, 0xff, 0xff, 0xff])
            .and_then(|()| s.write_all(MARK.as_bytes())),
        // A message of no known type, with escape codes.
        2 => s.write_all(&frame(
            serde_json::json!({"type": escape, "x": MARK})
                .to_string()
                .as_bytes(),
        )),
        // A join whose strings carry escape codes and newlines.
        3 => s.write_all(&frame(&join_json(&escape, &escape))),
        // A well-formed join, then a wrong proof.
        _ => s.write_all(&frame(&join_json(MARK, MARK))).and_then(|()| {
            let _ = read_frame(&mut s);
            s.write_all(&frame(
                serde_json::json!({"type": "proof", "mac": "00".repeat(32)})
                    .to_string()
                    .as_bytes(),
            ))
        }),
    };
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
}

#[test]
fn a_flooded_coordinator_port_still_runs_its_cell_and_keeps_no_strangers_bytes() {
    let sim = sim();
    let url = sim.url.clone();
    let (dir, out) = tmp("r.json");
    let coord = format!("127.0.0.1:{}", common::free_port());
    let lead_log = dir.path().join("leader.err");
    let mut leader = spawn(&flags(&url, &coord, 0, &out), &lead_log);
    let t0 = Instant::now();
    while !std::fs::read_to_string(&lead_log).is_ok_and(|t| t.contains("waiting for")) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the leader never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // 500 idle connections, held to the end; 100 bad joins at once.
    let idle: Vec<TcpStream> = (0..500)
        .filter_map(|_| TcpStream::connect(&coord).ok())
        .collect();
    let bad: Vec<_> = (0..100)
        .map(|k| {
            let c = coord.clone();
            std::thread::spawn(move || bad_join(&c, k))
        })
        .collect();
    let fol_log = dir.path().join("follower.err");
    let mut follower = spawn(&flags(&url, &coord, 1, &out), &fol_log);
    let (lc, fc) = (
        wait(&mut leader, Duration::from_secs(90)),
        wait(&mut follower, Duration::from_secs(30)),
    );
    for b in bad {
        let _ = b.join();
    }
    drop(idle);
    drop(sim);
    let (le, fe) = (
        std::fs::read_to_string(&lead_log).unwrap_or_default(),
        std::fs::read_to_string(&fol_log).unwrap_or_default(),
    );
    assert_eq!((lc, fc), (Some(0), Some(0)), "{le}\n{fe}");
    let raw = std::fs::read_to_string(&out).expect("result");
    let doc: serde_json::Value = serde_json::from_str(&raw).expect("JSON");
    assert_eq!(doc["results"][0]["status"], "ok", "{le}");
    assert!(
        raw.contains("shard joins refused from 127.0.0.1"),
        "summarised: {le}"
    );
    for (name, t) in [("result", &raw), ("leader stderr", &le)] {
        assert!(!t.contains(MARK), "a stranger's bytes in the {name}");
        assert!(
            !t.contains('\u{1b}') && !t.contains("u001b"),
            "an escape in the {name}"
        );
    }
    // One line per (address, class) on stderr, not one per connection.
    assert!(le.matches("shard join refused").count() <= 10, "{le}");
}

#[test]
fn an_impostor_leader_gets_no_proof_and_no_request_leaves() {
    // The server the follower would load: it counts connections.
    let server = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", server.local_addr().expect("addr"));
    let hits = Arc::new(AtomicU64::new(0));
    {
        let hits = hits.clone();
        std::thread::spawn(move || {
            for c in server.incoming() {
                hits.fetch_add(1, Ordering::SeqCst);
                drop(c);
            }
        });
    }
    // The impostor: answers the join with a challenge and a made-up proof.
    let door = TcpListener::bind("127.0.0.1:0").expect("bind");
    let coord = door.local_addr().expect("addr").to_string();
    let impostor = std::thread::spawn(move || {
        let (mut s, _) = door.accept().expect("accept");
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let join = read_frame(&mut s).expect("a join");
        let challenge = serde_json::json!({"type": "challenge", "nonce": "cd".repeat(32),
            "proof": "ef".repeat(32)});
        s.write_all(&frame(challenge.to_string().as_bytes()))
            .expect("send");
        (join, read_frame(&mut s))
    });
    let (dir, out) = tmp("r.json");
    let o = bin()
        .args(flags(&url, &coord, 1, &out))
        .env("LDB_SHARD_SECRET", SECRET)
        .output()
        .expect("follower");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("did not prove the shard secret"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (join, after) = impostor.join().expect("impostor");
    assert!(text(&join).contains("\"type\":\"join\""));
    assert!(
        after.is_none(),
        "the follower sent more: {:?}",
        after.map(|b| text(&b))
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a request left the follower"
    );
    assert!(!dir.path().join("r.shard-1.json").exists() || !err.is_empty());
}
