//! Sessions through a router and up to the model's context (issue 38,
//! items 4 and 6), against known truth.
//!
//! Two simulator processes behind a small HTTP router made here (loopback
//! only). Honouring, it sends each request to the replica that a hash of
//! the session header picks; ignoring, it deals the chat requests round
//! robin. It always answers with `x-replica: 127.0.0.1:PORT`. Truth: the
//! hash the test computes, the alternation of round robin, and each
//! replica's own `/metrics` read before and after the run.
//!
//! The context limit: a simulator whose `max_model_len` is small, so the
//! turn at which a session's conversation no longer fits is known.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{run, text};
use serde_json::Value;

/// The replica a session header value goes to when the router honours it.
fn hashed(value: &str, n: usize) -> usize {
    // FNV-1a: a stable hash the test can recompute.
    let h = value.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % n as u64) as usize
}

/// An HTTP router on loopback: one request per connection (it answers
/// `Connection: close`). `honour`: route by the hash of this request
/// header; else chat requests go round robin and the rest to replica 1.
fn start_router(backends: Vec<u16>, honour: Option<&'static str>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("router binds");
    let port = listener.local_addr().expect("addr").port();
    let next = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(client) = conn else { continue };
            let (backends, next) = (backends.clone(), next.clone());
            std::thread::spawn(move || {
                let _ = forward(client, &backends, honour, &next);
            });
        }
    });
    port
}

/// One request from `client` to the chosen backend and its answer back.
fn forward(
    client: TcpStream,
    backends: &[u16],
    honour: Option<&str>,
    next: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let (mut length, mut key, mut first) = (0usize, None, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        if first.is_empty() {
            first = line.clone();
            continue;
        }
        let (name, value) = line.split_once(':').unwrap_or((&line, ""));
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        match name.as_str() {
            "content-length" => length = value.parse().unwrap_or(0),
            "connection" => continue,
            n if Some(n) == honour => key = Some(value.clone()),
            _ => {}
        }
        head.push(line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let chat = first.starts_with("POST") && first.contains("/chat/completions");
    let i = match (key, chat) {
        (Some(k), _) => hashed(&k, backends.len()),
        (None, true) => next.fetch_add(1, Ordering::SeqCst) % backends.len(),
        (None, false) => 0,
    };
    let mut up = TcpStream::connect(("127.0.0.1", backends[i]))?;
    write!(up, "{first}{}Connection: close\r\n\r\n", head.concat())?;
    up.write_all(&body)?;
    let mut answer = BufReader::new(up);
    let mut out = client;
    let mut line = String::new();
    answer.read_line(&mut line)?;
    out.write_all(line.as_bytes())?;
    loop {
        line.clear();
        if answer.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if !line.to_ascii_lowercase().starts_with("connection:") {
            out.write_all(line.as_bytes())?;
        }
    }
    write!(
        out,
        "x-replica: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        backends[i]
    )?;
    std::io::copy(&mut answer, &mut out)?;
    Ok(())
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `/metrics` of a replica.
fn metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// A counter's value in a Prometheus page (summed over its series).
fn counter(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Two quickstart simulators; killed on drop.
fn two_replicas() -> ([u16; 2], [Killed; 2]) {
    let ports = [common::free_port(), common::free_port()];
    let sims = ports.map(|p| Killed(common::spawn_sim(p)));
    ports.into_iter().for_each(common::wait_listening);
    (ports, sims)
}

/// A session run through `router` with both replicas' metrics and `args`;
/// the result's session entry.
fn sessions_behind(router: u16, replicas: [u16; 2], args: &[&str]) -> Value {
    let (_d, out) = common::tmp("r.json");
    let mut all: Vec<String> = vec!["--host".into(), format!("http://127.0.0.1:{router}")];
    for p in replicas {
        all.extend(["--metrics-url".into(), format!("http://127.0.0.1:{p}")]);
    }
    all.extend(args.iter().map(|a| a.to_string()));
    all.extend(["--max-tokens", "16", "--user-tokens", "100"].map(String::from));
    all.extend(["--display-mode", "plain", "--no-hw-monitor", "--output"].map(String::from));
    all.push(out.display().to_string());
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    common::assert_valid(&doc);
    doc["session_results"][0].clone()
}

/// Hits ÷ lookups of a replica between two of its pages.
fn hit_rate(before: &str, after: &str) -> f64 {
    let d = |n: &str| counter(after, n) - counter(before, n);
    d("vllm:prefix_cache_hits_total") / d("vllm:prefix_cache_queries_total")
}

#[test]
fn a_router_honouring_the_session_header_keeps_every_session_on_one_replica() {
    let (ports, _sims) = two_replicas();
    let router = start_router(ports.to_vec(), Some("x-session-id"));
    let before = ports.map(metrics);
    let s = sessions_behind(
        router,
        ports,
        &[
            "--sessions",
            "3",
            "--turns",
            "3",
            "--session-header",
            "x-session-id",
            "--session-header-value",
            "s{session}",
            "--replica-header",
            "x-replica",
        ],
    );
    let after = ports.map(metrics);
    let r = &s["router"];
    assert_eq!(r["turns"], 9, "{r}");
    assert_eq!(r["attributed_by_header"], 9, "{r}");
    assert_eq!(
        (&r["unattributed"], &r["sessions_moved"]),
        (&0.into(), &0.into()),
        "{r}"
    );
    assert_eq!(r["affinity_failure_share"], 0.0, "{r}");
    for (i, session) in r["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .enumerate()
    {
        let want = hashed(&format!("s{i}"), 2) as u64 + 1;
        assert_eq!(
            session["replicas"],
            serde_json::json!([want, want, want]),
            "{session}"
        );
        assert_eq!(session["moves"], 0, "{session}");
    }
    for (k, rep) in r["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .enumerate()
    {
        let truth = hit_rate(&before[k], &after[k]);
        match rep["achieved_hit_rate"].as_f64() {
            Some(got) => assert!((got - truth).abs() < 1e-9, "{got} vs {truth}: {rep}"),
            None => assert!(truth.is_nan(), "replica {k}: {rep}"),
        }
    }
}

/// One session of four turns, 0.5 s apart: each turn is the only request
/// in flight between two reads of the counters, so the counters attribute
/// every turn without a replica header.
fn one_session(router: u16, ports: [u16; 2]) -> Value {
    let args = [
        "--sessions",
        "1",
        "--turns",
        "4",
        "--think-time",
        "0.5",
        "--session-header",
        "x-session-id",
    ];
    sessions_behind(router, ports, &args)
}

#[test]
fn without_a_replica_header_lone_turns_are_attributed_and_round_robin_moves_every_turn() {
    let (ports, _sims) = two_replicas();
    let ignoring = one_session(start_router(ports.to_vec(), None), ports);
    let r = &ignoring["router"];
    assert_eq!(r["attributed_by_counters"], 4, "{r}");
    assert_eq!(r["unattributed_share"], 0.0, "{r}");
    let moved = &r["sessions"][0];
    assert_eq!(moved["moves"], 3, "{moved}");
    let path: Vec<u64> = moved["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .map(|v| v.as_u64().expect("attributed"))
        .collect();
    assert!(path.windows(2).all(|w| w[0] != w[1]), "{path:?}");
    assert_eq!(
        (&r["sessions_moved"], &r["affinity_failure_share"]),
        (&1.into(), &1.0.into())
    );
    // The same session on fresh replicas through a router that honours the
    // header: it stays, and its turns find more of their prompt cached.
    let (ports, _sims) = two_replicas();
    let honouring = one_session(start_router(ports.to_vec(), Some("x-session-id")), ports);
    let kept = &honouring["router"]["sessions"][0];
    assert_eq!(kept["moves"], 0, "{kept}");
    let rate = |s: &Value| s["achieved_hit_rate"].as_f64().expect("rate");
    assert!(rate(kept) > rate(moved) + 0.1, "{kept} vs {moved}");
}

/// A paced simulator (1 ms a token) whose context is `limit` tokens.
fn small_context(dir: &std::path::Path, limit: u64) -> String {
    let path = dir.join(format!("ctx{limit}.toml"));
    let toml = common::paced_scenario(0.001, 64, 65536).replace(
        "max_model_len = 1048576",
        &format!("max_model_len = {limit}"),
    );
    std::fs::write(&path, toml).expect("scenario");
    path.display().to_string()
}

/// Sessions of 200-token messages and 50-token replies on `scenario`.
fn grow(scenario: &str, out: &std::path::Path) -> Value {
    let o = run(&[
        "--sim",
        scenario,
        "--sessions",
        "2",
        "--turns",
        "6",
        "--user-tokens",
        "200",
        "--max-tokens",
        "50",
        "--display-mode",
        "plain",
        "--no-hw-monitor",
        "--output",
        &out.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out).expect("result")).expect("JSON");
    common::assert_valid(&doc);
    doc["session_results"][0].clone()
}

#[test]
fn a_session_that_outgrows_the_context_stops_at_the_turn_that_would_not_fit() {
    let (dir, out) = common::tmp("ctx.json");
    // Prompts of 200, 476, 752 and 1,028 tokens (each turn adds the
    // 50-token reply, the framing and 200 new tokens): with 50 output
    // tokens the fourth turn does not fit 1,000.
    let s = grow(&small_context(dir.path(), 1000), &out);
    assert_eq!(s["status"], "ok", "{s}");
    assert_eq!(s["sessions_stopped_at_context_limit"], 2, "{s}");
    let p = |t: usize| {
        s["by_turn"][t]["prompt_tokens_mean"]
            .as_f64()
            .expect("prompt")
    };
    assert_eq!(s["by_turn"].as_array().map(Vec::len), Some(3), "{s}");
    for (i, stop) in s["context_limit_stops"]
        .as_array()
        .expect("stops")
        .iter()
        .enumerate()
    {
        assert_eq!(
            (&stop["session"], &stop["turn"]),
            (&i.into(), &4.into()),
            "{stop}"
        );
        assert_eq!(stop["limit"], 1000, "{stop}");
        assert_eq!(stop["refused_by_server"], false, "{stop}");
    }
    assert_eq!(s["summary"]["errors"], 0, "{s}");
    // Each turn adds as much as the last: the fourth prompt is p3 + (p3 −
    // p2). A limit one short of it plus the output passes the client's
    // count (which leaves out the chat template's framing) and the server
    // refuses: the same stop, told apart, and no error.
    let p4 = 2.0 * p(2) - p(1);
    let limit = (p4 + 50.0 - 1.0) as u64;
    let s = grow(&small_context(dir.path(), limit), &out);
    assert_eq!(s["status"], "ok", "{s}");
    assert_eq!(s["sessions_stopped_at_context_limit"], 2, "{s}");
    for stop in s["context_limit_stops"].as_array().expect("stops") {
        assert_eq!(stop["turn"], 4, "{stop}");
        assert_eq!(stop["refused_by_server"], true, "{stop}");
    }
    assert_eq!(s["summary"]["errors"], 0, "{s}");
}

#[test]
fn a_credential_header_an_unknown_placeholder_or_no_sessions_is_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["--sessions", "1", "--session-header", "Authorization"],
            "reserved",
        ),
        (
            vec![
                "--sessions",
                "1",
                "--session-header",
                "x-s",
                "--session-header-value",
                "{HOME}",
            ],
            "unknown placeholder",
        ),
        (
            vec!["--replica-header", "x-replica"],
            "--sessions or --trace-sessions",
        ),
        (
            vec!["--sessions", "1", "--session-header-value", "a"],
            "--session-header NAME",
        ),
    ] {
        let o = run(&[&["--sim", "quickstart", "--no-hw-monitor"][..], &args].concat());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// The flags of `sessions_behind`, run over two shard processes (the
/// leader and one follower on loopback): the leader's session entry.
fn sharded_behind(router: u16, replicas: [u16; 2], args: &[&str]) -> Value {
    let (dir, out) = common::tmp("r.json");
    let coord = format!("127.0.0.1:{}", common::free_port());
    let mut kids: Vec<std::process::Child> = (0..2)
        .map(|i: u32| {
            let mut c = common::bin();
            c.args(["--host", &format!("http://127.0.0.1:{router}")]);
            for p in replicas {
                c.args(["--metrics-url", &format!("http://127.0.0.1:{p}")]);
            }
            c.args(args)
                .args(["--max-tokens", "16", "--user-tokens", "100"])
                .args(["--display-mode", "plain", "--no-hw-monitor", "--output"])
                .arg(&out)
                .args(["--shards", "2", "--shard-index", &i.to_string()])
                .args(["--coordinator", &coord, "--shard-join-timeout", "60"])
                .env("LDB_SHARD_SECRET", "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(dir.path().join(format!("{i}.err"))).expect("log"))
                .spawn()
                .expect("shard starts")
        })
        .collect();
    for (i, k) in kids.iter_mut().enumerate() {
        let code = common::wait(k, std::time::Duration::from_secs(120));
        let err = std::fs::read_to_string(dir.path().join(format!("{i}.err"))).unwrap_or_default();
        assert_eq!(code, Some(0), "shard {i}: {err}");
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("result")).expect("JSON");
    common::assert_valid(&doc);
    doc["session_results"][0].clone()
}

/// Over shards (docs/shards.md, "Sessions"): the follower's turns carry
/// the session header (the router keeps each session on the replica its
/// hash picks) and the router's replica header names their replica, as
/// the leader's do; without the replica header no shard sees every turn
/// in flight, so the counter rule attributes nothing and every turn is
/// unattributed.
#[test]
fn over_shards_the_replica_header_attributes_every_turn_and_the_counters_none() {
    let (ports, _sims) = two_replicas();
    let router = start_router(ports.to_vec(), Some("x-session-id"));
    let header = [
        "--session-header",
        "x-session-id",
        "--session-header-value",
        "s{session}",
    ];
    let mut args = vec!["--sessions", "4", "--turns", "3"];
    args.extend(header);
    let named: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--replica-header", "x-replica"])
        .collect();
    let s = sharded_behind(router, ports, &named);
    let r = &s["router"];
    assert_eq!(
        (&r["turns"], &r["attributed_by_header"]),
        (&12.into(), &12.into()),
        "{r}"
    );
    assert_eq!(r["sessions_moved"], 0, "{r}");
    for (i, session) in r["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .enumerate()
    {
        let want = hashed(&format!("s{i}"), 2) as u64 + 1;
        assert_eq!(
            session["replicas"],
            serde_json::json!([want, want, want]),
            "{session}"
        );
    }
    let s = sharded_behind(router, ports, &args);
    let r = &s["router"];
    assert_eq!(r["turns"], 12, "{r}");
    assert_eq!(
        (&r["attributed_by_counters"], &r["unattributed"]),
        (&0.into(), &12.into()),
        "{r}"
    );
}
